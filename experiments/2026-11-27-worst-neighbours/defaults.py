"""The wgmma defaults before and after this experiment's two rules (the 2x1 cluster for 64-row tiles in one
nearly whole wave, 128-deep stages for the cluster's 64-row tiles on short outputs), on every shape of
shapes-real and the 1,000-configuration grid whose default changed. The comparison is the widths experiment's
(`../2026-11-27-widths/defaults.py`), with this folder's old-defaults.json: the family's defaults at the commit
before. Both evaluated, checked and timed in both modes beside the libraries.

Usage (one GPU): python defaults.py OUT_DIR
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("widths_defaults", HERE.parent / "2026-11-27-widths" / "defaults.py")
widths_defaults = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(widths_defaults)
widths_defaults.OLD = json.loads((HERE / "old-defaults.json").read_text())  # this experiment's old defaults

if __name__ == "__main__":
    from hgemm.evaluator.kernels import get_family

    shapes = [tuple(int(x) for x in k.split("x")) for k in widths_defaults.OLD]
    widths_defaults.main(sys.argv[1], shapes, family=get_family("wgmma"),
                         configurations=widths_defaults.configurations, name="defaults.json")  # fmt: skip
