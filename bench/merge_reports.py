"""One grid report from several: each later report's rows replace the earlier ones' rows of the same shape.

Usage: python -m hgemm.bench.merge_reports BASE.json NEWER.json [...] --name NAME [--out-dir bench/results]

For example a sweep's report and the re-measurement (`confirm_report`) of its older shapes, after a change to the
evaluator made their first figures wrong: the merged report holds, for every shape, the latest measurement.

- Every input must be a sweep report's JSON (rows of M, N, K); the rows keep every field they had, plus `source`,
  the name of the report each came from.
- `meta` is the first input's, with `merged_from`: each input's name and the number of rows it gave.
- Rows for different GPUs are refused: a report is of one GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path("bench") / "results"


class MergeError(ValueError):
    pass


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
        rows = data["rows"]
        if not isinstance(rows, list) or not all({"M", "N", "K"} <= set(r) for r in rows):
            raise KeyError("rows")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise MergeError(f"{path} is not a sweep report's JSON ({type(e).__name__}: {e})") from None
    return data


def merge(reports: list[tuple[str, dict[str, Any]]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(rows, meta) of the merged report; `reports` are (name, report JSON), oldest first."""
    by_shape: dict[tuple[int, int, int], dict[str, Any]] = {}
    for name, data in reports:
        for row in data["rows"]:
            by_shape[(row["M"], row["N"], row["K"])] = {**row, "source": name}
    given = {name: sum(r["source"] == name for r in by_shape.values()) for name, _data in reports}
    gpus = {r["gpu"] for r in by_shape.values() if r.get("gpu")}
    if len(gpus) > 1:
        raise MergeError(f"rows of several GPUs ({', '.join(sorted(gpus))}): a report is of one GPU")
    meta = dict(reports[0][1].get("meta") or {})
    meta["merged_from"] = [{"report": name, "rows": n} for name, n in given.items()]
    rows = sorted(by_shape.values(), key=lambda r: (r.get("flops") or r["M"] * r["N"] * r["K"], r["M"], r["N"]))
    return rows, meta


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hgemm.bench.merge_reports", description=__doc__.splitlines()[0])
    ap.add_argument("reports", type=Path, nargs="+", help="sweep report JSONs, oldest first")
    ap.add_argument("--name", required=True, help="name of the merged report (<name>.json, .md, .png)")
    ap.add_argument("--out-dir", type=Path, default=DEFAULT_OUT, help=f"report directory (default {DEFAULT_OUT})")
    args = ap.parse_args(argv)
    from hgemm.agent.sweep import write_report

    try:
        loaded = [_load(p) for p in args.reports]
        rows, meta = merge([(data.get("name") or p.stem, data) for p, data in zip(args.reports, loaded, strict=True)])
    except MergeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    paths = write_report(rows, args.out_dir, args.name, meta=meta)
    counts = ", ".join(f"{m['report']} {m['rows']}" for m in meta["merged_from"])
    print(f"{len(rows)} shapes ({counts}); wrote {', '.join(str(p) for p in paths.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
