"""mma_ms where K is not a multiple of 8 (rows of A and Bt not 16-byte aligned): narrow loads (REALIGN 0, two or
four bytes at a time, what every such kernel did) against aligned 16-byte blocks shifted into place (REALIGN 1),
on the same tiles. On an H100 the search's best kernel at 8191^3 ran at 0.74x of the best library and
3000x5000x700 at 0.85x (`bench/results/shapes-real-H100-confirmed.*`), both mma_ms with narrow loads.

Per shape: the family's default tile and a few large tiles, each with both loads. Each configuration is checked by
the family before it is compiled; the evaluator checks every output; both modes, the libraries timed alongside.
Results are written after each shape.

Usage (one GPU): python realign.py OUT_DIR [MxNxK,...]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "2026-11-26-small-tiles"))
from small_tiles import main  # noqa: E402  (evaluates configurations per shape, writes OUT_DIR/name)

# K % 8: 7, 4, 7, 6, 7 (8191^3 last: it takes longest)
SHAPES = [(2047, 2047, 2047), (3000, 5000, 700), (4096, 4096, 4095), (1000, 4096, 4102), (8191, 8191, 8191)]
# (BM, BN, BK, WARPS_M, WARPS_N, STAGES)
TILES = [(128, 256, 32, 2, 4, 4), (128, 256, 32, 2, 4, 3), (256, 128, 32, 4, 2, 4), (128, 128, 32, 2, 2, 4),
         (128, 128, 64, 2, 2, 3)]  # fmt: skip


def configurations(shape) -> dict[str, dict]:
    from hgemm.evaluator.kernels import get_family

    from hgemm.core.shape import Shape

    family, s = get_family("mma_ms"), Shape(*shape)
    base = family.default_params(s)
    tiles = {"default": base}
    for bm, bn, bk, wm, wn, stages in TILES:
        p = {**base, "BM": bm, "BN": bn, "BK": bk, "WARPS_M": wm, "WARPS_N": wn, "STAGES": stages}
        if p not in tiles.values():
            tiles[f"{bm}x{bn}x{bk} s{stages}"] = p
    found = {}
    for name, p in tiles.items():
        for realign in (0, 1):
            q = {**p, "REALIGN": realign}
            if family.check(q, s) is None:
                found[f"{name} {('narrow', 'staged')[realign]}"] = q
    return found


if __name__ == "__main__":
    from hgemm.evaluator.kernels import get_family

    given = [tuple(int(x) for x in s.split("x")) for s in sys.argv[2].split(",")] if len(sys.argv) > 2 else SHAPES
    main(sys.argv[1], given, family=get_family("mma_ms"), configurations=configurations, name="realign.json")
