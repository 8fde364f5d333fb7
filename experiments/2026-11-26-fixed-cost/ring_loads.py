"""Eighth probe: what sets the rate of our ring (`ring_only.py`: the operands streamed with no math take 90-100% of
the kernel's time)? The rendered kernel with its wgmma call removed, then string edits of the producer (here only):
A's load alone (the barrier expects A's bytes), Bt's load alone, no load at all (the producer only arrives on the
full barrier). If the rate falls with the bytes, the loads' bandwidth sets it; if it stays, the per-k-block round
trip does. Offline, against torch.matmul, K = 512 .. 4096. Outputs are garbage and not compared.

Usage (one GPU): python ring_loads.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

from ring_only import MATH, run_probe
from structures import ONE

EXPECT = "mbar_arrive_expect_tx(fb, A_BYTES + B_BYTES);"
LOAD_A = "tma_load_2d(sA + s * A_BYTES, &tmA, fb, kb * BK, m0);"
LOAD_B = "tma_load_2d(sB + s * B_BYTES, &tmB, fb, kb * BK, n0);"
NO_LOADS = [(EXPECT, "mbar_arrive(fb);"), (LOAD_A, ""), (LOAD_B, "")]  # the producer only arrives
EDITS = {
    "ring": [(MATH, "")],
    "ring A only": [(MATH, ""), (EXPECT, "mbar_arrive_expect_tx(fb, A_BYTES);"), (LOAD_B, "")],
    "ring Bt only": [(MATH, ""), (EXPECT, "mbar_arrive_expect_tx(fb, B_BYTES);"), (LOAD_A, "")],
    "ring no loads": [(MATH, ""), *NO_LOADS],
}
CASES = {
    (512, 512): {"64x64": {**ONE, "bm": 64, "bn": 64, "stages": 12}, "64x32": {**ONE, "bm": 64, "bn": 32, "stages": 16}},
    (64, 4096): {"64x32": {**ONE, "bm": 64, "bn": 32, "stages": 16}},
}


def main() -> None:
    run_probe(Path(sys.argv[1]), CASES, EDITS, "ring-loads.json")


if __name__ == "__main__":
    main()
