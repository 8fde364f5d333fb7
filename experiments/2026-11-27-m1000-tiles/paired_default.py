"""The wgmma family's default before and after the paired-cluster rule (PAIRED_TILES in
evaluator/kernels/wgmma_family.py), on every shape of the full grid and bench/shapes-real.txt whose default it
changes (`changed-defaults.json`: shape -> the two configurations, as the family gave them without and with the
rule; shapes-real's first, then the grid's, cheapest first). Both are rendered by the family as it
is now; the evaluator checks every output; both modes, the libraries timed alongside. Results are written after
each shape, so a time limit keeps what was measured.

Usage (one GPU): python paired_default.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-11-26-small-tiles"))
from small_tiles import main  # noqa: E402  (evaluates configurations per shape, writes OUT_DIR/name)

CHANGED = json.loads((HERE / "changed-defaults.json").read_text())


def configurations(shape) -> dict[str, dict]:
    pair = CHANGED["x".join(map(str, shape))]
    return {"before": pair["before"], "after": pair["after"]}


if __name__ == "__main__":
    shapes = [tuple(int(x) for x in key.split("x")) for key in CHANGED]
    main(sys.argv[1], shapes, configurations=configurations, name="paired-default.json")
