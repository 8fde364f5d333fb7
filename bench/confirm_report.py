"""Re-measure each shape's reported kernel once more and write a report from those measurements alone.

A sweep's speedups are biased upward by picking the best of many noisy measurements; an independent
re-measurement of the kernel already picked is not.

Usage: python -m hgemm.bench.confirm_report REPORT.json --name NAME [--out-dir bench/results]

- Each row's kernel comes from the archive and is evaluated again at its shape: stage "full", both modes,
  baselines timed alongside. The new records are not archived, unless `--archive` is given: then each is
  archived as the kernel's confirmed record (stage "confirmed"), so that after a fix to the evaluator a sweep
  run with `--measured-after` resumes the shape from this measurement instead of searching it again.
- The report (`agent.sweep.write_report`) takes times and speedups only from the new records; a confirmed row
  keeps the input's figures as `selected_offline_speedup_best` and `selected_server_speedup_best`.
- Row status: "confirmed"; "no_kernel" with `confirm_failure` (failed or incorrect); "not_confirmed" (kernel
  not in the archive: the input row carried over). A row without a kernel is carried over unchanged.
- `--render`: a kernel the archive does not hold is rendered again from the row's family and parameters by
  today's template (an older report's configuration, where its archive is not at hand), if the family takes those
  parameters for the shape. The confirmed row names the kernel that was measured, and the input's as
  `rendered_from`.
- Cheapest shapes first, the report rewritten after every shape; a rerun with the same --name and --out-dir
  skips the shapes already re-measured. Exit status 1 when a kernel failed or was not in the archive.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

from hgemm.core.shape import Shape

DEFAULT_OUT = Path("bench") / "results"
BELOW = 0.90  # confirmed speedups under this count as clear losses in the closing summary


def _key(row: dict[str, Any]) -> tuple[int, int, int, str | None]:
    """A row's shape and the input's kernel (a rendered row's `rendered_from`), so that a rerun finds it."""
    return row["M"], row["N"], row["K"], row.get("rendered_from") or row.get("kernel")


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}x"


def previous_rows(path: Path) -> dict[tuple[int, int, int, str | None], dict[str, Any]]:
    """The rows of an earlier run's report that re-measured a kernel (confirmed, or failed doing so)."""
    if not path.exists():
        return {}
    done = {}
    for row in json.loads(path.read_text())["rows"]:
        if row.get("status") == "confirmed" or (row.get("status") == "no_kernel" and "confirm_failure" in row):
            done[_key(row)] = row
    return done


def previous_meta(path: Path) -> dict[str, Any]:
    """GPU, driver and date of an earlier run of the same confirmation (the first run's, kept on resume)."""
    if not path.exists():
        return {}
    meta = json.loads(path.read_text()).get("meta") or {}
    return {k: meta[k] for k in ("gpu", "driver", "date") if k in meta}


def rendered_source(row: dict[str, Any]) -> tuple[str | None, str]:
    """(the row's configuration rendered by today's template of its family, "") or (None, why not): without family
    and parameters, or parameters the family refuses for the shape (a report is input: its values go into the
    source, so only the family's own values are rendered)."""
    from hgemm.evaluator.kernels import get_family

    if not row.get("family") or not isinstance(row.get("params"), dict):
        return None, "no family and parameters to render"
    try:
        family = get_family(row["family"])
    except KeyError as e:
        return None, str(e)
    params = dict(row["params"])
    why = family.check(params, Shape(row["M"], row["N"], row["K"]))
    return (None, why) if why else (family.render(params), "")


def confirm_row(row: dict[str, Any], record: Any, rendered: bool = False) -> dict[str, Any]:
    """The report row of a fresh record of the input row's kernel (`rendered`: of its configuration rendered
    again), with the input's selected speedups."""
    from hgemm.agent.sweep import row_from_record

    from hgemm.core.record import MODES

    out = row_from_record(
        Shape(row["M"], row["N"], row["K"]),
        record,
        kernel=record.kernel_hash if rendered else row["kernel"],
        family=row.get("family"),
        params=row.get("params"),
        proposer=row.get("proposer"),
        gpu=record.gpu,
        evals=row["evals"],
        gpu_seconds=row["gpu_seconds"],
        status="confirmed",
    )
    for mode in MODES:
        out[f"selected_{mode}_speedup_best"] = row.get(f"{mode}_speedup_best")
    if rendered:
        out["rendered_from"] = row["kernel"]
    if not record.ok:
        out["confirm_failure"] = record.failure_kind
    return out


