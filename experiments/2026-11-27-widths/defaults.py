"""The wgmma defaults before and after the widths of 2026-11-27 (the transposed product 16-48 wide for C of at
most 48 rows, 128x128 ping-pong pairs split where K is long, 128x224 pairs where K has 64 boxes or more), on
every shape of shapes-real (M > 1) and of the 1,000-configuration grid whose default changed. The old
configurations are in old-defaults.json (the family's defaults at the commit before). Both evaluated, checked
and timed in both modes beside the libraries.

Usage (one GPU): python defaults.py OUT_DIR [OLD_DEFAULTS.json]  (another experiment's old defaults, by shape)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-11-26-small-tiles"))
from small_tiles import main  # noqa: E402  (evaluates configurations per shape, writes OUT_DIR/name)

OLD = json.loads((HERE / "old-defaults.json").read_text())


def configurations(shape) -> dict[str, dict]:
    from hgemm.evaluator.kernels import get_family

    from hgemm.core.shape import Shape

    return {"old default": OLD["x".join(map(str, shape))], "default": get_family("wgmma").default_params(Shape(*shape))}


if __name__ == "__main__":
    from hgemm.evaluator.kernels import get_family

    if len(sys.argv) > 2:
        OLD = json.loads(Path(sys.argv[2]).read_text())
    shapes = [tuple(int(x) for x in k.split("x")) for k in OLD]
    main(sys.argv[1], shapes, family=get_family("wgmma"), configurations=configurations, name="defaults.json")
