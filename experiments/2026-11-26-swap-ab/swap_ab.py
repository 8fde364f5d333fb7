"""The transposed product (HG_SWAP_AB: Ct = Bt A^T, C stored transposed) against the same tiles unswapped, on the
shapes it is for (H100 figures of 2026-11-26, `bench/results/full-H100.md`, `shapes-real-H100.md`):

- taller than wide, where the family's only cluster (2x1 along M) multicasts B, the smaller operand; swapped,
  it multicasts A: 2048x512x4096 0.78x, 2048x256x8192 0.83x, 2048x256x4096 0.84x, 16384x128x512 0.87x,
  12288x256x512 0.83x, 1024x512x4096 0.82x offline;
- small M, where the short side is a 64-row wgmma tile's M; swapped it is the tile's N (32 columns):
  16x4608x3584 0.78x, 77x5120x5120 0.80x, 1x4096x14336, 16x2048x1408, 128x4608x3584 0.80x, 1000x4608x3584 0.76x.

Per shape: tiles 64x32 to 128x128 with the deepest ring, with and without the 2x1 cluster, unsplit or split 2 or 4
ways through the workspace, each swapped and not (epilogue through registers both ways, so only the swap
differs), and the family's default. Every output is checked by the evaluator; both modes, libraries alongside.

Usage (one GPU): python swap_ab.py OUT_DIR [MxNxK,...]
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "2026-11-26-small-tiles"))
import small_tiles  # noqa: E402  (its evaluation loop and printout)

SHAPES = [(2048, 512, 4096), (2048, 256, 8192), (2048, 256, 4096), (16384, 128, 512), (12288, 256, 512),
          (1024, 512, 4096), (16, 4608, 3584), (77, 5120, 5120), (1, 4096, 14336), (16, 2048, 1408),
          (128, 4608, 3584), (1000, 4608, 3584)]  # fmt: skip
TILES = [(64, 32), (64, 64), (64, 128), (128, 64), (128, 128)]


def widened():
    from hgemm.evaluator.kernels import get_family
    from hgemm.evaluator.kernels.wgmma_family import SPACE

    return dataclasses.replace(get_family("wgmma"), space={**SPACE, "swap_ab": (0, 1)})


def variants(family, shape) -> dict[str, dict]:
    from hgemm.core.shape import Shape

    s = Shape(*shape)
    base = family.default_params(s)
    found = {"default": base}
    for (bm, bn), cluster, split, swap in itertools.product(TILES, (1, 2), (1, 2, 4), (0, 1)):
        p = {**base, "bm": bm, "bn": bn, "consumers": 1 if bm == 64 else 2, "cluster_m": cluster, "split_k": split,
             "split_dsmem": 0, "persistent": 1, "pingpong": 0, "stream_k": 0, "epilogue": 0, "epi_panels": 0,
             "swap_ab": swap}  # fmt: skip
        p = family.repair(p)
        for stages in (16, 14, 12, 10, 8, 7, 6, 5, 4, 3):
            q = {**p, "stages": stages}
            if family.check(q, s) is None:
                if q not in found.values():
                    found[f"{'swap ' if swap else ''}{bm}x{bn} c{cluster} split {split} s{stages}"] = q
                break
    return found


def main(out_dir: str, shapes: list[tuple[int, int, int]]) -> None:
    family = widened()
    small_tiles.main(out_dir, shapes, family, lambda shape: variants(family, shape), "swap-ab.json")


if __name__ == "__main__":
    given = [tuple(int(x) for x in s.split("x")) for s in sys.argv[2].split(",")] if len(sys.argv) > 2 else SHAPES
    main(sys.argv[1], given)
