"""Ninth probe (written, not yet run): fewer handshakes per k-block. `ring_loads.py` found that the producer-consumer
handshake alone, with no loads, costs about 75 ns per k-block at 512x512, 85% of the library's whole time per
k-block. Here the template's consumer k-loop is replaced (in the rendered source, by this probe only) with
`k_group2_loop.cu`: two k-blocks per wgmma group, one fence, commit and wait for two ring slots. Each variant is
first checked against torch.matmul (largest absolute difference printed; the ring-only ones are not), then timed
as in `ring_only.py`: the kernel, its ring alone, the ring with no loads, with and without the two-block groups.

Usage (one GPU): python k_group.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from fixed_cost import BASE
from hgemm.evaluator.kernels import get_family
from ring_loads import NO_LOADS
from ring_only import MATH, sweep, variants
from structures import ONE

LOOP_START = "      for (int kb = kb_begin; kb < kb_end; ++kb, ++it) {"
LOOP_END = "      const int row0 = m0 + (PINGPONG ? 0 : cw * WG_ROWS);"
MATH2 = "wgmma_m64k16<BN>(acc[mi], da, db, (kb > kb_begin || j > 0 || k > 0) ? 1 : 0);"
CASES = {
    (512, 512): {"64x64": {**ONE, "bm": 64, "bn": 64, "stages": 12}, "64x32": {**ONE, "bm": 64, "bn": 32, "stages": 16}},
    (64, 4096): {"64x32": {**ONE, "bm": 64, "bn": 32, "stages": 16}},
    (1024, 1024): {"64x128 c2": {**ONE, "bm": 64, "bn": 128, "stages": 8, "cluster_m": 2}},
}


def grouped(source: str) -> str:
    """The source with its consumer k-loop replaced by the two-block groups of k_group2_loop.cu."""
    start, end = source.index(LOOP_START), source.index(LOOP_END)
    return source[:start] + (Path(__file__).parent / "k_group2_loop.cu").read_text() + source[end:]


def check(run, M: int, N: int, K: int) -> float:
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    B = torch.randn(K, N, device="cuda", dtype=torch.float16)
    C = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
    ws = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    rc = run(A.data_ptr(), B.data_ptr(), B.t().contiguous().data_ptr(), C.data_ptr(), M, N, K, ws.data_ptr(),
             ws.numel(), torch.cuda.current_stream().cuda_stream)  # fmt: skip
    torch.cuda.synchronize()
    assert rc == 0, rc
    return (C.float() - (A @ B).float()).abs().max().item()


def main() -> None:
    out = Path(sys.argv[1])
    family = get_family("wgmma")
    rows: list[dict] = []
    for (M, N), configs in CASES.items():
        runs = {}
        for name, cfg in configs.items():
            src = family.render(family.repair({**BASE, **cfg}))
            two = grouped(src)
            runs.update(variants(name, src, {"ring": [(MATH, "")], "ring no loads": [(MATH, ""), *NO_LOADS]}))
            runs.update(variants(f"{name} kg2", two, {"ring": [(MATH2, "")], "ring no loads": [(MATH2, ""), *NO_LOADS]}))
            for K in (64, 192, 1000, 4096):  # one k-block, an odd count, a partial last one, many
                print(f"{M}x{N}x{K} {name}: max |diff| {check(runs[name], M, N, K):.3g}, "
                      f"kg2 {check(runs[f'{name} kg2'], M, N, K):.3g}", flush=True)  # fmt: skip
        sweep(out, M, N, runs, rows, "k-group.json")


if __name__ == "__main__":
    main()
