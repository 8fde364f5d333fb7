"""Probe: one row of 64-row tiles (M = 64, wide N) with 128-deep ring stages and the warp producer (2026-11-27).

`deep_stage.py` (`../2026-11-27-deep-stage/`) brought 64x4096 with unsplit 64x32 tiles to the library's rate per k
(1.67 against 1.65 us per 1000 of K), while the family's default there is a DSMEM split of two slices of 64x64
tiles, and the grid's 64x4096x{1024,2048} stayed at 0.76x. Which of the four one-row layouts with the same CTA
budget is fastest, and at which N: unsplit 64x32 (N/32 CTAs), a DSMEM split of 64x32 in two, unsplit 64x64, and the
default's DSMEM split of 64x64 in two? Each configuration at its deepest fitting ring, checked against
torch.matmul at K = 1000 (a partial last stage) and timed offline at K = 512 .. 4096 with the library beside it.

Usage (one GPU): python one_row.py OUT_DIR [N ...]
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-11-26-fixed-cost"))

from fixed_cost import BASE  # noqa: E402
from hgemm.evaluator.kernels import get_family  # noqa: E402
from smem_base import compare  # noqa: E402
from structures import ONE  # noqa: E402

DEEP = {**ONE, "warp_producer": 1, "stage_k": 128}
SPLIT2 = {"split_k": 2, "split_dsmem": 1, "persistent": 0, "epilogue": 0}
LAYOUTS = {
    "64x32": {"bm": 64, "bn": 32},
    "64x32 split2": {"bm": 64, "bn": 32, **SPLIT2},
    "64x64": {"bm": 64, "bn": 64},
    "64x64 split2": {"bm": 64, "bn": 64, **SPLIT2},
}
WIDTHS = (1024, 2048, 4096, 8192)


def deepest(family, params: dict, shape: tuple[int, int, int]) -> dict:
    for stages in (16, 14, 12, 10, 8, 7, 6, 5, 4):
        p = family.repair({**params, "stages": stages})
        if family.check(p, shape) is None:
            return p
    raise ValueError(f"no ring fits {params}")


def sources(widths) -> dict[tuple[int, int, str], str]:
    family = get_family("wgmma")
    out = {}
    for N in widths:
        for name, layout in LAYOUTS.items():
            params = deepest(family, {**BASE, **DEEP, **layout}, (64, N, 4096))
            out[(64, N, f"{name} s{params['stages']}")] = family.render(params)
    return out


def main() -> None:
    widths = [int(n) for n in sys.argv[2:]] or WIDTHS
    compare(Path(sys.argv[1]), sources(widths), "one-row.json")


if __name__ == "__main__":
    main()
