"""Outputs of 49-64 rows: the transposed product 64 wide (`_narrow_swapped`'s rule, which the defaults take for
5-48 rows) against the family's default, on the grid's M = 64 shapes with N and K at least 1024 and on
shapes-real's 64x4096x16384 (where it ran 0.98x against the default's 0.92x, experiments/2026-11-27-widths).
Per shape: the default; the transposed product with the rule's split, with half and twice as many slices, and
with the 2x1 cluster (A multicast). The evaluator checks every output; both modes, the libraries alongside.

Usage (one GPU): python m64.py OUT_DIR [MxNxK,...]
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-11-26-small-tiles"))
from small_tiles import main  # noqa: E402  (evaluates configurations per shape, writes OUT_DIR/name)

GRID = (1024, 2048, 4096, 8192, 12288, 16384)
SHAPES = [(64, 4096, 16384)] + [(64, n, k) for n, k in itertools.product(GRID, GRID) if (n, k) != (4096, 16384)]
RINGS = (16, 14, 12, 10, 8, 7, 6, 5, 4, 3)


def configurations(shape) -> dict[str, dict]:
    from hgemm.evaluator.kernels import get_family

    from hgemm.core.shape import Shape

    family = get_family("wgmma")
    s = Shape(*shape)
    M, N, K = shape
    base = family.default_params(s)
    found = {"default": base}
    k_blocks = -(-K // 64)
    swapped = family._narrow_swapped(M, N, k_blocks, 132)
    split = swapped["split_k"]
    splits = family.space["split_k"]
    lower = max((x for x in splits if x < split), default=None)
    higher = min((x for x in splits if x > split), default=None)
    variants = {f"swap split {split}": {}, f"swap split {split} cluster": {"cluster_m": 2}}
    if lower:
        variants[f"swap split {lower}"] = {"split_k": lower}
    if higher and k_blocks // higher >= 4:
        variants[f"swap split {higher}"] = {"split_k": higher}
    plain = {"group_m": 8, "persistent": 1, "epilogue": 0, "cluster_m": 1, "pingpong": 0, "split_dsmem": 0,
             "epi_panels": 0}  # fmt: skip
    for name, change in variants.items():
        p = family.default_tuning({**plain, **swapped, **change}, shape=s)
        q = next(({**p, "stages": r} for r in RINGS if family.check({**p, "stages": r}, s) is None), None)
        if q is not None and q not in found.values():
            found[name] = q
    return found


if __name__ == "__main__":
    from hgemm.evaluator.kernels import get_family

    given = [tuple(int(x) for x in k.split("x")) for k in sys.argv[2].split(",")] if len(sys.argv) > 2 else SHAPES
    main(sys.argv[1], given, family=get_family("wgmma"), configurations=configurations, name="m64.json")