def main(argv: list[str] | None = None, *, evaluator: Any = None, archive: Any = None) -> int:
    """Run the confirmation; `evaluator` and `archive` default to the GPU evaluator and the archive
    (opened and closed here); objects passed in are used as they are and left open."""
    ap = argparse.ArgumentParser(prog="python -m hgemm.bench.confirm_report", description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path, help="sweep report JSON")
    ap.add_argument("--name", required=True, help="name of the confirmed report (<name>.json, .md, .png)")
    ap.add_argument("--out-dir", type=Path, default=DEFAULT_OUT, help=f"report directory (default {DEFAULT_OUT})")
    ap.add_argument("--archive", action="store_true", help="archive each re-measurement as the kernel's confirmed "
                    "record (for a later `hgemm sweep --measured-after`)")  # fmt: skip
    ap.add_argument("--render", action="store_true", help="render a kernel the archive does not hold from the "
                    "row's family and parameters with today's template")  # fmt: skip
    args = ap.parse_args(argv)

    from hgemm.agent.commands import open_evaluator
    from hgemm.agent.proposer import Candidate
    from hgemm.agent.sweep import summarize, write_report
    from hgemm.archive import Archive

    from hgemm.core.record import MODES, EvalRecord

    report = json.loads(args.report.read_text())
    rows = report["rows"]
    previous = previous_rows(args.out_dir / f"{args.name}.json")
    # index in the input -> the output row; rows without a kernel pass through unchanged
    out: dict[int, dict[str, Any]] = {}
    for i, row in enumerate(rows):
        if not row.get("kernel"):
            out[i] = row
        elif _key(row) in previous:
            out[i] = previous[_key(row)]
    if out:
        print(f"{len(out)} of {len(rows)} shapes need no new measurement (no kernel, or confirmed earlier)")

    meta = dict(previous_meta(args.out_dir / f"{args.name}.json"))

    def write(plot_png: bool) -> dict[str, Path]:
        done = [out[i] for i in sorted(out)]
        meta["how"] = (f"each row's kernel from {args.report.name} evaluated once more (full stage, both modes, the "
                       f"four baselines beside it), cheapest shape first: {sum(r.get('status') == 'confirmed' for r in done)} "
                       f"of {len(rows)} shapes re-measured")  # fmt: skip
        return write_report(done, args.out_dir, args.name, plot_png=plot_png, meta=meta)

    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        ev = evaluator if evaluator is not None else stack.enter_context(open_evaluator())
        store = archive if archive is not None else stack.enter_context(Archive())
        for i in sorted((i for i in range(len(rows)) if i not in out), key=lambda i: rows[i]["flops"]):
            row = rows[i]
            shape = (row["M"], row["N"], row["K"])
            kernel = store.kernel(row["kernel"])
            source = kernel["source"] if kernel is not None else None
            rendered, why = source is None and args.render, ""
            if rendered:
                source, why = rendered_source(row)
            if source is None:
                why = f" ({why})" if why else ""
                print(f"{shape}: kernel {row['kernel']} not in the archive{why}; carried over unconfirmed", flush=True)
                out[i] = {**row, "status": "not_confirmed"}
                write(False)
                continue
            t0 = time.monotonic()
            (rec,) = ev.evaluate([source], Shape(*shape), stage="full", modes=MODES)
            seconds = time.monotonic() - t0
            if args.archive and rec.ok:
                confirmed = EvalRecord.from_dict({**rec.to_dict(), "stage": "confirmed"})
                candidate = Candidate(source, row.get("proposer") or "import", family=row.get("family"),
                                      params=row.get("params") if rendered else None)
                store.record(candidate, confirmed)
            out[i] = confirm_row(row, rec, rendered)
            if rec.gpu and "gpu" not in meta:
                meta.update(gpu=rec.gpu, driver=rec.driver, date=date.today().isoformat())
            write(False)
            figures = ", ".join(
                f"{mode} {_x(row.get(f'{mode}_speedup_best'))} -> {_x(out[i][f'{mode}_speedup_best'])}"
                for mode in MODES
            )
            failed = "" if rec.ok else f" FAILED ({rec.failure_kind})"
            print(f"{shape}: selected -> confirmed: {figures}{failed} ({seconds:.1f} s)", flush=True)
    paths = write(True)

    final = [out[i] for i in sorted(out)]
    confirmed = [r for r in final if r["status"] == "confirmed"]
    failed = [r for r in final if "confirm_failure" in r]
    missing = [r for r in final if r["status"] == "not_confirmed"]
    summary = summarize(final)
    print(f"{len(confirmed)} of {len(rows)} shapes confirmed, {len(failed)} failed the re-measurement, "
          f"{len(missing)} kernels not in the archive; {time.monotonic() - started:.0f} s")  # fmt: skip
    if missing:
        print(f"note: the {len(missing)} unconfirmed rows keep their selected figures in the confirmed summary")
    for mode in MODES:
        selected = report.get("summary", {}).get(mode, {}).get("geomean_speedup_best")
        speedups = [r[f"{mode}_speedup_best"] for r in confirmed]
        below = sum(x is not None and x < BELOW for x in speedups)
        print(f"{mode}: geomean speedup vs best baseline selected {_x(selected)}, confirmed "
              f"{_x(summary[mode]['geomean_speedup_best'])}; {below} confirmed shapes below {BELOW:.2f}x")  # fmt: skip
    print("wrote " + ", ".join(str(p) for p in paths.values()))
    return 1 if failed or missing else 0


if __name__ == "__main__":
    sys.exit(main())
