"""A sweep's report: one row per shape, a summary, and `<name>.json`, `<name>.md`, `<name>.png`.

- Rows come only from full-stage, correct records; a shape with none has null times and status "no_kernel"
  (or "failed" when its search failed twice), and counts against the sweep.
- The summary gives, per mode, the geomean speedup over each baseline and over the best of them, the share
  of shapes won (speedup over the best baseline above 1.0) and below 1.0, the worst shapes, and the same
  geomeans per FLOP decade and per shape class (`agent.sweep_grid.shape_class`); GPU-hours are the sum of
  the shapes' evaluation times.
- The plot: speedup over the best baseline per configuration, sorted (left), and against FLOPs (right).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from hgemm.agent.sweep_grid import SHAPE_CLASSES, flop_decade, shape_class

from hgemm.core.paths import write_text_atomic
from hgemm.core.record import BASELINES, MODES, EvalRecord
from hgemm.core.shape import Shape

WORST = 10  # shapes listed per mode as the worst


# ----- rows ------------------------------------------------------------------------------------------


def row_from_record(
    shape: Shape,
    record: EvalRecord | None,
    *,
    kernel: str | None = None,
    family: str | None = None,
    params: dict[str, Any] | None = None,
    proposer: str | None = None,
    gpu: str = "",
    evals: int = 0,
    gpu_seconds: float = 0.0,
    status: str = "optimized",
) -> dict[str, Any]:
    """One report row from the best full-stage record of a shape (None: no correct kernel). `params`: the
    family's parameters of the kernel (a template family's render of them rebuilds it), None for others."""
    row: dict[str, Any] = {
        "M": shape.M,
        "N": shape.N,
        "K": shape.K,
        "flops": shape.flops,
        "gpu": gpu or (record.gpu if record else ""),
        "kernel": kernel or (record.kernel_hash if record else None),
        "family": family,
        "params": params,
        "proposer": proposer,
        "status": status if record is not None and record.ok else "no_kernel",
        "evals": evals,
        "gpu_seconds": round(gpu_seconds, 3),
    }
    for mode in MODES:
        m = record.modes.get(mode) if record is not None and record.ok else None
        cand = m.candidate.median_us if m and m.candidate else None
        row[f"{mode}_us"] = cand
        row[f"{mode}_tflops"] = m.tflops if m else None
        row[f"{mode}_best_baseline"] = m.best_baseline if m else None
        row[f"{mode}_speedup_best"] = m.speedup_best if m else None
        row[f"{mode}_baselines_us"] = {b: s.median_us for b, s in m.baselines.items()} if m else {}
        row[f"{mode}_speedup"] = dict(m.speedup) if m else {}
    return row


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def _group(rows: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    key = f"{mode}_speedup_best"
    timed = [r for r in rows if r.get(key)]
    return {
        "shapes": len(rows),
        "geomean_speedup_best": geomean([r[key] for r in timed]),
        "share_won": sum(r[key] > 1.0 for r in timed) / len(rows) if rows else None,
        "min_speedup_best": min((r[key] for r in timed), default=None),
        "families": families(rows),
    }


def families(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How many shapes each kernel family holds the reported kernel of, most first (ties by name)."""
    counts: dict[str, int] = {}
    for r in rows:
        if r.get("kernel") and r.get("family"):
            counts[r["family"]] = counts.get(r["family"], 0) + 1
    return dict(sorted(counts.items(), key=lambda t: (-t[1], t[0])))


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Geomean speedups per mode (over each baseline and the best), shares won and below 1.0, the worst
    shapes, the same per FLOP decade and shape class, failures and GPU time."""
    seconds = sum(r["gpu_seconds"] or 0 for r in rows)
    out: dict[str, Any] = {
        "shapes": len(rows),
        "no_kernel": sum(r["status"] in ("no_kernel", "failed") for r in rows),
        "failed": sum(r["status"] == "failed" for r in rows),
        "gpu_seconds": round(seconds, 3),
        "gpu_hours": round(seconds / 3600, 3),
        "gpu_seconds_per_shape": round(seconds / len(rows), 3) if rows else None,
        "evals": sum(r["evals"] or 0 for r in rows),
    }
    rhos = sorted(r["model_spearman"] for r in rows if r.get("model_spearman") is not None)
    out["model_spearman_median"] = rhos[len(rhos) // 2] if rhos else None
    for mode in MODES:
        key = f"{mode}_speedup_best"
        timed = sorted((r for r in rows if r.get(key)), key=lambda r: r[key])
        worst = timed[0] if timed else None
        out[mode] = {
            "geomean_speedup_best": geomean([r[key] for r in timed]),
            # a shape with no kernel counts as below 1.0: the library wins there
            "share_below_1": (sum(r[key] < 1.0 for r in timed) + out["no_kernel"]) / len(rows)
            if rows
            else None,
            "share_won": sum(r[key] > 1.0 for r in timed) / len(rows) if rows else None,
            "worst": {"M": worst["M"], "N": worst["N"], "K": worst["K"], "speedup_best": worst[key]}
            if worst
            else None,
            "worst_shapes": [
                {
                    "M": r["M"],
                    "N": r["N"],
                    "K": r["K"],
                    "speedup_best": r[key],
                    "best_baseline": r.get(f"{mode}_best_baseline"),
                }
                for r in timed[:WORST]
            ],
            "geomean_speedup": {b: geomean([r[f"{mode}_speedup"].get(b) for r in timed]) for b in BASELINES},
            "by_decade": {
                str(d): _group([r for r in rows if flop_decade((r["M"], r["N"], r["K"])) == d], mode)
                for d in sorted({flop_decade((r["M"], r["N"], r["K"])) for r in rows})
            },
            "by_class": {
                c: _group(members, mode)
                for c in SHAPE_CLASSES
                if (members := [r for r in rows if shape_class((r["M"], r["N"], r["K"])) == c])
            },
        }
    return out


# ----- report ----------------------------------------------------------------------------------------


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "—" if x is None else format(x, spec)


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def _baseline_table(summary: dict[str, Any]) -> list[str]:
    lines = ["", "Geomean speedup over each baseline:", "", "| mode | " + " | ".join(BASELINES) + " | best of them |",
             "|---|" + "---:|" * (len(BASELINES) + 1)]  # fmt: skip
    for mode in MODES:
        s = summary[mode]
        cells = [f"{_fmt(s['geomean_speedup'].get(b))}×" for b in BASELINES]
        lines.append(f"| {mode} | " + " | ".join(cells) + f" | {_fmt(s['geomean_speedup_best'])}× |")
    return lines


def _group_tables(summary: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for key, title in (("by_decade", "FLOP decade"), ("by_class", "shape class")):
        groups = list(summary[MODES[0]].get(key, {}))
        if not groups:
            continue
        lines += ["", f"By {title} (geomean speedup vs best baseline, shapes won, lowest; the families of the "
                  "reported kernels, with their shape counts):", "",
                  f"| {title} | shapes | " + " | ".join(f"{m} geomean | {m} won | {m} lowest" for m in MODES)
                  + " | families |",
                  "|---|---:|" + "---:|---:|---:|" * len(MODES) + "---|"]  # fmt: skip
        for g in groups:
            label = f"1e{g}" if key == "by_decade" else g
            cells = []
            for m in MODES:
                s = summary[m][key][g]
                cells += [
                    f"{_fmt(s['geomean_speedup_best'])}×",
                    _pct(s["share_won"]),
                    f"{_fmt(s['min_speedup_best'])}×",
                ]
            fams = summary[MODES[0]][key][g].get("families") or {}
            cells.append(", ".join(f"{f} {n}" for f, n in fams.items()) or "—")
            lines.append(f"| {label} | {summary[MODES[0]][key][g]['shapes']} | " + " | ".join(cells) + " |")
    return lines


def _worst_table(summary: dict[str, Any]) -> list[str]:
    lines = ["", "Worst shapes (speedup vs best baseline):", "", "| mode | shapes |", "|---|---|"]
    for mode in MODES:
        worst = summary[mode].get("worst_shapes") or []
        text = ", ".join(f"{w['M']}×{w['N']}×{w['K']} {w['speedup_best']:.3f}×" for w in worst) or "—"
        lines.append(f"| {mode} | {text} |")
    return lines


def _evals_spread(rows: list[dict[str, Any]]) -> str:
    """How many evaluations the shapes had, where they differ (a sweep resumed under another budget, or shapes
    taken over from an archive): " (per shape: median M, LO-HI)", else ""."""
    counts = sorted(r["evals"] for r in rows if r.get("evals"))
    if not counts or counts[0] == counts[-1]:
        return ""
    return f" (per shape: median {counts[(len(counts) - 1) // 2]}, {counts[0]}-{counts[-1]})"


def render_markdown(
    rows: list[dict[str, Any]], summary: dict[str, Any], name: str, meta: dict[str, Any] | None = None
) -> str:
    lines = [f"# Sweep {name}", ""]
    if meta:
        plain = {k: v for k, v in meta.items() if v not in (None, "") and k not in ("merged_from", "left_out")}
        lines += [", ".join(f"{k}: {v}" for k, v in plain.items()) + ".", ""]
        if meta.get("merged_from"):
            parts = ", ".join(f"{m['report']} ({m['rows']} shapes)" for m in meta["merged_from"])
            lines += [f"Merged from {parts}: each shape's figures are from the last of these that measured it "
                      "(the first's header above).", ""]  # fmt: skip
        if meta.get("left_out"):
            shapes = ", ".join(f"{o['shape'][0]}×{o['shape'][1]}×{o['shape'][2]} ({o['report']}, {o['status']})"
                               for o in meta["left_out"])  # fmt: skip
            lines += [f"Rows left out as unconfirmed (the earlier report's row stands): {shapes}.", ""]
    gpus = sorted({r["gpu"] for r in rows if r["gpu"]})
    lines += [
        f"GPU: {', '.join(gpus) or 'unknown'}. Shapes: {summary['shapes']}, evaluations: {summary['evals']}"
        f"{_evals_spread(rows)}, GPU time: {summary['gpu_seconds']:.1f} s "
        f"({_fmt(summary['gpu_seconds_per_shape'], '.1f')} s per shape; {summary.get('gpu_hours', 0):.2f} GPU-hours).",
        "",
    ]
    lines += [
        "| mode | geomean speedup vs best baseline | shapes won | share below 1.0 | worst shape |",
        "|---|---|---|---|---|",
    ]
    for mode in MODES:
        s = summary[mode]
        w = s["worst"]
        worst = f"{w['M']}×{w['N']}×{w['K']} ({w['speedup_best']:.3f}×)" if w else "—"
        share = "—" if s["share_below_1"] is None else f"{100 * s['share_below_1']:.0f}%"
        won = "—" if s.get("share_won") is None else f"{100 * s['share_won']:.0f}%"
        lines.append(f"| {mode} | {_fmt(s['geomean_speedup_best'])}× | {won} | {share} | {worst} |")
    lines += _baseline_table(summary) + _group_tables(summary) + _worst_table(summary)
    with_kernel = [r for r in rows if r.get("kernel")]
    confirmed = sum(1 for r in with_kernel if r.get("measured") == "confirmed")
    remeasured = sum(1 for r in with_kernel if r.get("status") == "confirmed")
    lines += [
        "",
        f"How the figures were measured: {confirmed} of {len(with_kernel)} shapes confirmed (each figure the "
        "median of fresh evaluations of the search's best kernels after the search, repetitions interleaved, "
        "each interleaved with the baselines); the rest are the best of the search's own measurements.",
    ]
    if remeasured:
        lines[-1] += (f" {remeasured} shapes were re-measured afterwards (`confirm_report`: one fresh evaluation "
                      "of the reported kernel), and their figures are that re-measurement.")  # fmt: skip
    if summary["no_kernel"]:
        lines += ["", f"{summary['no_kernel']} shape(s) ended without a correct full-stage kernel."]
    failed = [r for r in rows if r.get("error")]
    if failed:
        lines += ["", "Failures (searches that raised; the archive's kernel, if any, is reported):"]
        lines += [f"- {r['M']}×{r['N']}×{r['K']}: {r['error'].splitlines()[-1][:200]}" for r in failed]
    if summary.get("model_spearman_median") is not None:
        lines += [
            "",
            f"Analytic model vs measured quick times (Spearman, median over shapes): "
            f"{summary['model_spearman_median']:.2f}.",
        ]
    lines += [
        "",
        "| M | N | K | kernel | family | offline µs | best baseline | speedup | server µs | speedup | GPU s |",
        "|---:|---:|---:|---|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in sorted(rows, key=lambda r: (r["flops"], r["M"], r["N"], r["K"])):
        lines.append(
            f"| {r['M']} | {r['N']} | {r['K']} | {r['kernel'] or '—'} | {r['family'] or '—'} | "
            f"{_fmt(r['offline_us'], '.2f')} | {r['offline_best_baseline'] or '—'} | {_fmt(r['offline_speedup_best'])} | "
            f"{_fmt(r['server_us'], '.2f')} | {_fmt(r['server_speedup_best'])} | {r['gpu_seconds']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> Path:
    """Left: speedup over the best baseline per configuration, sorted, one line per mode (shapes without a
    kernel take the first places, off the line); right: the same against FLOPs (log x). A line at 1.0."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8), dpi=120, gridspec_kw={"width_ratios": [3, 2]})
    for mode, marker in zip(MODES, ("o", "s"), strict=False):
        ys = sorted(r[f"{mode}_speedup_best"] for r in rows if r.get(f"{mode}_speedup_best"))
        missing = len(rows) - len(ys)  # shapes without a kernel: left of the line, counted in the legend
        if ys:
            label = f"{mode} (geomean {_fmt(geomean(ys))}×" + (
                f"; {missing} without a kernel)" if missing else ")"
            )
            left.plot(range(missing + 1, len(rows) + 1), ys, linewidth=1.4, label=label)
        pts = [(r["flops"], r[f"{mode}_speedup_best"]) for r in rows if r.get(f"{mode}_speedup_best")]
        if pts:
            xs, ys2 = zip(*pts, strict=True)
            right.scatter(xs, ys2, s=10 if len(pts) > 200 else 18, marker=marker, alpha=0.6, label=mode)
    for ax in (left, right):
        ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
        ax.set_ylabel("speedup vs best baseline")
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    left.set_xlabel(f"configuration (sorted by speedup; {len(rows)} shapes)")
    right.set_xscale("log")
    right.set_xlabel("FLOPs (2·M·N·K)")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_report(
    rows: list[dict[str, Any]],
    out_dir: Path | str,
    name: str,
    *,
    plot_png: bool = True,
    meta: dict[str, Any] | None = None,
) -> dict[str, Path]:
    """Write `<name>.json` (rows + summary + `meta`: the GPU, driver, date, workers...), `<name>.md` and
    (with `plot_png`) `<name>.png` under out_dir; return the paths written. Each file is written whole to a
    temporary name, then renamed."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(rows)
    paths = {"json": out / f"{name}.json", "md": out / f"{name}.md"}
    write_text_atomic(
        paths["json"],
        json.dumps(
            {"name": name, **({"meta": meta} if meta else {}), "summary": summary, "rows": rows}, indent=1
        )
        + "\n",
    )
    write_text_atomic(paths["md"], render_markdown(rows, summary, name, meta))
    if plot_png:
        paths["png"] = out / f"{name}.png"
        title = f"hgemm sweep {name}"
        if meta:
            title += f" — {meta.get('gpu', '')}, driver {meta.get('driver', '?')}, {meta.get('date', '')}"
        plot(rows, paths["png"], title)
    return paths


def rerender(path: Path | str, plot_png: bool = False) -> dict[str, Path]:
    """Write a report again from its JSON (rows and meta as they were; the summary and markdown by this
    version of the report), beside it; the plot too with `plot_png`."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        rows, name = data["rows"], data["name"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path} is not a sweep report's JSON ({type(e).__name__}: {e})") from None
    return write_report(rows, path.parent, name, plot_png=plot_png, meta=data.get("meta"))


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys

    ap = argparse.ArgumentParser(prog="python -m hgemm.agent.sweep_report",
                                 description="Write sweep reports again from their JSON (summary and markdown).")
    ap.add_argument("reports", nargs="+", help="a sweep report's .json")
    ap.add_argument("--plot", action="store_true", help="draw the plot again too")
    args = ap.parse_args(argv)
    for report in args.reports:
        try:
            written = rerender(report, plot_png=args.plot)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print("wrote " + ", ".join(str(p) for p in written.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
