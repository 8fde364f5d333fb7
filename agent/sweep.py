"""Bulk sweeps: optimise every shape of a grid with the template proposer, then report (`hgemm sweep`).

`run_sweep` runs `agent.loop.optimize` once per shape and returns one row per shape; `write_report` writes
`<name>.json`, `<name>.md` and `<name>.png`.

- Rows come only from full-stage, correct records (the archive's ranked rows or the loop's final best); a
  shape with none has null times, status "no_kernel", and counts against the sweep in the summary.
- With `resume`, a shape that already has a ranked kernel on this GPU is not searched again ("resumed");
  without it, the archive's kernel is kept ("kept") when the new search found nothing scoring higher on the
  objective, unless the sweep sanitizes.
- A row's `gpu_seconds` is the sum of its shape's records' `eval_seconds`.
- One shape's failure ends only its own search; its row records the `error`.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import typer
from hgemm.agent.stores import ArchiveStore, IndexStore
from hgemm.agent.template import REFRESH_WITHIN

from hgemm.core.paths import write_text_atomic
from hgemm.core.record import BASELINES, MODES, EvalRecord
from hgemm.core.shape import Shape

DEFAULT_GRID = Path(str(resources.files("hgemm.bench").joinpath("grid100.txt")))  # package data of hgemm.bench
ARCHIVED_CANDIDATES = 20  # offline-ranked kernels a resumed shape considers for the "both" objective
DEFAULT_OUT = Path("bench") / "results"


# ----- rows ------------------------------------------------------------------------------------------


def row_from_record(
    M: int,
    N: int,
    K: int,
    record: EvalRecord | None,
    *,
    kernel: str | None = None,
    family: str | None = None,
    proposer: str | None = None,
    gpu: str = "",
    evals: int = 0,
    gpu_seconds: float = 0.0,
    status: str = "optimized",
) -> dict[str, Any]:
    """One report row from the best full-stage record of a shape (None: no correct kernel)."""
    row: dict[str, Any] = {
        "M": M,
        "N": N,
        "K": K,
        "flops": 2 * M * N * K,
        "gpu": gpu or (record.gpu if record else ""),
        "kernel": kernel or (record.kernel_hash if record else None),
        "family": family,
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


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Geomean speedup over the best baseline per mode, the worst shape, the share below 1.0, GPU time."""
    out: dict[str, Any] = {
        "shapes": len(rows),
        "no_kernel": sum(r["status"] == "no_kernel" for r in rows),
        "gpu_seconds": round(sum(r["gpu_seconds"] or 0 for r in rows), 3),
        "gpu_seconds_per_shape": round(sum(r["gpu_seconds"] or 0 for r in rows) / len(rows), 3)
        if rows
        else None,
        "evals": sum(r["evals"] or 0 for r in rows),
    }
    rhos = sorted(r["model_spearman"] for r in rows if r.get("model_spearman") is not None)
    out["model_spearman_median"] = rhos[len(rhos) // 2] if rhos else None
    for mode in MODES:
        key = f"{mode}_speedup_best"
        timed = [r for r in rows if r.get(key)]
        worst = min(timed, key=lambda r: r[key]) if timed else None
        out[mode] = {
            "geomean_speedup_best": geomean([r[key] for r in timed]),
            # a shape with no kernel counts as below 1.0: the library wins there
            "share_below_1": (sum(r[key] < 1.0 for r in timed) + out["no_kernel"]) / len(rows)
            if rows
            else None,
            "worst": {"M": worst["M"], "N": worst["N"], "K": worst["K"], "speedup_best": worst[key]}
            if worst
            else None,
            "geomean_speedup": {b: geomean([r[f"{mode}_speedup"].get(b) for r in timed]) for b in BASELINES},
        }
    return out


# ----- report ----------------------------------------------------------------------------------------


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "—" if x is None else format(x, spec)


def render_markdown(rows: list[dict[str, Any]], summary: dict[str, Any], name: str) -> str:
    lines = [f"# Sweep {name}", ""]
    gpus = sorted({r["gpu"] for r in rows if r["gpu"]})
    lines += [
        f"GPU: {', '.join(gpus) or 'unknown'}. Shapes: {summary['shapes']}, evaluations: {summary['evals']}, "
        f"GPU time: {summary['gpu_seconds']:.1f} s ({_fmt(summary['gpu_seconds_per_shape'], '.1f')} s per shape).",
        "",
    ]
    lines += [
        "| mode | geomean speedup vs best baseline | share below 1.0 | worst shape |",
        "|---|---|---|---|",
    ]
    for mode in MODES:
        s = summary[mode]
        w = s["worst"]
        worst = f"{w['M']}×{w['N']}×{w['K']} ({w['speedup_best']:.3f}×)" if w else "—"
        share = "—" if s["share_below_1"] is None else f"{100 * s['share_below_1']:.0f}%"
        lines.append(f"| {mode} | {_fmt(s['geomean_speedup_best'])}× | {share} | {worst} |")
    with_kernel = [r for r in rows if r.get("kernel")]
    confirmed = sum(1 for r in with_kernel if r.get("measured") == "confirmed")
    lines += ["", f"How the figures were measured: {confirmed} of {len(with_kernel)} shapes confirmed (each figure the "
              "median of fresh evaluations of the search's best kernels after the search, repetitions interleaved, "
              "each interleaved with the baselines); the rest are the best of the search's own measurements."]
    if summary["no_kernel"]:
        lines += ["", f"{summary['no_kernel']} shape(s) ended without a correct full-stage kernel."]
    failed = [r for r in rows if r.get("error")]
    if failed:
        lines += ["", "Searches that raised (the archive's kernel, if any, is reported):"]
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
    """Speedup over the best baseline against FLOPs (log x), one series per mode, line at 1.0."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    for mode, marker in zip(MODES, ("o", "s"), strict=False):
        pts = [(r["flops"], r[f"{mode}_speedup_best"]) for r in rows if r.get(f"{mode}_speedup_best")]
        if pts:
            xs, ys = zip(*pts, strict=True)
            ax.scatter(xs, ys, s=18, marker=marker, alpha=0.75, label=mode)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set_xscale("log")
    ax.set_xlabel("FLOPs (2·M·N·K)")
    ax.set_ylabel("speedup vs best baseline")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def write_report(
    rows: list[dict[str, Any]], out_dir: Path | str, name: str, *, plot_png: bool = True
) -> dict[str, Path]:
    """Write `<name>.json` (rows + summary), `<name>.md` and (with `plot_png`) `<name>.png` under out_dir;
    return the paths written. Each file is written whole to a temporary name, then renamed."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(rows)
    paths = {"json": out / f"{name}.json", "md": out / f"{name}.md"}
    write_text_atomic(paths["json"], json.dumps({"name": name, "summary": summary, "rows": rows}, indent=1) + "\n")
    write_text_atomic(paths["md"], render_markdown(rows, summary, name))
    if plot_png:
        paths["png"] = out / f"{name}.png"
        plot(rows, paths["png"], f"hgemm sweep {name}")
    return paths


# ----- running ---------------------------------------------------------------------------------------


def archived_row(
    archive: ArchiveStore, M: int, N: int, K: int, gpu: str, objective: str = "both"
) -> dict[str, Any] | None:
    """A row from the archive's best ranked kernel for the shape on this GPU by `objective`, or None."""
    from hgemm.agent.loop import objective_time

    if objective == "both":
        # The best of the top offline rows by the geometric mean of the kernel's own times in both modes:
        # for one shape that ranks as the geometric mean of speedups over fixed baselines would, and a
        # disturbed sample (the host falling behind the GPU, say) can make a time longer, never shorter,
        # while a record whose baselines were disturbed would otherwise win on its inflated speedups.
        scored = []
        for row in archive.leaderboard(gpu=gpu, mode="offline", top=ARCHIVED_CANDIDATES, shape=(M, N, K)):
            rec = archive.eval_record(row["record_id"])
            if rec is None or not (rec.speedup_best("offline") and rec.speedup_best("server")):
                continue
            t = objective_time(rec.median_us("offline"), rec.median_us("server"), objective)
            if t:
                scored.append((-t, -row["id"], row, rec))
        if not scored:
            return None
        _, _, best, record = max(scored, key=lambda s: s[:2])
    else:
        best = archive.best(M, N, K, gpu=gpu, mode=objective)
        if best is None:
            return None
        record = archive.eval_record(best["record_id"])
    spent = archive.execute(
        "SELECT sum(stage NOT IN ('confirm-rep', 'confirmed')) AS n, "
        "coalesce(sum(CASE WHEN stage != 'confirmed' THEN json_extract(record, '$.eval_seconds') END), 0) AS s "
        "FROM records WHERE M = ? AND N = ? AND K = ? AND gpu = ?",
        (M, N, K, gpu),
    )[0]
    return row_from_record(
        M,
        N,
        K,
        record,
        kernel=best["kernel"],
        family=best.get("family"),
        proposer=best.get("proposer"),
        gpu=gpu,
        evals=spent["n"],
        gpu_seconds=spent["s"],
        status="resumed",
    ) | {"measured": "confirmed" if record is not None and record.stage == "confirmed" else "unconfirmed"}


def run_sweep(
    shapes: list[Shape],
    *,
    evaluator: Any,
    archive: ArchiveStore | None,
    retriever: IndexStore | None = None,
    budget_evals: int | None = 64,
    budget_minutes: float | None = None,
    resume: bool = True,
    seed: int = 0,
    refresh: int = 2,
    refresh_within: float = REFRESH_WITHIN,
    progress: bool = True,
    proposer_factory: Any = None,
    sanitize: bool = False,
    on_row: Callable[[list[dict[str, Any]]], None] | None = None,
    objective: str = "both",
    quick_server: bool = False,
    confirm: int = 3,
    confirm_reps: int = 3,
) -> list[dict[str, Any]]:
    """Optimise each shape (budgets are per shape); rows in the order of `shapes`. `on_row(rows)` runs
    after every shape with the rows so far (the command rewrites its report there, so a sweep cut off
    by a time limit still leaves one). Without a terminal, progress is one plain line per shape."""
    from hgemm.agent.loop import Budget, optimize
    from hgemm.agent.template import TemplateProposer

    make = proposer_factory or (lambda: [TemplateProposer(seed=seed, refresh=refresh, refresh_within=refresh_within)])
    gpu = evaluator.gpu_info().name
    rows: list[dict[str, Any]] = []
    bar = _progress(progress)
    with bar:
        task = bar.add_task("sweep", total=len(shapes))
        for M, N, K in shapes:
            bar.update(task, description=f"{M}×{N}×{K}")
            prior = archived_row(archive, M, N, K, gpu, objective) if archive is not None else None
            row = prior if resume else None
            if row is None:
                started = time.monotonic()
                try:
                    result = optimize(
                        Shape(M, N, K),
                        proposers=make(),
                        evaluator=evaluator,
                        archive=archive,
                        retriever=retriever,
                        budget=Budget(evals=budget_evals, minutes=budget_minutes),
                        progress=False,
                        command="sweep",
                        sanitize=sanitize,
                        objective=objective,
                        quick_server=quick_server,
                        confirm=confirm,
                        confirm_reps=confirm_reps,
                    )
                except Exception as e:
                    # One shape's failure (say, a worker that could not prepare it) ends its own search only.
                    row = search_failed(M, N, K, gpu, prior, f"{type(e).__name__}: {e}")
                else:
                    row = searched_row(M, N, K, gpu, result, prior, objective, sanitize, evaluator.gpu_info())
                row["wall_seconds"] = round(time.monotonic() - started, 2)
            rows.append(row)
            bar.advance(task)
            if progress and not bar.console.is_terminal:
                print(f"[{len(rows)}/{len(shapes)}] {_line(row)}", flush=True)
            if on_row is not None:
                on_row(rows)
    return rows


def searched_row(M: int, N: int, K: int, gpu: str, result: Any, prior: dict[str, Any] | None, objective: str,
                 sanitize: bool, gpu_info: Any) -> dict[str, Any]:  # fmt: skip
    """The report row of a finished search: its best kernel, or the archive's (status "kept") when that one
    scores higher on the objective, unless the sweep sanitizes (it reports only kernels it sanitized)."""
    best = result.best
    spent = sum(r.eval_seconds or 0.0 for _, r in result.results) + getattr(result, "confirm_seconds", 0.0)
    row = row_from_record(M, N, K, result.best_record, kernel=best.hash if best else None,
                          family=best.family if best else None, proposer=best.proposer if best else None, gpu=gpu,
                          evals=result.evals, gpu_seconds=spent)  # fmt: skip
    if prior is not None and not sanitize and row_score(prior, objective) > row_score(row, objective):
        # What this search spent is still what the row reports.
        row = {**prior, "status": "kept", "evals": row["evals"], "gpu_seconds": row["gpu_seconds"]}
    row["model_spearman"] = model_rank_correlation(result.results, M, N, K, gpu_info)
    row["stop_reason"] = result.stop_reason
    if row.get("status") != "kept":
        conf = getattr(result, "confirmation", None)
        row["measured"] = ("confirmed" if conf else "unconfirmed") if row.get("kernel") else None
        row["confirm_scores"] = conf["winner_scores"] if conf else None
        row["confirm_evals"] = getattr(result, "confirm_evals", 0)
    return row


def search_failed(
    M: int, N: int, K: int, gpu: str, prior: dict[str, Any] | None, error: str
) -> dict[str, Any]:
    """The report row of a search that raised: the archive's kernel where there is one (status "kept"), else
    no kernel; `error` says what went wrong. What the search archived before it raised stays archived."""
    row = {**prior, "status": "kept"} if prior is not None else row_from_record(M, N, K, None, gpu=gpu)
    return {**row, "evals": 0, "gpu_seconds": 0.0, "error": error[:500]}


def row_score(row: dict[str, Any], objective: str) -> float:
    """Higher is better: minus the kernel's own time in the objective's mode (the geometric mean of both
    modes' times for "both"; see `archived_row` for why not its speedups); -inf without a kernel."""
    from hgemm.agent.loop import objective_time

    t = objective_time(row.get("offline_us"), row.get("server_us"), objective)
    return -math.inf if not t or not row.get("kernel") else -t


def _line(row: dict[str, Any]) -> str:
    speed = " ".join(f"{mode} {_fmt(row.get(f'{mode}_speedup_best'))}x" for mode in MODES)
    return f"{row['M']}x{row['N']}x{row['K']} {row['status']} {row.get('family') or '-'} {speed}"


def model_rank_correlation(
    results: list[tuple[Any, EvalRecord]], M: int, N: int, K: int, gpu: Any
) -> float | None:
    """Spearman correlation between the analytic model and measured quick-stage offline times of the
    template candidates of one shape (None with fewer than 4): how far the pre-ranking can be trusted."""
    from hgemm.agent.model import predict_us, spearman
    from hgemm.evaluator.kernels import FAMILIES

    pairs = []
    for cand, rec in results:
        t = rec.median_us("offline") if rec.ok and rec.stage == "quick" else None
        if t is not None and cand.family in FAMILIES and cand.params is not None:
            pairs.append((predict_us(FAMILIES[cand.family], cand.params, M, N, K, gpu), t))
    if len(pairs) < 4:
        return None

    rho = spearman([p for p, _ in pairs], [t for _, t in pairs])
    return round(rho, 3) if rho is not None else None


def _progress(enabled: bool) -> Any:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        disable=not enabled,
    )


