"""Fifteenth probe (written, not yet run): the library's order in the producer. On top of `warp_producer` 1, "tx
after": the elected lane arms the full slot's transaction count after issuing both loads, as the library's producer
does (`UTMALDG`, `UTMALDG.MULTICAST`, then the arrive with the count). The slot cannot complete before that arrive,
so either order is legal; armed first, the arrive's round trip to shared memory sits ahead of the loads. Each
variant is checked against torch.matmul at K = 1000 and timed offline at K = 512 .. 4096, with the library and
the one-thread producer beside it.

Usage (one GPU): python producer_variants.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

from fixed_cost import BASE
from hgemm.evaluator.kernels import get_family
from ring_only import edit
from smem_base import compare
from structures import ONE

EXPECT = "            mbar_arrive_expect_tx(fb, A_BYTES + B_BYTES);\n"
CLOSE = "            }\n          }\n          if (WARP_PRODUCER) __syncwarp();"
TX_AFTER = [(EXPECT, ""), (CLOSE, "            }\n" + EXPECT + "          }\n          if (WARP_PRODUCER) __syncwarp();")]
CASES = {
    (512, 512): {"64x32": {**ONE, "bm": 64, "bn": 32, "stages": 16}},
    (64, 4096): {"64x32": {**ONE, "bm": 64, "bn": 32, "stages": 16}},
    (1024, 1024): {"64x128 c2": {**ONE, "bm": 64, "bn": 128, "stages": 8, "cluster_m": 2}},
}


def sources() -> dict[tuple[int, int, str], str]:
    family = get_family("wgmma")
    out = {}
    for (M, N), configs in CASES.items():
        for name, cfg in configs.items():
            warp = family.render(family.repair({**BASE, **cfg, "warp_producer": 1}))
            out[(M, N, f"{name} thread")] = family.render(family.repair({**BASE, **cfg, "warp_producer": 0}))
            out[(M, N, f"{name} warp")] = warp
            out[(M, N, f"{name} warp tx after")] = edit(warp, TX_AFTER)
    return out


def main() -> None:
    compare(Path(sys.argv[1]), sources(), "producer-variants.json")


if __name__ == "__main__":
    main()
