"""Our kernel launched directly, replayed from a CUDA graph (one launch, or three launches on three A slots as
the evaluator's offline graph holds), and directly again while two idle processes hold CUDA contexts.
Sustained, 1.5 s per phase.

Usage (one GPU): python graphs.py OUT_DIR
"""

from __future__ import annotations

import ctypes
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.multiprocessing as mp
from probe import BASE
from sustained import phase

SHAPES = [(4096, 16384, 16384), (8192, 8192, 8192)]


def idle_context(seconds: float) -> None:
    torch.zeros(1, device="cuda")
    time.sleep(seconds)


def stats(times):
    return {"n": len(times), "p10_us": statistics.quantiles(times, n=10)[0], "median_us": statistics.median(times),
            "p90_us": statistics.quantiles(times, n=10)[-1]}  # fmt: skip


def main(out_dir: str) -> None:
    from hgemm.evaluator.compile import compile_trusted
    from hgemm.evaluator.kernels import get_family

    comp = compile_trusted(get_family("wgmma").render(BASE))
    assert comp.ok, comp.log
    lib = ctypes.CDLL(comp.lib_path)
    rows = []
    for M, N, K in SHAPES:
        a = torch.randn(3, M, K, device="cuda", dtype=torch.half)
        bt = torch.randn(N, K, device="cuda", dtype=torch.half)
        c = torch.empty(3, M, N, device="cuda", dtype=torch.half)

        def call(slot, stream, a=a, bt=bt, c=c, M=M, N=N, K=K):
            rc = lib.hgemm_run(ctypes.c_void_p(a[slot].data_ptr()), None, ctypes.c_void_p(bt.data_ptr()),
                               ctypes.c_void_p(c[slot].data_ptr()), M, N, K, None, ctypes.c_size_t(0),
                               ctypes.c_void_p(stream))  # fmt: skip
            assert rc == 0, rc

        graphs = {}
        for slots in (1, 3):
            s = torch.cuda.Stream()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=s):
                for slot in range(slots):
                    call(slot, s.cuda_stream)
            graphs[slots] = g
        variants = {
            "direct": lambda: call(0, torch.cuda.current_stream().cuda_stream),
            "graph1": graphs[1].replay,
            "graph3": graphs[3].replay,
        }
        for name in ("direct", "graph1", "graph3", "direct"):
            times = phase(variants[name], 1.5)
            per = 3 if name == "graph3" else 1
            row = {"shape": [M, N, K], "variant": name, **stats([t / per for t in times])}
            rows.append(row)
            print(f"{M}x{N}x{K} {name:14s} n={row['n']:5d} p10 {row['p10_us']:8.1f} med {row['median_us']:8.1f} "
                  f"p90 {row['p90_us']:8.1f} us", flush=True)  # fmt: skip
        ctx = mp.get_context("spawn")
        idle = [ctx.Process(target=idle_context, args=(6.0,)) for _ in range(2)]
        for p in idle:
            p.start()
        time.sleep(3.0)  # their contexts are up
        for name in ("direct", "graph3"):
            times = phase(variants[name], 1.2)
            per = 3 if name == "graph3" else 1
            row = {"shape": [M, N, K], "variant": name + "+2idle", **stats([t / per for t in times])}
            rows.append(row)
            print(f"{M}x{N}x{K} {row['variant']:14s} n={row['n']:5d} p10 {row['p10_us']:8.1f} "
                  f"med {row['median_us']:8.1f} p90 {row['p90_us']:8.1f} us", flush=True)  # fmt: skip
        for p in idle:
            p.join(10)
    Path(out_dir, "graphs.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
