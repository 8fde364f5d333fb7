"""What the archives already hold on the shapes the paired-cluster default changes: for each shape of
`changed-defaults.json` with H100 wgmma records of both structures (the default's before and after: tile, cluster,
ping-pong, split, swap, stream-K; stages and tuning free), the best measured offline time of each and their ratio.

Usage: python structure_evidence.py ARCHIVE... > structure-evidence.json (jsonl exports, plain or xz). No GPU.
"""

from __future__ import annotations

import json
import lzma
import math
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
GPU = "NVIDIA H100"


def structure(params: dict) -> tuple:
    keys = ("bm", "bn", "cluster_m", "pingpong", "split_k", "swap_ab", "stream_k")
    defaults = {"split_k": 1, "swap_ab": 0, "stream_k": 0}
    return tuple(params.get(k, defaults.get(k)) for k in keys)


def best_times(paths: list[str], shapes: set[str]) -> dict[str, dict[tuple, float]]:
    kernels: dict[str, dict] = {}
    best: dict[str, dict[tuple, float]] = defaultdict(dict)
    for path in paths:
        opener = lzma.open if path.endswith(".xz") else open
        with opener(path, "rt") as f:
            for line in f:
                row = json.loads(line)
                if "source" in row and "hash" in row:
                    kernels[row["hash"]] = row
                    continue
                rec = row.get("record")
                if not rec or not rec.get("correct") or not str(rec.get("gpu", "")).startswith(GPU):
                    continue
                shape = f"{rec['M']}x{rec['N']}x{rec['K']}"
                kernel = kernels.get(rec["kernel_hash"])
                offline = (rec.get("modes") or {}).get("offline")
                if shape not in shapes or not offline or not kernel or kernel.get("family") != "wgmma":
                    continue
                s = structure(kernel["params"])
                t = offline["candidate"]["median_us"]
                best[shape][s] = min(t, best[shape].get(s, math.inf))
    return best


if __name__ == "__main__":
    changed = json.loads((HERE / "changed-defaults.json").read_text())
    best = best_times(sys.argv[1:], set(changed))
    rows = []
    for shape, pair in changed.items():
        before, after = structure(pair["before"]), structure(pair["after"])
        if before in best[shape] and after in best[shape]:
            rows.append({"shape": shape, "before": list(before), "before_us": round(best[shape][before], 2),
                         "after": list(after), "after_us": round(best[shape][after], 2),
                         "before_over_after": round(best[shape][before] / best[shape][after], 3)})  # fmt: skip
    ratios = [r["before_over_after"] for r in rows]
    summary = {"shapes_changed": len(changed), "shapes_with_both": len(rows),
               "geomean_before_over_after": round(math.exp(sum(map(math.log, ratios)) / len(ratios)), 3) if rows else None,
               "after_faster": sum(1 for x in ratios if x > 1)}  # fmt: skip
    print(json.dumps({"summary": summary, "rows": rows}, indent=1))
