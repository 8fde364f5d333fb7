"""The grid shapes whose reported kernel is more than 5% behind one an earlier version of the report held (2026-11-27).

Reads every committed version of `bench/results/full-H100-confirmed.json` (git history) and writes two sweep-report
inputs for `python -m hgemm.bench.confirm_report ... --render`: `earlier.json` (per such shape the earlier row whose
offline x server speedup was highest) and `current.json` (the shape's current row). Confirming both on one GPU
measures each shape's two configurations on the same machine, rendered by today's template.

Usage (no GPU, from the repository root): python experiments/2026-11-27-lost-kernels/make_inputs.py
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

REPORT = "bench/results/full-H100-confirmed.json"
HERE = Path(__file__).resolve().parent
MARGIN = 1.05


def versions() -> list[dict]:
    revs = subprocess.check_output(["git", "log", "--format=%h", "--reverse", "--", REPORT], text=True).split()
    return [json.loads(subprocess.check_output(["git", "show", f"{rev}:{REPORT}"])) | {"rev": rev} for rev in revs]


def score(row: dict) -> float:
    return (row.get("offline_speedup_best") or 0.0) * (row.get("server_speedup_best") or 0.0)


def main() -> None:
    docs = versions()
    current = {(r["M"], r["N"], r["K"]): r for r in docs[-1]["rows"]}
    earlier, now = [], []
    for shape, row in current.items():
        past = [{**r, "source": d["rev"]} for d in docs[:-1] for r in d["rows"] if (r["M"], r["N"], r["K"]) == shape]
        best = max(past, key=score, default=None)
        if best and best.get("kernel") != row.get("kernel") and best.get("params") and score(best) > MARGIN * score(row):
            earlier.append(best)
            now.append(row)
    for name, rows in (("earlier", earlier), ("current", now)):
        (HERE / f"{name}.json").write_text(json.dumps({"name": name, "meta": {}, "rows": rows}, indent=1) + "\n")
    for e, c in zip(earlier, now, strict=True):
        print(f"{e['M']}x{e['N']}x{e['K']}: earlier ({e['source']}) {e['offline_speedup_best']:.3f} / "
              f"{e['server_speedup_best']:.3f}, now {c['offline_speedup_best']:.3f} / {c['server_speedup_best']:.3f}")
    print(f"{len(earlier)} shapes")


if __name__ == "__main__":
    main()
