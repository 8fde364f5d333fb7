"""Fifth probe: the wgmma template's `k_interleave` (two consumer warpgroups take alternate k-blocks of every tile,
each accumulating the whole tile; the second adds its share through shared memory), the structure Nsight Compute
showed in the library's kernel at 512x512x4096 (`ncu_pair.py`: 64x32 tiles, 384 threads, 128 CTAs in 1x2
clusters, 203 active cycles per k-block against our 291), against one consumer on the same tiles.

It ran against a change of the template that was not kept (it gained nothing; README.md describes it): the
parameter it sets is not in the family today.

Usage (one GPU): python interleave.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

from structures import ONE, SWAP, run_cases

KI = {"consumers": 2, "pingpong": 0, "epilogue": 1, "k_interleave": 1}
CASES = {
    (512, 512): {"64x64 c1": {**ONE, "bm": 64, "bn": 64, "stages": 12, "group_m": 16},
                 "64x64 ki": {**KI, "bm": 64, "bn": 64, "stages": 12, "group_m": 16},
                 "64x32 ki": {**KI, "bm": 64, "bn": 32, "stages": 16},
                 "64x32 ki c2": {**KI, "bm": 64, "bn": 32, "stages": 16, "cluster_m": 2}},
    (64, 4096): {"64x32 pp": {"bm": 64, "bn": 32, "consumers": 2, "pingpong": 1, "epilogue": 1, "epi_panels": 2,
                              "stages": 16},
                 "64x32 ki": {**KI, "bm": 64, "bn": 32, "stages": 16},
                 "64x64 ki": {**KI, "bm": 64, "bn": 64, "stages": 12},
                 "swap 64x32 ki c2": {**SWAP, "bm": 64, "bn": 32, "stages": 16, "cluster_m": 2, "consumers": 2,
                                      "k_interleave": 1}},
    (1024, 256): {"64x32 c1": {**ONE, "bm": 64, "bn": 32, "stages": 16, "group_m": 4},
                  "64x32 ki": {**KI, "bm": 64, "bn": 32, "stages": 16, "group_m": 4},
                  "64x32 ki c2": {**KI, "bm": 64, "bn": 32, "stages": 16, "group_m": 4, "cluster_m": 2},
                  "64x64 ki": {**KI, "bm": 64, "bn": 64, "stages": 12, "group_m": 4}},
    (12288, 256): {"128x128 coop": {"bm": 128, "bn": 128, "consumers": 2, "pingpong": 0, "epilogue": 1,
                                    "stages": 6},
                   "128x64 ki": {**KI, "bm": 128, "bn": 64, "stages": 8},
                   "64x128 ki": {**KI, "bm": 64, "bn": 128, "stages": 8},
                   "128x128 ki": {**KI, "bm": 128, "bn": 128, "stages": 6}},
    (1024, 1024): {"64x128 c2": {**ONE, "bm": 64, "bn": 128, "stages": 8, "cluster_m": 2},
                   "64x128 ki c2": {**KI, "bm": 64, "bn": 128, "stages": 8, "cluster_m": 2},
                   "128x64 ki c2": {**KI, "bm": 128, "bn": 64, "stages": 8, "cluster_m": 2},
                   "64x64 ki c2": {**KI, "bm": 64, "bn": 64, "stages": 12, "cluster_m": 2}},
}

if __name__ == "__main__":
    run_cases(Path(sys.argv[1]), CASES, "interleave.json")
