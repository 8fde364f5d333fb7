"""The offline times of the 2026-11-26 few-tile, tall and K-heavy experiments as one sweep file that
`python -m hgemm.bench.fit_wgmma_factors --sweeps` reads (rows with status, median_us, config, params, M, N, K).

Usage: python experiment_sweeps.py OUT.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
SOURCES = [
    HERE / "2026-11-26-small-tiles" / "gpu-h100" / "small-tiles.json",
    HERE / "2026-11-26-small-tiles" / "gpu-h100" / "tall.json",
    HERE / "2026-11-26-k-heavy" / "gpu-h100" / "k-heavy.json",
]


def rows() -> list[dict]:
    out = []
    for path in SOURCES:
        for r in json.loads(path.read_text()):
            if r.get("ok") and r.get("offline"):
                M, N, K = r["shape"]
                out.append({"status": "ok", "median_us": r["offline"]["us"], "config": r["variant"].replace(" ", "_"),
                            "params": r["params"], "M": M, "N": N, "K": K})  # fmt: skip
    return out


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps({"rows": rows()}))
