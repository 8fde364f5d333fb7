"""Square and mid shapes where the wgmma family trails the library on the H100 (2026-11-26): 1024^3 0.96x in the
grid and 0.935x from an empty archive (`hgemm optimize 1024 1024 1024`, the README's demo), 1024x1024x4096 0.80x,
1024x1024x2048 0.89x, 2048x1024x2048. At 1024^3 the default is 64x128 tiles (128 CTAs, one wave). This evaluates,
per shape, tiles 64x128 to 128x256 (one or two consumers, ping-pong where it applies), with and without the 2x1
cluster, unsplit or split 2 ways, persistent or not, C through registers or the TMA-store epilogue, swapped or
not, each with the deepest ring that fits. Every output is checked by the evaluator; both modes, the libraries
timed alongside. The library's own kernels for the same shapes come from `python -m hgemm.bench.lt_kernels`.

Usage (one GPU): python square.py OUT_DIR [MxNxK,...]
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "2026-11-26-small-tiles"))
import small_tiles  # noqa: E402  (its evaluation loop and printout)

SHAPES = [(1024, 1024, 1024), (1024, 1024, 2048), (1024, 1024, 4096), (2048, 1024, 2048)]
TILES = [(64, 128, 1, 0), (128, 64, 2, 0), (128, 128, 2, 0), (128, 128, 2, 1), (64, 256, 1, 0), (128, 256, 2, 0)]


def variants(shape) -> dict[str, dict]:
    from hgemm.evaluator.kernels import get_family

    from hgemm.core.shape import Shape

    family = get_family("wgmma")
    s = Shape(*shape)
    base = family.default_params(s)
    found = {"default": base}
    for (bm, bn, consumers, pingpong), cluster, split, persistent, epilogue, swap in itertools.product(
        TILES, (1, 2), (1, 2), (0, 1), (0, 1), (0, 1)
    ):
        if swap and (epilogue or pingpong):
            continue  # the transposed product stores C from the registers
        p = {**base, "bm": bm, "bn": bn, "consumers": consumers, "pingpong": pingpong, "cluster_m": cluster,
             "split_k": split, "split_dsmem": 0, "persistent": persistent, "stream_k": 0, "epilogue": epilogue,
             "epi_panels": 0, "swap_ab": swap}  # fmt: skip
        p = family.repair(p)
        for stages in (16, 14, 12, 10, 8, 7, 6, 5, 4, 3):
            q = {**p, "stages": stages}
            if family.check(q, s) is None:
                if q not in found.values():
                    name = (f"{'swap ' if swap else ''}{bm}x{bn}{' pp' if q['pingpong'] else ''} c{cluster} "
                            f"split {q['split_k']} p{q['persistent']} e{q['epilogue']} s{stages}")  # fmt: skip
                    found[name] = q
                break
    return found


def main(out_dir: str, shapes: list[tuple[int, int, int]]) -> None:
    small_tiles.main(out_dir, shapes, None, variants, "square.json")


if __name__ == "__main__":
    given = [tuple(int(x) for x in s.split("x")) for s in sys.argv[2].split(",")] if len(sys.argv) > 2 else SHAPES
    main(sys.argv[1], given)
