"""Tiles for shapes-real's M = 1000 layers (H100, 2026-11-27, re-measured: 1000x4608x3584 0.80x / 0.76x,
1000x1408x2048 0.80x / 0.87x, 1000x3584x14336 0.92x, 1000x14336x4096 0.94x), where the search kept 128x192
ping-pong or 128x256 tiles in 8 evaluations. 1000 rows make 8 tiles of 128 (the last 104 rows) or 4 of 256; the
tile's width decides the waves: at 1000x4608 128x192 tiles make 192 tiles on 132 SMs (1.45 waves), 128x160 make
232 (1.76), 128x128 288 (2.2). This evaluates, per shape, every tile of 128 to 256 rows and 128 to 256 columns
the family allows, cooperative and ping-pong, with and without the 2x1 cluster, persistent, the deepest ring that
fits; the default beside them. The evaluator checks every output; both modes, the libraries timed alongside.

Usage (one GPU): python m1000_tiles.py OUT_DIR [MxNxK,...]  (default: the shapes below)
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "2026-11-26-small-tiles"))
from small_tiles import main  # noqa: E402  (evaluates configurations per shape, writes OUT_DIR/name)

SHAPES = [(1000, 4608, 3584), (1000, 1408, 2048), (1000, 14336, 4096), (1000, 3584, 14336), (1000, 2048, 1408),
          (4096, 1408, 2048)]  # fmt: skip
TILES = [(128, 128), (128, 160), (128, 192), (128, 256), (192, 128), (192, 160), (256, 128)]


def variants(shape) -> dict[str, dict]:
    from hgemm.evaluator.kernels import get_family

    from hgemm.core.shape import Shape

    family = get_family("wgmma")
    s = Shape(*shape)
    found = {"default": family.default_params(s)}
    for (bm, bn), pingpong, cluster in itertools.product(TILES, (0, 1), (1, 2)):
        consumers = 3 if bm == 192 else 2
        p = {**found["default"], "bm": bm, "bn": bn, "consumers": consumers, "pingpong": pingpong,
             "cluster_m": cluster, "persistent": 1, "split_k": 1, "split_dsmem": 0, "stream_k": 0, "swap_ab": 0,
             "epilogue": 1, "epi_panels": 2, "group_m": 8}  # fmt: skip
        p = family.repair(p)
        if p["pingpong"] != pingpong:
            continue  # the family turned this one into another variant
        for stages in (8, 7, 6, 5, 4, 3):
            q = {**p, "stages": stages}
            if family.check(q, s) is None:
                if q not in found.values():
                    found[f"{bm}x{bn} {'pp' if pingpong else 'coop'} c{cluster} s{stages}"] = q
                break
    return found


if __name__ == "__main__":
    given = [tuple(int(x) for x in s.split("x")) for s in sys.argv[2].split(",")] if len(sys.argv) > 2 else SHAPES
    main(sys.argv[1], given, configurations=variants, name="m1000-tiles.json")
