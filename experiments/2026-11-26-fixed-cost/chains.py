"""Third probe: the wgmma template's `acc_chains` 2 (the even and odd k16 steps of every k-block accumulate into two
register sets, so two wgmma chains are in flight) against 1, on the configurations of `structures.py` whose time
per K did not move with the tile count (a latency bound, not a bandwidth one), and on the 1024^3 default.

It ran against a change of the template that was not kept (it gained nothing; README.md describes it): the
parameter it sets is not in the family today.

Usage (one GPU): python chains.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

from structures import ONE, run_cases

PAIRS = {
    (512, 512): {"64x64 c1": {**ONE, "bm": 64, "bn": 64, "stages": 12, "group_m": 16},
                 "64x32 c1": {**ONE, "bm": 64, "bn": 32, "stages": 16},
                 "64x32 c2": {**ONE, "bm": 64, "bn": 32, "stages": 16, "cluster_m": 2}},
    (64, 4096): {"64x32 pp": {"bm": 64, "bn": 32, "consumers": 2, "pingpong": 1, "epilogue": 1, "epi_panels": 2,
                              "stages": 16},
                 "64x32 c1": {**ONE, "bm": 64, "bn": 32, "stages": 16},
                 "64x64 split2 dsmem": {**ONE, "bm": 64, "bn": 64, "stages": 12, "split_k": 2, "split_dsmem": 1,
                                        "persistent": 0, "epilogue": 0}},
    (1024, 256): {"64x32 c1": {**ONE, "bm": 64, "bn": 32, "stages": 16, "group_m": 4}},
    (12288, 256): {"128x64 pp": {"bm": 128, "bn": 64, "consumers": 2, "pingpong": 1, "epilogue": 1, "stages": 8},
                   "128x128 coop": {"bm": 128, "bn": 128, "consumers": 2, "pingpong": 0, "epilogue": 1,
                                    "stages": 6}},
    (1024, 1024): {"64x128 c2": {**ONE, "bm": 64, "bn": 128, "stages": 8, "cluster_m": 2}},
}
CASES = {mn: {f"{name} x{chains}": {**cfg, "acc_chains": chains} for name, cfg in configs.items() for chains in (1, 2)}
         for mn, configs in PAIRS.items()}  # fmt: skip

if __name__ == "__main__":
    run_cases(Path(sys.argv[1]), CASES, "chains.json")
