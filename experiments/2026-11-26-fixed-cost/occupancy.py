"""Twelfth probe: two or more CTAs per SM. Our per-CTA time per k-block stays at about 137 ns whatever the tile,
the ring depth beyond 8 (`ring_rate.py`) or the bytes per k-block, and the persistent grid caps at one CTA per SM
(the family's split heuristics also keep tiles x splits <= SMs). Non-persistent grids with shallower rings let two
or four CTAs share an SM; with split-K they also cut each CTA's k-blocks. Each configuration is checked against
torch.matmul and timed at K = 512 .. 4096 (offline | server), as in `structures.py`.

`SPLITS` (argument "splits"): where one wave of unsplit tiles is far from filling the GPU, the split-K variants the
family's default and the archive's winners stand for, with and without the cluster, at two ring depths.

Usage (one GPU): python occupancy.py OUT_DIR [splits]
"""

from __future__ import annotations

import sys
from pathlib import Path

from fixed_cost import BASE
from hgemm.evaluator.compile import compile_sources
from hgemm.evaluator.kernels import get_family
from structures import ONE, run_cases

NP = {**ONE, "persistent": 0}
CASES = {
    (512, 512): {
        "64x32 s16": {**ONE, "bm": 64, "bn": 32, "stages": 16},
        "64x32 s8 np": {**NP, "bm": 64, "bn": 32, "stages": 8},
        "64x32 s8 split2": {**NP, "bm": 64, "bn": 32, "stages": 8, "split_k": 2, "epilogue": 0},
        "64x32 s4 split4": {**NP, "bm": 64, "bn": 32, "stages": 4, "split_k": 4, "epilogue": 0},
        "64x64 s6 split2": {**NP, "bm": 64, "bn": 64, "stages": 6, "split_k": 2, "epilogue": 0},
        "64x64 s6 split4": {**NP, "bm": 64, "bn": 64, "stages": 6, "split_k": 4, "epilogue": 0},
    },
    (1024, 1024): {
        "64x128 c2 s8": {**ONE, "bm": 64, "bn": 128, "stages": 8, "cluster_m": 2},
        "64x64 s6 np": {**NP, "bm": 64, "bn": 64, "stages": 6},
        "64x32 s8 np": {**NP, "bm": 64, "bn": 32, "stages": 8},
        "64x64 s6 split2": {**NP, "bm": 64, "bn": 64, "stages": 6, "split_k": 2, "epilogue": 0},
        "128x64 s3 np": {"consumers": 2, "pingpong": 0, "epilogue": 1, "persistent": 0, "bm": 128, "bn": 64,
                         "stages": 3},
    },
    (64, 4096): {
        "64x32 s16": {**ONE, "bm": 64, "bn": 32, "stages": 16},
        "64x32 s8 split2": {**NP, "bm": 64, "bn": 32, "stages": 8, "split_k": 2, "epilogue": 0},
        "64x32 s4 split4": {**NP, "bm": 64, "bn": 32, "stages": 4, "split_k": 4, "epilogue": 0},
        "64x64 s6 split4": {**NP, "bm": 64, "bn": 64, "stages": 6, "split_k": 4, "epilogue": 0},
    },
    (2048, 512): {
        "64x64 s12": {**ONE, "bm": 64, "bn": 64, "stages": 12},
        "64x64 s6 np": {**NP, "bm": 64, "bn": 64, "stages": 6},
        "64x32 s8 np": {**NP, "bm": 64, "bn": 32, "stages": 8},
        "64x64 s6 split2": {**NP, "bm": 64, "bn": 64, "stages": 6, "split_k": 2, "epilogue": 0},
    },
}
SPLITS = {
    (512, 512): {
        "64x64 s12 g16": {**ONE, "bm": 64, "bn": 64, "stages": 12, "group_m": 16},
        "64x64 s12 split2 c2": {**ONE, "bm": 64, "bn": 64, "stages": 12, "split_k": 2, "epilogue": 0, "cluster_m": 2},
        "64x64 s12 split2": {**ONE, "bm": 64, "bn": 64, "stages": 12, "split_k": 2, "epilogue": 0},
        "64x64 s6 split2": {**NP, "bm": 64, "bn": 64, "stages": 6, "split_k": 2, "epilogue": 0},
        "64x128 s8 split4": {**ONE, "bm": 64, "bn": 128, "stages": 8, "split_k": 4, "epilogue": 0},
    },
    (1024, 512): {
        "64x64 s12": {**ONE, "bm": 64, "bn": 64, "stages": 12},
        "64x64 s12 split2": {**ONE, "bm": 64, "bn": 64, "stages": 12, "split_k": 2, "epilogue": 0},
        "64x128 s8 split2": {**ONE, "bm": 64, "bn": 128, "stages": 8, "split_k": 2, "epilogue": 0},
    },
    (64, 4096): {
        "64x32 s16": {**ONE, "bm": 64, "bn": 32, "stages": 16},
        "64x64 s12 split2": {**ONE, "bm": 64, "bn": 64, "stages": 12, "split_k": 2, "epilogue": 0},
        "64x64 s6 split4": {**NP, "bm": 64, "bn": 64, "stages": 6, "split_k": 4, "epilogue": 0},
        "64x32 s8 split2": {**NP, "bm": 64, "bn": 32, "stages": 8, "split_k": 2, "epilogue": 0},
    },
}


def main() -> None:
    cases = SPLITS if sys.argv[2:] == ["splits"] else CASES
    family = get_family("wgmma")
    srcs = [family.render(family.repair({**BASE, **cfg})) for configs in cases.values() for cfg in configs.values()]
    built = compile_sources(srcs)  # in parallel; run_cases below hits the cache
    print(f"built {sum(b.ok for b in built)} of {len(built)}", flush=True)
    run_cases(Path(sys.argv[1]), cases, "occupancy.json" if cases is CASES else "occupancy-splits.json")


if __name__ == "__main__":
    main()
