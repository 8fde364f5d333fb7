"""Sustained back-to-back runs of our 128x256 2x1-cluster wgmma kernel and of cuBLAS (torch, A @ Bt.T) on the
same inputs, alternated in 2-second phases, with the SM clock, power and throttle reasons sampled by NVML
every 20 ms. Does our kernel lose its clock under load where cuBLAS does not?

Usage (one GPU): python sustained.py OUT_DIR
"""

from __future__ import annotations

import ctypes
import json
import statistics
import sys
import threading
import time
from pathlib import Path

import pynvml
import torch
from hgemm.evaluator.compile import compile_trusted
from hgemm.evaluator.kernels import get_family
from probe import BASE

SHAPES = [(4096, 16384, 16384), (1024, 8192, 16384), (8192, 8192, 8192)]
PHASE_S = 2.0


class Sampler(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        pynvml.nvmlInit()
        self.h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        self.tag, self.samples, self.stop, self.sleep_s = "idle", [], False, 0.02

    def run(self):
        while not self.stop:
            h = self.h
            self.samples.append({
                "t": time.time(), "tag": self.tag,
                "sm_mhz": pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                "w": pynvml.nvmlDeviceGetPowerUsage(h) / 1000,
                "throttle": pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h),
                "temp": pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
            })  # fmt: skip
            time.sleep(self.sleep_s)


def phase(fn, seconds: float) -> list[float]:
    times = []
    end = time.time() + seconds
    while time.time() < end:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000)
    return times


def run_shape(lib, sampler: Sampler, M: int, N: int, K: int) -> list[dict]:
    results = []
    a = torch.randn(M, K, device="cuda", dtype=torch.half)
    bt = torch.randn(N, K, device="cuda", dtype=torch.half)
    c = torch.empty(M, N, device="cuda", dtype=torch.half)
    stream = torch.cuda.current_stream().cuda_stream

    def ours():
        rc = lib.hgemm_run(ctypes.c_void_p(a.data_ptr()), None, ctypes.c_void_p(bt.data_ptr()),
                           ctypes.c_void_p(c.data_ptr()), M, N, K, None, ctypes.c_size_t(0),
                           ctypes.c_void_p(stream))  # fmt: skip
        assert rc == 0, rc

    def cublas():
        torch.matmul(a, bt.t(), out=c)

    ours()
    torch.cuda.synchronize()
    err = (c.float() - (a.float() @ bt.float().t())).abs().max().item()
    for name, fn in (("cublas", cublas), ("ours", ours), ("cublas", cublas), ("ours", ours)):
        sampler.tag = f"{M}x{N}x{K} {name}"
        t0 = time.time()
        times = phase(fn, PHASE_S)
        t1 = time.time()
        sampler.tag = "idle"
        time.sleep(0.5)
        s = [x for x in sampler.samples if t0 + 0.2 <= x["t"] <= t1]
        row = {"shape": [M, N, K], "kernel": name, "n": len(times), "max_abs_err": err,
               "p10_us": statistics.quantiles(times, n=10)[0], "median_us": statistics.median(times),
               "p90_us": statistics.quantiles(times, n=10)[-1], "first5_us": times[:5],
               "sm_mhz_median": statistics.median(x["sm_mhz"] for x in s) if s else None,
               "power_w_median": statistics.median(x["w"] for x in s) if s else None,
               "throttle_reasons": sorted({hex(x["throttle"]) for x in s}),
               "temp_max": max((x["temp"] for x in s), default=None)}  # fmt: skip
        results.append(row)
        print(f"{M}x{N}x{K} {name:6s} n={row['n']:5d} p10 {row['p10_us']:8.1f} med {row['median_us']:8.1f} "
              f"p90 {row['p90_us']:8.1f} us  {row['sm_mhz_median']} MHz {row['power_w_median']:.0f} W "
              f"{row['throttle_reasons']} {row['temp_max']}C", flush=True)  # fmt: skip
    return results


def main(out_dir: str) -> None:
    out = Path(out_dir)
    comp = compile_trusted(get_family("wgmma").render(BASE))
    assert comp.ok, comp.log
    lib = ctypes.CDLL(comp.lib_path)
    lib.hgemm_run.restype = ctypes.c_int
    sampler = Sampler()
    sampler.start()
    results = []
    for M, N, K in SHAPES:
        results += run_shape(lib, sampler, M, N, K)
    sampler.stop = True
    (out / "sustained.json").write_text(json.dumps({"rows": results, "samples": sampler.samples[::5]}, indent=0))


if __name__ == "__main__":
    main(sys.argv[1])
