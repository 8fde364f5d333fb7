"""Run the full correctness suite plus compute-sanitizer (memcheck, racecheck) on each shape's reported kernel.

Each row's kernel of a sweep report (`hgemm sweep` JSON) is taken from the archive and evaluated again at its
own shape, stage "full", `sanitize=True`.

Usage: python -m hgemm.bench.sanitize_best REPORT.json --out bench/results/sanitize-NAME.json
       [--skip-shapes FILE] [--shard I/N]
       python -m hgemm.bench.sanitize_best REPORT.json --out OUT.json --merge PART.json [PART.json ...]

- Cheapest shapes first; --out (GPU name, driver, date, one entry per kernel) is rewritten after every shape.
  A rerun with it skips kernels already checked; a shape whose reported kernel changed is checked again.
- `--skip-shapes`: shapes sanitized elsewhere, one 'M N K' per line. `--shard I/N`: only positions I, I+N, ...
  of the cheapest-first order, so N processes with their own --out share one GPU. `--merge` keeps, per shape,
  the last shard entry for the reported kernel.
- Exit status 1 when a kernel failed (or, with --merge, a reported kernel was not checked).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from hgemm.core.shape import Shape


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hgemm.bench.sanitize_best", description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path, help="sweep report JSON")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--skip-shapes", type=Path, default=None, help="shapes already sanitized ('M N K' lines)")
    ap.add_argument("--shard", default="0/1", help="I/N: check every N-th shape starting at I (default 0/1)")
    ap.add_argument("--merge", type=Path, nargs="+", default=None, help="shard outputs to merge into --out")
    args = ap.parse_args(argv)
    index, count = (int(x) for x in args.shard.split("/"))
    if not 0 <= index < count:
        ap.error(f"--shard {args.shard}: need 0 <= I < N")

    from hgemm.agent.sweep import read_grid
    from hgemm.archive import Archive
    from hgemm.evaluator.local import LocalEvaluator

    rows = sorted(json.loads(args.report.read_text())["rows"], key=lambda r: r["flops"])
    skip = set(read_grid(args.skip_shapes)) if args.skip_shapes else set()
    done = json.loads(args.out.read_text()) if args.out.exists() else {"rows": []}
    reported = {(r["M"], r["N"], r["K"]): r.get("kernel") for r in rows}
    done["rows"] = [r for r in done["rows"] if reported.get((r["M"], r["N"], r["K"]), r["kernel"]) == r["kernel"]]
    if args.merge:
        return merge(done, args.merge, reported, args.out)
    checked = {(r["M"], r["N"], r["K"]) for r in done["rows"]}
    mine = {(r["M"], r["N"], r["K"]) for r in rows[index::count]}
    started = time.time()
    with LocalEvaluator() as ev, Archive() as archive:
        info = ev.gpu_info()
        done.update(gpu=info.name, driver=info.driver, date=time.strftime("%Y-%m-%d"))
        for row in rows:
            shape = (row["M"], row["N"], row["K"])
            if shape in checked or shape in skip or shape not in mine or not row.get("kernel"):
                continue
            kernel = archive.kernel(row["kernel"])
            if kernel is None:
                print(f"{shape}: kernel {row['kernel']} not in the archive", flush=True)
                continue
            t0 = time.time()
            (rec,) = ev.evaluate([kernel["source"]], Shape(*shape), stage="full", modes=("offline",), sanitize=True)
            entry = {"M": shape[0], "N": shape[1], "K": shape[2], "kernel": row["kernel"], "ok": rec.ok,
                     "failure_kind": rec.failure_kind, "failure_message": (rec.failure_message or "")[:500],
                     "seconds": round(time.time() - t0, 1)}  # fmt: skip
            done["rows"].append(entry)
            args.out.write_text(json.dumps(done, indent=1))
            print(f"{shape}: {'clean' if rec.ok else rec.failure_kind} in {entry['seconds']} s", flush=True)
    bad = [r for r in done["rows"] if not r["ok"]]
    print(f"{len(done['rows'])} kernels checked, {len(bad)} failed, {time.time() - started:.0f} s", flush=True)
    return 1 if bad else 0


def merge(done: dict, parts: list[Path], reported: dict, out: Path) -> int:
    """Add the shard outputs' entries for the reported kernels to `done` (a later entry of a shape wins)."""
    rows = {(r["M"], r["N"], r["K"]): r for r in done["rows"]}
    for part in parts:
        doc = json.loads(part.read_text())
        for key in ("gpu", "driver", "date"):
            done[key] = doc.get(key, done.get(key))
        for r in doc["rows"]:
            shape = (r["M"], r["N"], r["K"])
            if reported.get(shape) == r["kernel"]:
                rows[shape] = r
    done["rows"] = sorted(rows.values(), key=lambda r: r["M"] * r["N"] * r["K"])
    out.write_text(json.dumps(done, indent=1))
    missing = [s for s, k in reported.items() if k and s not in rows]
    bad = [r for r in done["rows"] if not r["ok"]]
    print(f"{len(done['rows'])} kernels checked, {len(bad)} failed, {len(missing)} reported kernels not checked")
    return 1 if bad or missing else 0


if __name__ == "__main__":
    sys.exit(main())
