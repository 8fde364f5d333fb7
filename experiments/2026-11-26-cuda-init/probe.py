"""Probe: what a fresh process's CUDA start-up costs (`cuInit`, then the context), alone and two at once, and
whether processes doing `cuInit` (or `cuInit` and a context) beside event timings on the same GPU disturb them.

    python probe.py cost N NDEV              # N fresh processes per series; NDEV GPUs on the host
    python probe.py interleaved KIND PAIRS WINDOW_S   # KIND: init or ctx
    python probe.py bg KIND                  # (used by `interleaved`) fresh processes in a loop

Needs torch (for the timed GEMMs) and the CUDA runtime wheel beside it."""

import glob
import json
import os
import signal
import statistics as st
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

CHILD = r"""
import ctypes, json, sys, time
t0 = time.perf_counter(); cu = ctypes.CDLL("libcuda.so.1"); rt = ctypes.CDLL(sys.argv[1]); t1 = time.perf_counter()
r1 = cu.cuInit(0); t2 = time.perf_counter()
r2 = rt.cudaFree(ctypes.c_void_p(0)) if sys.argv[2] == "ctx" else 0
t3 = time.perf_counter()
print(json.dumps({"load": t1 - t0, "init": t2 - t1, "ctx": t3 - t2, "rc": [r1, r2]}))
"""
SHAPES = [(4096, 4096, 128), (256, 256, 256), (1024, 1024, 1024)]


def cudart() -> str:
    for path in sys.path:
        found = sorted(glob.glob(os.path.join(path, "nvidia", "cuda_runtime", "lib", "libcudart.so*")))
        if found:
            return found[0]
    return "libcudart.so"


def child(kind: str, dev: int) -> dict:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(dev))
    out = subprocess.run(
        [sys.executable, "-c", CHILD, cudart(), kind], env=env, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def medians_ms(results: list[dict]) -> dict:
    return {k: round(st.median(r[k] for r in results) * 1000, 1) for k in ("load", "init", "ctx")}


def series(kind: str, dev: int, n: int) -> list[dict]:
    return [child(kind, dev) for _ in range(n)]


def concurrent(kind: str, devs: tuple[int, ...], n: int) -> list[dict]:
    with ThreadPoolExecutor(len(devs)) as ex:
        return [medians_ms(f.result()) for f in [ex.submit(series, kind, d, n) for d in devs]]


def cost(n: int, ndev: int) -> dict:
    res = {"alone_ctx": medians_ms(series("ctx", 0, n)), "alone_init": medians_ms(series("init", 0, n))}
    if ndev > 1:
        res["two_gpus_ctx"] = concurrent("ctx", (0, 1), n)
    res["same_gpu_two_ctx"] = concurrent("ctx", (0, 0), n)
    return res


def graphs(torch, stream) -> dict:
    """Per shape, a CUDA graph of 10 cuBLAS GEMMs (and the tensors it uses)."""
    out = {}
    for M, N, K in SHAPES:
        a = torch.randn(M, K, device="cuda", dtype=torch.half)
        b = torch.randn(K, N, device="cuda", dtype=torch.half)
        c = torch.empty(M, N, device="cuda", dtype=torch.half)
        with torch.cuda.stream(stream):
            for _ in range(3):
                torch.mm(a, b, out=c)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=stream):
                for _ in range(10):
                    torch.mm(a, b, out=c)
        out[f"{M}x{N}x{K}"] = (g, a, b, c)
    return out


def window(torch, stream, graph, seconds: float) -> tuple[float, float, float]:
    """p50, p90, p99 of one GEMM's time (us) from event-timed replays of `graph` during `seconds`."""
    ts = []
    end = time.time() + seconds
    while time.time() < end:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(stream)
        graph.replay()
        e1.record(stream)
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) * 100)  # ms per 10 GEMMs -> us per GEMM
    ts.sort()
    return ts[len(ts) // 2], ts[9 * len(ts) // 10], ts[99 * len(ts) // 100]


def interleaved(kind: str, pairs: int, seconds: float) -> dict:
    """Windows with the background loop running (on) and stopped with SIGSTOP (off), ABBA order."""
    import torch

    bg = subprocess.Popen([sys.executable, __file__, "bg", kind])
    time.sleep(2.0)
    stream = torch.cuda.Stream()
    setups = graphs(torch, stream)
    res = {name: {"on": [], "off": []} for name in setups}
    order = []
    for p in range(pairs):
        order += ["on", "off"] if p % 2 == 0 else ["off", "on"]
    try:
        for state in order:
            os.kill(bg.pid, signal.SIGCONT if state == "on" else signal.SIGSTOP)
            time.sleep(0.4)  # a child already started finishes
            for name, (graph, *_) in setups.items():
                res[name][state].append(window(torch, stream, graph, seconds))
    finally:
        os.kill(bg.pid, signal.SIGCONT)
        bg.kill()
    out = {}
    for name, r in res.items():
        on50, off50 = st.median(x[0] for x in r["on"]), st.median(x[0] for x in r["off"])
        out[name] = {
            "on_p50": round(on50, 3),
            "off_p50": round(off50, 3),
            "ratio_p50": round(on50 / off50, 4),
            "pair_ratios": [round(x, 3) for x in sorted(a[0] / b[0] for a, b in zip(r["on"], r["off"]))],
            "on_p99": round(st.median(x[2] for x in r["on"]), 3),
            "off_p99": round(st.median(x[2] for x in r["off"]), 3),
        }
    return out


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "cost":
        print(json.dumps(cost(int(sys.argv[2]), int(sys.argv[3]))))
    elif what == "interleaved":
        print(
            json.dumps(
                {"kind": sys.argv[2], **interleaved(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]))}
            )
        )
    elif what == "bg":
        while True:
            child(sys.argv[2], 0)
