"""Clusters of four CTAs along M, each loading a quarter of the shared Bt tile and multicasting it (the family
now allows `cluster_m` 4), against the default and clusters of one and two, on the shapes of shapes-real that
trail the libraries and the README's 1024^3.

The smem-fill experiment's first GPU run of the 4x1 form (experiments/2026-11-28-smem-fill/gpu-h200) found
the transposed product 11-22% faster offline at 16x4608x3584, 128x4608x3584 and 77x5120x5120 than the same tile
in 2x1 clusters, and twice as slow where the grid needs more than the 30 clusters of four a 132-SM part holds
(64x4096x16384, 1024^3). cuBLASLt's autotuned kernel at 1000x1408x2048 on the H100 is 128x96 tiles in clusters
of four along M (`nvjet_sm90_hsh_96x128_64x6_1x4`, experiments/2026-11-27-library-kernels).

Per shape: the default; the default's tile with the other cluster sizes; the transposed product (kernel rows
along C's columns) in 64- and 128-row tiles as wide as M rounded up to 32, in clusters of 1, 2 and 4; where M
is at least 256, 128-row tiles 96, 128 and 160 wide in clusters of 2 and 4. Each with the stage depth and
producer the defaults give it and the deepest ring that fits; the family checks each before it is compiled and
the evaluator checks every output. Both modes, the libraries alongside.

Usage (one GPU): python clusters.py OUT_DIR [MxNxK,...]
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-11-26-small-tiles"))
from small_tiles import main  # noqa: E402  (evaluates configurations per shape, writes OUT_DIR/name)

SHAPES = [(16, 4608, 3584), (128, 4608, 3584), (77, 5120, 5120), (200, 13824, 5120), (1000, 1408, 2048),
          (1000, 4608, 3584), (1024, 1024, 1024)]  # fmt: skip
RINGS = (16, 14, 12, 10, 8, 7, 6, 5, 4, 3)


def configurations(shape) -> dict[str, dict]:
    from hgemm.evaluator.kernels import get_family

    from hgemm.core.shape import Shape

    family = get_family("wgmma")
    s = Shape(*shape)
    base = family.default_params(s)
    found = {"default": base}

    def add(name: str, change: dict) -> None:
        p = {k: v for k, v in {**base, **change}.items() if k not in ("stage_k", "warp_producer")}
        p = family.fit(family.default_tuning(family.repair(p), shape=s), s)
        q = next(({**p, "stages": r} for r in RINGS if family.check({**p, "stages": r}, s) is None), None)
        if q is not None and q not in found.values():
            found[name] = q

    for c in (1, 2, 4):
        if c != base["cluster_m"] and not base.get("split_dsmem"):
            add(f"default c{c}", {"cluster_m": c})
    M = shape[0]
    width = 32 * -(-M // 32)
    if width <= 256:
        for bm in (64, 128):
            for c in (1, 2, 4):
                add(f"swap {bm}x{width} c{c}", {"swap_ab": 1, "bm": bm, "bn": width, "consumers": bm // 64,
                                                 "cluster_m": c, "split_k": 1, "split_dsmem": 0, "stream_k": 0,
                                                 "epi_panels": 0, "persistent": 1})  # fmt: skip
    if M >= 256:
        for bn in (96, 128, 160):
            for c in (2, 4):
                add(f"128x{bn} pp c{c}", {"bm": 128, "bn": bn, "consumers": 2, "pingpong": 1, "cluster_m": c,
                                          "split_k": 1, "split_dsmem": 0, "stream_k": 0, "swap_ab": 0,
                                          "epilogue": 1, "epi_panels": 2, "persistent": 1})  # fmt: skip
    return found


if __name__ == "__main__":
    from hgemm.evaluator.kernels import get_family

    given = [tuple(int(x) for x in k.split("x")) for k in sys.argv[2].split(",")] if len(sys.argv) > 2 else SHAPES
    main(sys.argv[1], given, family=get_family("wgmma"), configurations=configurations, name="clusters.json")
