"""Our kernel and cuBLAS with A and Bt at 4 KiB-aligned offsets into one allocation (as the evaluator's
arena places them: a random multiple of 4 KiB plus an 8 KiB guard band) against 2 MiB-aligned ones.
Sustained, 1.2 s per phase.

Usage (one GPU): python offsets.py OUT_DIR
"""

from __future__ import annotations

import ctypes
import json
import statistics
import sys
from pathlib import Path

import torch
from probe import BASE
from sustained import phase

SHAPE = (4096, 16384, 16384)
OFFSETS = [(0, 0), (12288, 45056), (8192 + 4096 * 7, 8192 + 4096 * 3), (4096, 4096), (65536, 0), (0, 65536)]


def main(out_dir: str) -> None:
    from hgemm.evaluator.compile import compile_trusted
    from hgemm.evaluator.kernels import get_family

    comp = compile_trusted(get_family("wgmma").render(BASE))
    assert comp.ok, comp.log
    lib = ctypes.CDLL(comp.lib_path)
    M, N, K = SHAPE
    pad = 1 << 21
    raw_a = torch.randn(M * K + pad, device="cuda", dtype=torch.half)
    raw_b = torch.randn(N * K + pad, device="cuda", dtype=torch.half)
    c = torch.empty(M, N, device="cuda", dtype=torch.half)
    rows = []
    for off_a, off_b in OFFSETS:
        a = raw_a[off_a // 2 : off_a // 2 + M * K].view(M, K)
        bt = raw_b[off_b // 2 : off_b // 2 + N * K].view(N, K)

        def ours(a=a, bt=bt):
            rc = lib.hgemm_run(ctypes.c_void_p(a.data_ptr()), None, ctypes.c_void_p(bt.data_ptr()),
                               ctypes.c_void_p(c.data_ptr()), M, N, K, None, ctypes.c_size_t(0),
                               ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))  # fmt: skip
            assert rc == 0, rc

        def cublas(a=a, bt=bt):
            torch.matmul(a, bt.t(), out=c)

        for name, fn in (("cublas", cublas), ("ours", ours)):
            fn()
            times = phase(fn, 1.2)
            row = {"offsets": [off_a, off_b], "kernel": name, "n": len(times),
                   "median_us": statistics.median(times), "p10_us": statistics.quantiles(times, n=10)[0]}  # fmt: skip
            rows.append(row)
            print(f"A+{off_a:6d} Bt+{off_b:6d} {name:6s} n={row['n']:4d} p10 {row['p10_us']:8.1f} "
                  f"med {row['median_us']:8.1f} us", flush=True)  # fmt: skip
    Path(out_dir, "offsets.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
