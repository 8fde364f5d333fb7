"""Eighth probe: what sets the rate of our ring (`ring_only.py`: the operands streamed with no math take 90-100% of
the kernel's time)? The rendered kernel with its wgmma call removed, then string edits of the producer (here only):
A's load alone (the barrier expects A's bytes), Bt's load alone, no load at all (the producer only arrives on the
full barrier). If the rate falls with the bytes, the loads' bandwidth sets it; if it stays, the per-k-block round
trip does. Offline, against torch.matmul, K = 512 .. 4096. Outputs are garbage and not compared.

Usage (one GPU): python ring_loads.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from fixed_cost import BASE, fit
from hgemm.evaluator import timing
from hgemm.evaluator.kernels import get_family
from ring_only import KS, MATH, load
from structures import ONE

EXPECT = "mbar_arrive_expect_tx(fb, A_BYTES + B_BYTES);"
LOAD_A = "tma_load_2d(sA + s * A_BYTES, &tmA, fb, kb * BK, m0);"
LOAD_B = "tma_load_2d(sB + s * B_BYTES, &tmB, fb, kb * BK, n0);"
EDITS = {
    "ring": [(MATH, "")],
    "ring A only": [(MATH, ""), (EXPECT, "mbar_arrive_expect_tx(fb, A_BYTES);"), (LOAD_B, "")],
    "ring Bt only": [(MATH, ""), (EXPECT, "mbar_arrive_expect_tx(fb, B_BYTES);"), (LOAD_A, "")],
    "ring no loads": [(MATH, ""), (EXPECT, "mbar_arrive(fb);"), (LOAD_A, ""), (LOAD_B, "")],
}
CASES = {
    (512, 512): {"64x64": {**ONE, "bm": 64, "bn": 64, "stages": 12}, "64x32": {**ONE, "bm": 64, "bn": 32, "stages": 16}},
    (64, 4096): {"64x32": {**ONE, "bm": 64, "bn": 32, "stages": 16}},
}


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    family = get_family("wgmma")
    stream = torch.cuda.Stream()
    ws = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    rows = []
    for (M, N), configs in CASES.items():
        runs = {}
        for name, cfg in configs.items():
            src = family.render(family.repair({**BASE, **cfg}))
            runs[name] = load(src)
            for label, edits in EDITS.items():
                edited = src
                for old, new in edits:
                    assert edited.count(old) == 1, f"the template changed: {old}"
                    edited = edited.replace(old, new)
                runs[f"{name} {label}"] = load(edited)
        for K in KS:
            A = torch.randn(M, K, device="cuda", dtype=torch.float16)
            B = torch.randn(K, N, device="cuda", dtype=torch.float16)
            Bt = B.t().contiguous()
            C = torch.empty(M, N, device="cuda", dtype=torch.float16)
            contenders = {"lib": lambda A=A, B=B, C=C: torch.mm(A, B, out=C)}
            for name, run in runs.items():
                contenders[name] = (lambda A=A, B=B, Bt=Bt, C=C, K=K, run=run, M=M, N=N:
                                    run(A.data_ptr(), B.data_ptr(), Bt.data_ptr(), C.data_ptr(), M, N, K,
                                        ws.data_ptr(), ws.numel(), torch.cuda.current_stream().cuda_stream))  # fmt: skip
            off = timing.time_offline(contenders, stream, samples=15)
            for n in contenders:
                rows.append({"M": M, "N": N, "K": K, "config": n, "offline_us": off[n].median_us})
            print(f"{M}x{N}x{K}: " + "  ".join(f"{n} {off[n].median_us:.2f}" for n in contenders), flush=True)
        print(f"{M}x{N}: offline time = a + b per 1000 K")
        for n in contenders:
            mine = [r for r in rows if (r["M"], r["N"], r["config"]) == (M, N, n)]
            a, b = fit([r["K"] for r in mine], [r["offline_us"] for r in mine])
            print(f"  {n:26s} {a:6.2f} + {1000 * b:6.3f}")
        (out / "ring-loads.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
