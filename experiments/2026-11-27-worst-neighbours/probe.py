"""One knob at a time around the kernel the search chose, on the shapes-real shapes still below 0.90x (and
1000x4608x3584): which parameter, moved alone, moves the time. The chosen kernels (winners.json) come from the
confirmed shapes-real report of 2026-11-27 (H100). Knobs: tile rows and width (the width within 48 of the
chosen), ring depth, consumers and ping-pong, the 2-CTA cluster, split-K, the transposed product, K per stage,
the producer warp, the C store, rasterisation and persistence. A variant the family refuses is tried at the
deepest ring that it accepts, else dropped. The evaluator checks every output; both modes, the libraries timed
alongside; results written after each shape.

Usage (one GPU): python probe.py OUT_DIR [MxNxK,...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-11-26-small-tiles"))
from small_tiles import main  # noqa: E402  (evaluates configurations per shape, writes OUT_DIR/name)

WINNERS = json.loads((HERE / "winners.json").read_text())
ROLES = {"1 consumer": (1, 0), "2 cooperative": (2, 0), "2 ping-pong": (2, 1), "3 cooperative": (3, 0)}


def knobs(p: dict) -> dict[str, dict]:
    out = {f"bm {v}": {"bm": v} for v in (64, 128, 192, 256)}
    out |= {f"bn {v}": {"bn": v} for v in range(p["bn"] - 48, p["bn"] + 49, 16) if 16 <= v <= 256}
    out |= {f"stages {v}": {"stages": v} for v in (3, 4, 6, 8, 12, 16)}
    out |= {name: {"consumers": c, "pingpong": pp} for name, (c, pp) in ROLES.items()}
    out |= {f"cluster {v}": {"cluster_m": v} for v in (1, 2)}
    out |= {f"split {v}": {"split_k": v} for v in (1, 2, 3, 4)}
    out |= {f"swap {v}": {"swap_ab": v} for v in (0, 1)}
    out |= {f"stage_k {v}": {"stage_k": v} for v in (64, 128)}
    out |= {f"warp producer {v}": {"warp_producer": v} for v in (0, 1)}
    out |= {f"TMA store {v}": {"epilogue": v, "epi_panels": 2 * v} for v in (0, 1)}
    out |= {f"group_m {v}": {"group_m": v} for v in (1, 8)}
    out |= {f"persistent {v}": {"persistent": v} for v in (0, 1)}
    return out


def configurations(shape) -> dict[str, dict]:
    from hgemm.evaluator.kernels import get_family

    from hgemm.core.shape import Shape

    family = get_family("wgmma")
    s = Shape(*shape)
    chosen = WINNERS["x".join(map(str, shape))]["params"]
    found = {"chosen": chosen, "default": family.default_params(s)}
    for name, change in knobs(chosen).items():
        p = family.repair({**chosen, **change})
        for stages in sorted({p["stages"], *(v for v in (16, 14, 12, 10, 8, 7, 6, 5, 4, 3) if v < p["stages"])},
                             reverse=True):  # fmt: skip
            q = {**p, "stages": stages}
            if family.check(q, s) is None:
                if q not in found.values():
                    found[name] = q
                break
    return found


if __name__ == "__main__":
    from hgemm.evaluator.kernels import get_family

    given = sys.argv[2].split(",") if len(sys.argv) > 2 else list(WINNERS)
    shapes = [tuple(int(x) for x in k.split("x")) for k in given]
    main(sys.argv[1], shapes, family=get_family("wgmma"), configurations=configurations, name="probe.json")
