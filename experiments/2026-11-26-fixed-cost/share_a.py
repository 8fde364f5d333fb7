"""Sixth probe: the wgmma template's `share_a` (the 2-CTA cluster lies along N and multicasts the A tile, not Bt).
`structures.py`, `chains.py` and `interleave.py` left our time per k-block the same however the consumers work; the
library's kernel at 512x512x4096 (`ncu_pair.py`) is 64x32 tiles in clusters of two that share the 64-row operand,
where our only cluster shared the 32-row one. Each configuration against torch.matmul at K = 512 .. 4096.

It ran against a change of the template that was not kept (it gained nothing; README.md describes it): the
parameter it sets is not in the family today.

Usage (one GPU): python share_a.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

from structures import ONE, run_cases

SA = {**ONE, "cluster_m": 2, "share_a": 1}
CASES = {
    (512, 512): {"64x64 c1": {**ONE, "bm": 64, "bn": 64, "stages": 12, "group_m": 16},
                 "64x32 c2 B": {**ONE, "bm": 64, "bn": 32, "stages": 16, "cluster_m": 2},
                 "64x32 c2 A": {**SA, "bm": 64, "bn": 32, "stages": 16},
                 "64x64 c2 A": {**SA, "bm": 64, "bn": 64, "stages": 12}},
    (64, 4096): {"64x32 pp": {"bm": 64, "bn": 32, "consumers": 2, "pingpong": 1, "epilogue": 1, "epi_panels": 2,
                              "stages": 16},
                 "64x32 c2 A": {**SA, "bm": 64, "bn": 32, "stages": 16},
                 "64x64 c2 A": {**SA, "bm": 64, "bn": 64, "stages": 12}},
    (1024, 256): {"64x32 c1": {**ONE, "bm": 64, "bn": 32, "stages": 16, "group_m": 4},
                  "64x32 c2 B": {**ONE, "bm": 64, "bn": 32, "stages": 16, "group_m": 4, "cluster_m": 2},
                  "64x32 c2 A": {**SA, "bm": 64, "bn": 32, "stages": 16, "group_m": 4}},
    (1024, 1024): {"64x128 c2 B": {**ONE, "bm": 64, "bn": 128, "stages": 8, "cluster_m": 2},
                   "64x128 c2 A": {**SA, "bm": 64, "bn": 128, "stages": 8},
                   "64x64 c2 A": {**SA, "bm": 64, "bn": 64, "stages": 12},
                   "128x64 c2 A": {**SA, "bm": 128, "bn": 64, "consumers": 2, "stages": 8}},
    (12288, 256): {"128x128 coop": {"bm": 128, "bn": 128, "consumers": 2, "pingpong": 0, "epilogue": 1,
                                    "stages": 6},
                   "128x128 c2 A": {**SA, "bm": 128, "bn": 128, "consumers": 2, "stages": 6},
                   "128x64 c2 A": {**SA, "bm": 128, "bn": 64, "consumers": 2, "stages": 8}},
}

if __name__ == "__main__":
    run_cases(Path(sys.argv[1]), CASES, "share-a.json")
