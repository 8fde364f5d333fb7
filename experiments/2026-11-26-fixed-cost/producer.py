"""Fourteenth probe: the producer warp. PC sampling (`ncu_stalls.py`) put most of the producer's samples in its own
issue path, not on the empty-slot wait, while the consumers waited on the full slots (30% of all samples): the
producer sets the ring's rate. Its loop ran in one thread (`if (wg_thread == 0)`), so the compiler moved every TMA
operand into uniform registers through a loop of its own (ELECT, R2UR, BRA.U.ANY) around each load, about 35
instructions per k-block; the library's producer loop is about 10. The loop now runs in the whole producer warp,
one elected lane arriving and issuing: the family's parameter `warp_producer` 1 ("new") against 0 ("old", the
former loop), checked against torch.matmul and timed offline at K = 512 .. 4096. (When it ran, the warp loop was
the template's only one and "old" restored the former loop by string edits; the parameter selects the same two
loops.)

Usage (one GPU): python producer.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

from fixed_cost import BASE
from hgemm.evaluator.kernels import get_family
from smem_base import CASES as SMEM_CASES
from smem_base import compare
from structures import ONE

CASES = {**SMEM_CASES, (64, 4096): {"64x32": {**ONE, "bm": 64, "bn": 32, "stages": 16}}}


def main() -> None:
    family = get_family("wgmma")
    srcs = {}
    for (M, N), configs in CASES.items():
        for name, cfg in configs.items():
            for label, producer in (("new", 1), ("old", 0)):
                params = family.repair({**BASE, **cfg, "warp_producer": producer})
                srcs[(M, N, f"{name} {label}")] = family.render(params)
    compare(Path(sys.argv[1]), srcs, "producer.json")


if __name__ == "__main__":
    main()
