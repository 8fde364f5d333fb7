"""One grid report from several: each later report's rows replace the earlier ones' rows of the same shape.

Usage: python -m hgemm.bench.merge_reports BASE.json NEWER.json [...] --name NAME [--out-dir bench/results]
       [--confirmed-only]

For example a sweep's report and the re-measurement (`confirm_report`) of its older shapes, after a change to the
evaluator made their first figures wrong: the merged report holds, for every shape, the latest measurement.

- Every input must be a sweep report's JSON (rows of M, N, K); the rows keep every field they had, plus `source`,
  the name of the report each came from (a row that already names one, from an earlier merge, keeps it).
- `meta` is the first input's, with `merged_from`: each source report's name and the number of rows it gave.
- `--confirmed-only`: a later report's row replaces its shape's row only where it is a confirmed measurement (a
  re-measurement, or a search's confirmed finalist); its other rows (a search that kept an archived figure, say)
  are left out and listed in `meta["left_out"]`.
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


def confirmed(row: dict[str, Any]) -> bool:
    """Whether a report row's figures are a confirmed measurement."""
    return row.get("status") == "confirmed" or row.get("measured") == "confirmed"


def merge(reports: list[tuple[str, dict[str, Any]]],
          confirmed_only: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:  # fmt: skip
    """(rows, meta) of the merged report; `reports` are (name, report JSON), oldest first."""
    by_shape: dict[tuple[int, int, int], dict[str, Any]] = {}
    left_out = []
    for i, (name, data) in enumerate(reports):
        for row in data["rows"]:
            shape = (row["M"], row["N"], row["K"])
            if confirmed_only and i > 0 and shape in by_shape and not confirmed(row):
                left_out.append({"report": name, "shape": list(shape), "status": row.get("status")})
                continue
            # a row of an earlier merge keeps the report it came from
            by_shape[shape] = {**row, "source": row.get("source") or name}
    names = [*dict.fromkeys([r.get("source") for r in reports[0][1]["rows"] if r.get("source")]), *(n for n, _ in reports)]
    given = {name: n for name in dict.fromkeys(names) if (n := sum(r["source"] == name for r in by_shape.values()))}
    gpus = {r["gpu"] for r in by_shape.values() if r.get("gpu")}
    if len(gpus) > 1:
        raise MergeError(f"rows of several GPUs ({', '.join(sorted(gpus))}): a report is of one GPU")
    meta = dict(reports[0][1].get("meta") or {})
    meta["merged_from"] = [{"report": name, "rows": n} for name, n in given.items()]
    if confirmed_only:
        meta["left_out"] = left_out
    rows = sorted(by_shape.values(), key=lambda r: (r.get("flops") or r["M"] * r["N"] * r["K"], r["M"], r["N"]))
    return rows, meta


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hgemm.bench.merge_reports", description=__doc__.splitlines()[0])
    ap.add_argument("reports", type=Path, nargs="+", help="sweep report JSONs, oldest first")
    ap.add_argument("--name", required=True, help="name of the merged report (<name>.json, .md, .png)")
    ap.add_argument("--confirmed-only", action="store_true",
                    help="a later report's row replaces its shape's row only where its figures were confirmed")
    ap.add_argument("--out-dir", type=Path, default=DEFAULT_OUT, help=f"report directory (default {DEFAULT_OUT})")
    args = ap.parse_args(argv)
    from hgemm.agent.sweep import write_report

    try:
        loaded = [_load(p) for p in args.reports]
        named = [(data.get("name") or p.stem, data) for p, data in zip(args.reports, loaded, strict=True)]
        rows, meta = merge(named, confirmed_only=args.confirmed_only)
    except MergeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    paths = write_report(rows, args.out_dir, args.name, meta=meta)
    counts = ", ".join(f"{m['report']} {m['rows']}" for m in meta["merged_from"])
    if meta.get("left_out"):
        counts += f"; {len(meta['left_out'])} unconfirmed rows left out"
    print(f"{len(rows)} shapes ({counts}); wrote {', '.join(str(p) for p in paths.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
