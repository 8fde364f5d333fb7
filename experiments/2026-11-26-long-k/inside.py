"""The same kernel timed by the evaluator (judge and runner, with and without the baselines beside it) and
by a plain back-to-back loop, with the SM clock, power and throttle reasons sampled by NVML every 10 ms.
Is the evaluator's figure for a long-K kernel its clock, or something else?

Usage (one GPU): python inside.py OUT_DIR
"""

from __future__ import annotations

import ctypes
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from probe import BASE
from sustained import Sampler, phase

SHAPE = (4096, 16384, 16384)


def clocks(sampler: Sampler, t0: float, t1: float) -> dict:
    s = [x for x in sampler.samples if t0 <= x["t"] <= t1]
    busy = [x for x in s if x["w"] > 300]
    return {"samples": len(s), "busy_samples": len(busy),
            "sm_mhz_busy_median": statistics.median(x["sm_mhz"] for x in busy) if busy else None,
            "sm_mhz_busy_p10": statistics.quantiles([x["sm_mhz"] for x in busy], n=10)[0] if len(busy) > 2 else None,
            "power_w_busy_median": statistics.median(x["w"] for x in busy) if busy else None,
            "throttle": sorted({hex(x["throttle"]) for x in s})}  # fmt: skip


def plain_loop(lib, sampler: Sampler) -> dict:
    M, N, K = SHAPE
    a = torch.rand(M, K, device="cuda", dtype=torch.half) * 2 - 1  # the evaluator's draws: uniform in [-1, 1)
    bt = torch.rand(N, K, device="cuda", dtype=torch.half) * 2 - 1
    c = torch.empty(M, N, device="cuda", dtype=torch.half)

    def ours():
        lib.hgemm_run(ctypes.c_void_p(a.data_ptr()), None, ctypes.c_void_p(bt.data_ptr()),
                      ctypes.c_void_p(c.data_ptr()), M, N, K, None, ctypes.c_size_t(0),
                      ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))  # fmt: skip

    t0 = time.time()
    times = phase(ours, 2.0)
    return {"how": "plain loop", "median_us": statistics.median(times), **clocks(sampler, t0 + 0.3, time.time())}


def main(out_dir: str) -> None:
    from hgemm.evaluator.compile import compile_trusted
    from hgemm.evaluator.kernels import get_family
    from hgemm.evaluator.local import LocalEvaluator

    source = get_family("wgmma").render(BASE)
    comp = compile_trusted(source)
    lib = ctypes.CDLL(comp.lib_path)
    sampler = Sampler()
    sampler.sleep_s = 0.01
    sampler.start()
    rows = []
    rows.append(plain_loop(lib, sampler))
    print(rows[-1], flush=True)
    for baselines in (True, False, True):
        with LocalEvaluator(baselines=baselines) as ev:
            ev.evaluate([source], SHAPE, stage="full", modes=("offline",))  # warm: contexts, graphs, caches
            t0 = time.time()
            (rec,) = ev.evaluate([source], SHAPE, stage="full", modes=("offline",))
            t1 = time.time()
        off = rec.modes.get("offline")
        rows.append({"how": f"evaluator, baselines={baselines}", "ok": rec.ok, "phases": rec.phases,
                     "median_us": off.candidate.median_us if off else None,
                     "p10_us": off.candidate.p10_us if off else None,
                     "baselines_us": {k: v.median_us for k, v in off.baselines.items()} if off else None,
                     **clocks(sampler, t0, t1)})  # fmt: skip
        print(rows[-1], flush=True)
    sampler.stop = True
    Path(out_dir, "inside.json").write_text(json.dumps({"rows": rows, "samples": sampler.samples}, indent=0))


if __name__ == "__main__":
    main(sys.argv[1])
