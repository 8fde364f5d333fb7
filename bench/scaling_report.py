"""How a sweep scales with GPUs: the same sweep run on one GPU and on several, compared.

Usage: python -m hgemm.bench.scaling_report ONE_DIR MANY_DIR --name NAME [--out-dir bench/results]
       [--since YYYY-MM-DDTHH:MM] [--notes FILE]

Each directory is one run's `--out` folder: its sweep report JSON (exactly one), and optionally the sweep's output
(`*.log`, for runs whose report predates `search_seconds`), `nvidia-smi` utilisation samples (`util*.csv`, lines
`index, percent`) and the run's exported archive (`*.jsonl.xz`, for the phases of its evaluations: only records
created since the run started count, or since `--since`, so an imported seed's are left out; their medians are
kept beside it as `eval-phases.json`, which serves in its place once the archive is gone). The runs must have
searched the same shapes on the same GPU model.

Written: NAME.json, NAME.md (with FILE's text appended under "Notes", for what the figures mean) and NAME.png
(per-shape wall time of both runs; medians of the evaluation phases that wait on a runner's start). Throughput
ratios: the search phase (first shape handed out to the last row), the whole run, and busy time (summed per-shape
wall, over the GPU count); the target is 0.9 per GPU.
"""

from __future__ import annotations

import argparse
import json
import lzma
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from hgemm.agent.sweep_report import geomean

DEFAULT_OUT = Path("bench") / "results"
PHASES = ("compile", "runner_boot", "runner_cuda", "spare_wait")  # what an evaluation waits on besides timing
PHASES_FILE = "eval-phases.json"


class ScalingError(ValueError):
    pass


def _one(folder: Path, pattern: str, required: bool) -> Path | None:
    found = sorted(p for p in folder.glob(pattern) if p.name != PHASES_FILE)
    if len(found) > 1:
        raise ScalingError(f"{folder}: more than one {pattern} ({', '.join(p.name for p in found)})")
    if not found and required:
        raise ScalingError(f"{folder}: no {pattern}")
    return found[0] if found else None


def _log_seconds(log: Path | None, prefix: str) -> float | None:
    """From a sweep's output: the search phase ("searched 64 shapes in 503 s on 1 worker(s)") or the bracketed
    elapsed time of the line starting with `prefix` ("4 worker(s) on NVIDIA H200: ... [54.6 s]")."""
    if log is None:
        return None
    for line in log.read_text(errors="replace").splitlines():
        if not line.startswith(prefix):
            continue
        try:
            if prefix == "searched ":
                return float(line.split(" in ", 1)[1].split(" s ", 1)[0])
            return float(line.rsplit("[", 1)[1].split(" s]", 1)[0])
        except (IndexError, ValueError):
            return None
    return None


def utilisation(csv: Path | None) -> dict[str, float]:
    """Mean utilisation per GPU index from `nvidia-smi --query-gpu=index,utilization.gpu` samples."""
    per: dict[int, list[int]] = {}
    if csv is not None:
        for line in csv.read_text().splitlines():
            try:
                gpu, pct = (int(x) for x in line.split(","))
            except ValueError:
                continue
            per.setdefault(gpu, []).append(pct)
    return {f"gpu{g}": round(sum(v) / len(v), 1) for g, v in sorted(per.items())}


def phases(folder: Path, since: str) -> dict[str, Any] | None:
    """Medians of the records' evaluation time and of PHASES, over the records of the folder's exported archive
    created on or after `since`. They are kept in the folder as PHASES_FILE, which stands in for the archive
    where it is gone (an archive is too large to keep with a result)."""
    archive = _one(folder, "*.jsonl.xz", False)
    kept = folder / PHASES_FILE
    if archive is None:
        return json.loads(kept.read_text()) if kept.exists() else None
    recs = []
    try:
        with lzma.open(archive, "rt") as f:
            for line in f:
                rec = json.loads(line).get("record")
                if rec and rec.get("created", "") >= since:
                    recs.append(rec)
    except (OSError, EOFError, lzma.LZMAError, ValueError, AttributeError) as e:
        raise ScalingError(f"{archive} is not an exported archive ({type(e).__name__}: {e})") from None
    evals = [r["eval_seconds"] for r in recs if r.get("eval_seconds")]
    if not evals:
        return None
    out: dict[str, Any] = {"since": since, "records": len(recs), "eval_median": round(statistics.median(evals), 4)}
    for name in PHASES:
        values = [r["phases"][name] for r in recs if name in (r.get("phases") or {})]
        out[name] = round(statistics.median(values), 4) if values else None
    kept.write_text(json.dumps(out, indent=1) + "\n")
    return out


def run_start(meta: dict[str, Any]) -> str:
    """The run's start as an archive record's `created` prefix ("2026-11-27 08:19 UTC" -> "2026-11-27T08:19")."""
    return str(meta.get("date") or "").replace(" UTC", "").replace(" ", "T")


