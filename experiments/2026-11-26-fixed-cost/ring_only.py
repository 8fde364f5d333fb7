"""Seventh probe: is our time per k-block the loads' or the math's? The family's kernel as rendered, and the same
source with the consumers' wgmma call removed (a string edit of the rendered source, here only): the consumers
still wait for every ring slot and free it, so the producer streams the same tiles at whatever rate the loads
allow. If the ring alone takes the same time per k-block, the loads bound the main loop. Outputs of the edited
kernel are garbage and not compared. Times at K = 512 .. 4096 against torch.matmul, as in `structures.py`.

Usage (one GPU): python ring_only.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from fixed_cost import BASE, fit, load
from hgemm.evaluator import timing
from hgemm.evaluator.kernels import get_family
from structures import ONE

MATH = "wgmma_m64k16<BN>(acc[mi], da, db, (kb > kb_begin || k > 0) ? 1 : 0);"
KS = (512, 1024, 2048, 4096)
CASES = {
    (512, 512): {"64x64": {**ONE, "bm": 64, "bn": 64, "stages": 12}, "64x32": {**ONE, "bm": 64, "bn": 32, "stages": 16},
                 "64x32 c2": {**ONE, "bm": 64, "bn": 32, "stages": 16, "cluster_m": 2}},
    (64, 4096): {"64x32": {**ONE, "bm": 64, "bn": 32, "stages": 16}},
    (1024, 1024): {"64x128 c2": {**ONE, "bm": 64, "bn": 128, "stages": 8, "cluster_m": 2}},
}


def main() -> None:
    run_probe(Path(sys.argv[1]), CASES, {"ring only": [(MATH, "")]}, "ring-only.json")


def edit(source: str, edits: list[tuple[str, str]]) -> str:
    """`source` with each (old, new) replacement made; every `old` must occur exactly once."""
    for old, new in edits:
        assert source.count(old) == 1, f"the template changed: {old}"
        source = source.replace(old, new)
    return source


def variants(name: str, source: str, edits: dict[str, list[tuple[str, str]]]) -> dict:
    """`source` loaded as `name`, and each edit of it as `name label`."""
    return {name: load(source), **{f"{name} {label}": load(edit(source, e)) for label, e in edits.items()}}


def run_probe(out: Path, cases: dict, edits: dict[str, list[tuple[str, str]]], report: str) -> None:
    """Every configuration of `cases` as the family renders it and with each of `edits`, swept over K."""
    family = get_family("wgmma")
    rows: list[dict] = []
    for (M, N), configs in cases.items():
        runs = {}
        for name, cfg in configs.items():
            runs.update(variants(name, family.render(family.repair({**BASE, **cfg})), edits))
        sweep(out, M, N, runs, rows, report)


def time_at(M: int, N: int, K: int, runs: dict, stream, ws) -> dict[str, float]:
    """Offline median (us) of torch.matmul ("lib") and every loaded `runs` entry at M x N x K."""
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    B = torch.randn(K, N, device="cuda", dtype=torch.float16)
    Bt = B.t().contiguous()
    C = torch.empty(M, N, device="cuda", dtype=torch.float16)
    contenders = {"lib": lambda: torch.mm(A, B, out=C)}
    for name, run in runs.items():
        contenders[name] = (lambda run=run:
                            run(A.data_ptr(), B.data_ptr(), Bt.data_ptr(), C.data_ptr(), M, N, K,
                                ws.data_ptr(), ws.numel(), torch.cuda.current_stream().cuda_stream))  # fmt: skip
    off = timing.time_offline(contenders, stream, samples=15)
    return {n: off[n].median_us for n in contenders}


def sweep(out: Path, M: int, N: int, runs: dict, rows: list[dict], report: str) -> None:
    """Offline times of torch.matmul and every loaded `runs` entry at each K of KS; fit; rewrite OUT/`report`."""
    out.mkdir(parents=True, exist_ok=True)
    stream = torch.cuda.Stream()
    ws = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    for K in KS:
        us = time_at(M, N, K, runs, stream, ws)
        rows += [{"M": M, "N": N, "K": K, "config": n, "offline_us": t} for n, t in us.items()]
        print(f"{M}x{N}x{K}: " + "  ".join(f"{n} {t:.2f}" for n, t in us.items()), flush=True)
    print(f"{M}x{N}: offline time = a + b per 1000 K")
    for n in ["lib", *runs]:
        mine = [r for r in rows if (r["M"], r["N"], r["config"]) == (M, N, n)]
        a, b = fit([r["K"] for r in mine], [r["offline_us"] for r in mine])
        print(f"  {n:26s} {a:6.2f} + {1000 * b:6.3f}")
    (out / report).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
