"""The small family's default as it renders after the change (16-row tiles for M <= 16), on four M = 16 shapes and
7x14336x4096, with 16x32 tiles beside it where the default takes 16x16 (run on the H100 after the change).

Usage: python product_default.py OUT.json   (one GPU; under a minute)
"""

from __future__ import annotations

import json
import sys

from hgemm.evaluator.kernels import get_family
from hgemm.evaluator.local import LocalEvaluator

from hgemm.core.shape import Shape

SHAPES = [Shape(16, 6144, 4096), Shape(16, 4608, 3584), Shape(16, 2048, 1408), Shape(16, 1408, 2048), Shape(7, 14336, 4096)]


def main() -> None:
    fam = get_family("small")
    out = []
    with LocalEvaluator() as ev:
        for shape in SHAPES:
            default = fam.default_params(shape)
            params = [default] + ([{**default, "BN": 32, "WARPS_N": 2}] if default["BN"] == 16 else [])
            recs = ev.evaluate([fam.render(p) for p in params], shape, stage="full", modes=("offline", "server"))
            for p, rec in zip(params, recs, strict=True):
                row = {"shape": str(shape), "params": p, "default": p == default, "ok": rec.ok,
                       "offline_us": rec.median_us("offline"), "offline": rec.speedup_best("offline"),
                       "server": rec.speedup_best("server")}  # fmt: skip
                out.append(row)
                print(json.dumps(row), flush=True)
    with open(sys.argv[1], "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