def load_run(folder: Path, since: str | None) -> tuple[dict[str, Any], dict[tuple[int, int, int], dict[str, Any]]]:
    """(summary, rows by shape) of one run's folder; archive records count from `since`, else from the run's
    start."""
    path = _one(folder, "*.json", True)
    try:
        data = json.loads(path.read_text())
        meta, rows = data["meta"], {(r["M"], r["N"], r["K"]): r for r in data["rows"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ScalingError(f"{path} is not a sweep report's JSON ({type(e).__name__}: {e})") from None
    if not rows or not meta.get("workers"):
        raise ScalingError(f"{path}: no rows, or no worker count in its meta (not a sweep's report)")
    log = _one(folder, "*.log", False)
    workers = int(meta["workers"])
    walls = [r.get("wall_seconds") or 0.0 for r in rows.values()]
    waits = [r.get("worker_seconds") or 0.0 for r in rows.values()]
    summary = {
        "report": path.name,
        "gpu": meta.get("gpu"),
        "driver": meta.get("driver"),
        "date": meta.get("date"),
        "workers": workers,
        "grid": meta.get("grid"),
        "budget_evals": meta.get("budget_evals"),
        "shapes": len(rows),
        "failed": sum(r.get("status") == "failed" for r in rows.values()),
        "evaluations": sum(r.get("evals") or 0 for r in rows.values()),
        "run_wall_s": meta.get("run_wall_seconds"),
        "workers_up_s": meta.get("workers_up_seconds", _log_seconds(log, f"{workers} worker(s) on ")),
        "search_s": meta.get("search_seconds", _log_seconds(log, "searched ")),
        "sum_shape_wall_s": round(sum(walls), 1),
        "sum_worker_wait_s": round(sum(waits), 1),
        "median_shape_wall_s": round(statistics.median(w for w in walls if w), 2) if any(walls) else None,
        "gpu_util_pct": utilisation(_one(folder, "util*.csv", False)),
        **{f"geomean_{mode}": _round(geomean([r.get(f"{mode}_speedup_best") for r in rows.values()]), 3)
           for mode in ("offline", "server")},
        "per_evaluation_s": phases(folder, since or run_start(meta)),
    }
    return summary, rows


def _round(v: float | None, digits: int) -> float | None:
    return None if v is None else round(v, digits)


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a and b else None


def compare(one: dict[str, Any], many: dict[str, Any]) -> dict[str, Any]:
    n = many["workers"]
    return {
        "gpus": n,
        "throughput_ratio_search": _ratio(one["search_s"], many["search_s"]),
        "throughput_ratio_run": _ratio(one["run_wall_s"], many["run_wall_s"]),
        "throughput_ratio_busy": _ratio(n * one["sum_shape_wall_s"], many["sum_shape_wall_s"]),
        "target_ratio": round(0.9 * n, 2),
    }


def _s(v: Any, unit: str = " s") -> str:
    return "—" if v is None else f"{v}{unit}"


def markdown(report: dict[str, Any], notes: str = "") -> str:
    one, many, n = report["one_gpu"], report["many_gpus"], report["gpus"]
    what = f"{one['shapes']} shapes"
    if one["grid"]:
        what += f" of `{one['grid']}`"
    if one["budget_evals"]:
        what += f", `--budget-evals {one['budget_evals']}`"
    lines = [
        f"# Sweep scaling, 1 vs {n} GPUs",
        "",
        f"{one['gpu']} ×{n} on one host, driver {one['driver']}, {report['date']}. The same sweep "
        f"({what}) once with one GPU and once with {n}; figures from the runs' own reports, logs, "
        "exported archives (per-evaluation phases) and `nvidia-smi` samples "
        "(`python -m hgemm.bench.scaling_report`).",
        "",
        "| run | shapes | failed | evaluations | workers up | search phase | whole run | summed shape wall | "
        "of it waiting on the worker | GPU utilisation (mean) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for label, run in (("1 GPU", one), (f"{n} GPUs", many)):
        util = ", ".join(f"{g} {p}%" for g, p in run["gpu_util_pct"].items()) or "—"
        lines.append(
            f"| {label} | {run['shapes']} | {run['failed']} | {run['evaluations']} | {_s(run['workers_up_s'])} | "
            f"{_s(run['search_s'])} | {_s(run['run_wall_s'])} | {run['sum_shape_wall_s']} s | "
            f"{run['sum_worker_wait_s']} s | {util} |"
        )
    lines += [
        "",
        f"| throughput, {n} GPUs against 1 | ratio | target (0.9·N) |",
        "|---|---:|---:|",
        f"| search phase (first shape handed out to last row) | **{_s(report['throughput_ratio_search'], '×')}** | "
        f"{report['target_ratio']}× |",
        f"| busy: summed per-shape wall, over {n} | {_s(report['throughput_ratio_busy'], '×')} | "
        f"{report['target_ratio']}× |",
        f"| whole run (start-up, import and report included) | {_s(report['throughput_ratio_run'], '×')} | — |",
        "",
        f"Quality: geomean speedup vs the best baseline, offline {_s(one['geomean_offline'], '×')} (1 GPU) against "
        f"{_s(many['geomean_offline'], '×')} ({n} GPUs), server {_s(one['geomean_server'], '×')} against "
        f"{_s(many['geomean_server'], '×')}.",
    ]
    p1, pn = one["per_evaluation_s"], many["per_evaluation_s"]
    if p1 and pn:
        lines += ["", "Per evaluation (medians over each run's own records, seconds):", "",
                  f"| | evaluation | {' | '.join(PHASES)} |", "|---|" + "---:|" * (len(PHASES) + 1)]  # fmt: skip
        for label, p in (("1 GPU", p1), (f"{n} GPUs", pn)):
            lines.append(f"| {label} | {p['eval_median']} | " + " | ".join(_s(p[k], "") for k in PHASES) + " |")
    if notes.strip():
        lines += ["", "## Notes", "", notes.strip()]
    return "\n".join(lines) + "\n"


def plot(report: dict[str, Any], one_rows: dict, many_rows: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = report["gpus"]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
    def wall(row: dict) -> float:  # a resumed row was not searched by this run
        return row.get("wall_seconds") or math.nan

    keys = sorted(one_rows, key=lambda k: one_rows[k].get("wall_seconds") or 0.0)
    ax.plot(range(len(keys)), [wall(one_rows[k]) for k in keys], "o-", ms=3, label="1 GPU")
    ax.plot(range(len(keys)), [wall(many_rows[k]) for k in keys], "s", ms=3, alpha=0.8,
            label=f"{n} GPUs ({n} searches at once)")  # fmt: skip
    ax.set_xlabel("shape (sorted by its 1-GPU wall time)")
    ax.set_ylabel("wall seconds per shape")
    ax.set_title("Per-shape wall time")
    ax.legend()
    runs = [(lbl, r["per_evaluation_s"]) for lbl, r in (("1 GPU", report["one_gpu"]),
                                                         (f"{n} GPUs", report["many_gpus"])) if r["per_evaluation_s"]]  # fmt: skip
    names = [*PHASES, "eval_median"]
    for i, (label, p) in enumerate(runs):
        bx.bar([j + i * 0.35 for j in range(len(names))], [p[k] or 0.0 for k in names], width=0.35, label=label)
    bx.set_xticks([j + 0.17 for j in range(len(names))],
                  ["compile", "runner boot", "runner CUDA\ncontext", "spare wait", "evaluation\n(median)"])  # fmt: skip
    bx.set_ylabel("seconds per evaluation (median)")
    bx.set_title("Where an evaluation waits" if runs else "(no exported archives given)")
    if runs:
        bx.legend(fontsize=8)
    fig.suptitle(f"hgemm sweep, 1 vs {n} GPUs, {report['gpu']}, {report['date']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def build(one_dir: Path, many_dir: Path, since: str | None = None) -> tuple[dict[str, Any], dict, dict]:
    one, one_rows = load_run(one_dir, since)
    many, many_rows = load_run(many_dir, since)
    if one["workers"] != 1 or many["workers"] < 2:
        raise ScalingError(f"want a 1-GPU run and a run on several GPUs; got {one['workers']} and {many['workers']}")
    if set(one_rows) != set(many_rows):
        raise ScalingError("the two runs searched different shapes")
    if one["gpu"] != many["gpu"]:
        raise ScalingError(f"the runs are on different GPUs ({one['gpu']}, {many['gpu']})")
    report = {"gpu": f"{one['gpu']} x{many['workers']}, driver {one['driver']}",
              "date": str(many["date"] or "")[:10], "one_gpu": one, "many_gpus": many, **compare(one, many)}  # fmt: skip
    return report, one_rows, many_rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hgemm.bench.scaling_report", description=__doc__.split("\n\n")[0])
    ap.add_argument("one_dir", type=Path, help="the 1-GPU run's folder")
    ap.add_argument("many_dir", type=Path, help="the several-GPU run's folder")
    ap.add_argument("--name", required=True, help="report name (<name>.json, .md, .png)")
    ap.add_argument("--out-dir", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--notes", type=Path, help="markdown appended to the report under \"Notes\"")
    ap.add_argument("--since", help="count archive records created on or after this time (default: each run's "
                    "start, from its report)")
    args = ap.parse_args(argv)
    try:
        notes = args.notes.read_text() if args.notes else ""
    except OSError as e:
        print(f"error: cannot read the notes: {e}", file=sys.stderr)
        return 2
    try:
        report, one_rows, many_rows = build(args.one_dir, args.many_dir, args.since)
    except ScalingError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / f"{args.name}.json").write_text(json.dumps(report, indent=1) + "\n")
    (args.out_dir / f"{args.name}.md").write_text(markdown(report, notes))
    plot(report, one_rows, many_rows, args.out_dir / f"{args.name}.png")
    print(markdown(report, notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