def sweep_command(
    grid: Path = typer.Option(DEFAULT_GRID, "--grid", help="shapes file: one 'M N K' per line, # comments"),
    budget_evals: int = typer.Option(64, "--budget-evals", help="evaluations per shape"),
    budget_minutes: float = typer.Option(None, "--budget-minutes", help="wall-clock minutes per shape"),
    resume: bool = typer.Option(
        True,
        "--resume/--no-resume",
        help="skip shapes already optimized on this GPU (--no-resume searches them again and keeps the archived "
        "kernel where the new search found nothing better)",
    ),
    out: Path = typer.Option(DEFAULT_OUT, "--out", help="directory for <name>.json, .md and .png"),
    name: str = typer.Option(None, "--name", help="report name (default: the grid file's stem)"),
    seed: int = typer.Option(0, "--seed", help="template proposer seed"),
    refresh: int = typer.Option(
        2, "--refresh", min=0, help="re-measure this many of a shape's fastest configurations whose template changed since "
        "they were archived (0: never)"
    ),
    refresh_within: float = typer.Option(
        REFRESH_WITHIN, "--refresh-within", min=1.0, help="re-measure only those measured within this factor of the "
        "shape's best time (after a large template change, e.g. 1.3)"
    ),
    sanitize: bool = typer.Option(
        False, "--sanitize", help="run compute-sanitizer memcheck and racecheck on each shape's winner (the next best if it fails)"
    ),
    export_archive: Path = typer.Option(
        None, "--export-archive", help="also write the whole archive as jsonl (for `hgemm archive import` elsewhere)"
    ),
    objective: str = typer.Option(
        "both", "--objective", help="pick each shape's kernel by: both (geomean of offline and server speedups), offline, server"
    ),
    quick_server: bool = typer.Option(
        False, "--quick-server", help="time server mode at the quick stage too; promote finalists by the objective"
    ),
    confirm: int = typer.Option(
        3, help="after each search, measure this many best kernels again and report the winner by those figures "
        "(0: unconfirmed; not counted in --budget-evals)"),
    confirm_reps: int = typer.Option(3, help="fresh evaluations of each kernel --confirm measures"),
    finetune_every: int = typer.Option(
        None, "--finetune-every", help="fine-tune llm.local_model (hgemm.toml) in a separate process after every N new archive bests"
    ),
) -> None:
    """Optimise every shape of a grid with the template proposer and write a report."""
    from hgemm.agent.commands import open_evaluator
    from hgemm.archive import Archive
    from hgemm.index import Retriever

    from hgemm.core.errors import BadInput

    if not grid.exists():
        raise BadInput(f"grid file {grid} does not exist")
    shapes = read_grid(grid)  # validated, line by line
    if not shapes:
        raise BadInput(f"grid file {grid} holds no shapes")
    report_name = name or grid.stem
    from hgemm.agent.loop import validate_objective

    validate_objective(objective)
    from hgemm.agent.config import load_config
    from hgemm.agent.finetune.periodic import check_after, trigger_for

    trigger = trigger_for(finetune_every, load_config().llm.local_model)
    with open_evaluator() as evaluator, Archive() as archive:
        retriever = Retriever(archive, gpu_sm_count=evaluator.gpu_info().sm_count)
        rows = run_sweep(
            shapes,
            evaluator=evaluator,
            archive=archive,
            retriever=retriever,
            budget_evals=budget_evals,
            budget_minutes=budget_minutes,
            resume=resume,
            seed=seed,
            refresh=refresh,
            refresh_within=refresh_within,
            sanitize=sanitize,
            on_row=lambda so_far: (write_report(so_far, out, report_name, plot_png=False), check_after(trigger, archive)),
            objective=objective,
            quick_server=quick_server,
            confirm=confirm,
            confirm_reps=confirm_reps,
        )
        if export_archive is not None:
            lines = archive.export(export_archive, "jsonl")
            typer.echo(f"exported {lines} archive lines to {export_archive}")
    paths = write_report(rows, out, report_name)
    summary = summarize(rows)
    for mode in MODES:
        typer.echo(f"{mode}: geomean speedup vs best baseline {_fmt(summary[mode]['geomean_speedup_best'])}x")
    typer.echo("wrote " + ", ".join(str(p) for p in paths.values()))


def read_grid(path: Path | str) -> list[Shape]:
    """Shapes from a grid file: one `M N K` per line; `#` comments and blank lines ignored. A line that is not
    a valid shape is refused with its line number."""
    from hgemm.core.errors import BadInput

    shapes = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        parts = text.split()
        if len(parts) != 3 or not all(p.isdigit() for p in parts):
            raise BadInput(f"{path}:{n}: expected 'M N K', got {line.strip()!r}")
        try:
            shapes.append(Shape(int(parts[0]), int(parts[1]), int(parts[2])))
        except BadInput as e:
            raise BadInput(f"{path}:{n}: {e}") from None
    return shapes


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep_command)
