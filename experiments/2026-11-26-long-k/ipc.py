"""Same kernels, same process, same context: inputs reached through a CUDA IPC handle (allocated by another
process, as the judge's buffers are for a runner) against inputs allocated locally. Sustained back-to-back
runs, 1.5 s per phase.

Usage (one GPU): python ipc.py OUT_DIR
"""

from __future__ import annotations

import ctypes
import json
import statistics
import sys
from pathlib import Path

import torch
import torch.multiprocessing as mp
from probe import BASE
from sustained import phase

SHAPES = [(4096, 16384, 16384), (1024, 8192, 16384), (8192, 8192, 8192)]


def child(q_in, q_out, lib_path: str) -> None:
    lib = ctypes.CDLL(lib_path)
    rows = []
    while True:
        item = q_in.get()
        if item is None:
            break
        (M, N, K), a_ipc, bt_ipc = item
        a_loc, bt_loc = a_ipc.clone(), bt_ipc.clone()
        c = torch.empty(M, N, device="cuda", dtype=torch.half)
        stream = torch.cuda.current_stream().cuda_stream
        for where, (a, bt) in (("ipc", (a_ipc, bt_ipc)), ("local", (a_loc, bt_loc))) * 2:
            def ours(a=a, bt=bt, c=c, M=M, N=N, K=K, stream=stream):
                rc = lib.hgemm_run(ctypes.c_void_p(a.data_ptr()), None, ctypes.c_void_p(bt.data_ptr()),
                                   ctypes.c_void_p(c.data_ptr()), M, N, K, None, ctypes.c_size_t(0),
                                   ctypes.c_void_p(stream))  # fmt: skip
                assert rc == 0, rc

            def cublas(a=a, bt=bt, c=c):
                torch.matmul(a, bt.t(), out=c)

            for name, fn in (("cublas", cublas), ("ours", ours)):
                fn()
                torch.cuda.synchronize()
                times = phase(fn, 1.5)
                row = {"shape": [M, N, K], "inputs": where, "kernel": name, "n": len(times),
                       "p10_us": statistics.quantiles(times, n=10)[0], "median_us": statistics.median(times),
                       "p90_us": statistics.quantiles(times, n=10)[-1]}  # fmt: skip
                rows.append(row)
                print(f"{M}x{N}x{K} {where:5s} {name:6s} n={row['n']:5d} p10 {row['p10_us']:8.1f} "
                      f"med {row['median_us']:8.1f} p90 {row['p90_us']:8.1f} us", flush=True)  # fmt: skip
        del a_loc, bt_loc, c, a_ipc, bt_ipc
        torch.cuda.empty_cache()
        q_out.put("done")
    q_out.put(rows)


def main(out_dir: str) -> None:
    from hgemm.evaluator.compile import compile_trusted
    from hgemm.evaluator.kernels import get_family

    comp = compile_trusted(get_family("wgmma").render(BASE))
    assert comp.ok, comp.log
    ctx = mp.get_context("spawn")
    q_in, q_out = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=child, args=(q_in, q_out, comp.lib_path))
    p.start()
    for M, N, K in SHAPES:
        a = torch.randn(M, K, device="cuda", dtype=torch.half)
        bt = torch.randn(N, K, device="cuda", dtype=torch.half)
        q_in.put(((M, N, K), a, bt))
        assert q_out.get(timeout=120) == "done"
        del a, bt
        torch.cuda.empty_cache()
    q_in.put(None)
    rows = q_out.get(timeout=60)
    p.join(30)
    Path(out_dir, "ipc.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
