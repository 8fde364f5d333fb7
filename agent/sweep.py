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

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from hgemm.agent.loop import CONFIRM_FINALISTS, CONFIRM_REPETITIONS
from hgemm.agent.stores import ArchiveStore, IndexStore
from hgemm.agent.sweep_grid import GRID100, read_grid  # noqa: F401  (read_grid: the sweep's public API)
from hgemm.agent.sweep_report import (  # noqa: F401  (the report, re-exported: the sweep's public API)
    _fmt,
    geomean,
    plot,
    render_markdown,
    row_from_record,
    summarize,
    write_report,
)
from hgemm.agent.template import REFRESH_WITHIN

from hgemm.core.record import MODES, EvalRecord
from hgemm.core.shape import Shape

DEFAULT_GRID = GRID100
ARCHIVED_CANDIDATES = 20  # offline-ranked kernels a resumed shape considers for the "both" objective
DEFAULT_OUT = Path("bench") / "results"


# ----- running ---------------------------------------------------------------------------------------


def archived_row(
    archive: ArchiveStore, shape: Shape, gpu: str, objective: str = "both", measured_after: str | None = None
) -> dict[str, Any] | None:
    """A row from the archive's best ranked kernel for the shape on this GPU by `objective`, or None. Where the
    shape has confirmed records (the median of a confirmation's fresh repetitions), only those count: a search's
    own samples include the luckiest one, which would otherwise win the row. With `measured_after` (a time as
    records keep it, `created`), only records measured after it count: figures from before a change to the
    evaluator are left out (for a single-mode objective, the best kernel's record must be that recent, else there
    is no row)."""
    from hgemm.agent.loop import objective_time

    mode = "offline" if objective == "both" else objective
    confirmed = measured_since(archive, shape, gpu, mode, measured_after, ARCHIVED_CANDIDATES, confirmed=True)
    if objective == "both":
        # The best of the top offline rows by the geometric mean of the kernel's own times in both modes:
        # for one shape that ranks as the geometric mean of speedups over fixed baselines would, and a
        # disturbed sample (the host falling behind the GPU, say) can make a time longer, never shorter,
        # while a record whose baselines were disturbed would otherwise win on its inflated speedups.
        scored = []
        if confirmed:
            rows = confirmed
        elif measured_after is None:
            rows = archive.leaderboard(gpu=gpu, mode="offline", top=ARCHIVED_CANDIDATES, shape=shape)
        else:
            rows = measured_since(archive, shape, gpu, "offline", measured_after, ARCHIVED_CANDIDATES)
        for row in rows:
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
        if confirmed:
            best = confirmed[0]
        elif measured_after is None:
            best = archive.best(shape, gpu=gpu, mode=objective)
        else:
            best = next(iter(measured_since(archive, shape, gpu, objective, measured_after, 1)), None)
        if best is None:
            return None
        record = archive.eval_record(best["record_id"])
    spent = archive.execute(
        "SELECT sum(stage NOT IN ('confirm-rep', 'confirmed')) AS n, "
        "coalesce(sum(CASE WHEN stage != 'confirmed' THEN json_extract(record, '$.eval_seconds') END), 0) AS s "
        "FROM records WHERE M = ? AND N = ? AND K = ? AND gpu = ?",
        (*shape, gpu),
    )[0]
    return row_from_record(
        shape,
        record,
        kernel=best["kernel"],
        family=best.get("family"),
        params=best.get("params"),
        proposer=best.get("proposer"),
        gpu=gpu,
        evals=spent["n"],
        gpu_seconds=spent["s"],
        status="resumed",
    ) | {"measured": "confirmed" if record is not None and record.stage == "confirmed" else "unconfirmed"}


def measured_since(archive: ArchiveStore, shape: Shape, gpu: str, mode: str, after: str | None, limit: int,
                   *, confirmed: bool = False) -> list[dict[str, Any]]:  # fmt: skip
    """The shape's ranked `mode` rows on this GPU whose records were measured after `after` (any time where it is
    None), only those of confirmed records where `confirmed`, best speedup first, with their kernels' family,
    parameters and proposer, JSON columns decoded (what `leaderboard` gives, every record of a kernel)."""
    from hgemm.archive.rows import to_dict

    stage = " AND r.stage = 'confirmed'" if confirmed else ""
    return [to_dict(r) for r in archive.execute(
        "SELECT e.*, k.family, k.params, k.proposer FROM evaluations e JOIN records r ON r.id = e.record_id "
        "JOIN kernels k ON k.hash = e.kernel WHERE e.mode = ? AND e.ranked = 1 AND e.M = ? AND e.N = ? "
        f"AND e.K = ? AND e.gpu IS ? AND json_extract(r.record, '$.created') > ?{stage} "
        "ORDER BY e.speedup_best DESC, e.id DESC LIMIT ?",
        (mode, *shape, gpu, after or "", limit),
    )]


@dataclass
class SearchSettings:
    """How each shape is searched (budgets are per shape)."""

    budget_evals: int | None = 64
    budget_minutes: float | None = None
    seed: int = 0
    refresh: int = 2
    refresh_within: float = REFRESH_WITHIN
    sanitize: bool = False
    objective: str = "both"
    quick_server: bool = False
    confirm: int = CONFIRM_FINALISTS
    confirm_reps: int = CONFIRM_REPETITIONS
    proposer_factory: Any = None
    measured_after: str | None = None  # archived figures from before this time neither resume a shape nor rank


def unfinished(archive: ArchiveStore, shape: Shape, gpu: str) -> bool:
    """Whether the shape's latest sweep search on this GPU did not end ("running" after a killed driver,
    "interrupted", "error"): its archived kernel is then only what that search had found so far."""
    rows = archive.execute(
        "SELECT status FROM runs WHERE command = 'sweep' AND json_extract(config, '$.M') = ? "
        "AND json_extract(config, '$.N') = ? AND json_extract(config, '$.K') = ? "
        "AND json_extract(config, '$.gpu') = ? ORDER BY id DESC LIMIT 1",
        (*shape, gpu),
    )
    return bool(rows) and rows[0]["status"] != "done"


def resumable_row(
    archive: ArchiveStore | None, shape: Shape, gpu: str, objective: str, measured_after: str | None = None
) -> dict[str, Any] | None:
    """The archive's row for a shape a resumed sweep need not search again, or None (also where its figures
    are from before `measured_after`)."""
    if archive is None:
        return None
    row = archived_row(archive, shape, gpu, objective, measured_after)
    return None if row is None or unfinished(archive, shape, gpu) else row


def search_shape(shape: Shape, *, evaluator: Any, archive: ArchiveStore | None, retriever: IndexStore | None,
                 settings: SearchSettings, gpu: str, prior: dict[str, Any] | None) -> dict[str, Any]:  # fmt: skip
    """One shape's search and its report row; raises what the search raised (KeyboardInterrupt included)."""
    from hgemm.agent.loop import Budget, optimize
    from hgemm.agent.template import TemplateProposer

    st = settings
    make = st.proposer_factory or (
        lambda: [TemplateProposer(seed=st.seed, refresh=st.refresh, refresh_within=st.refresh_within,
                                  measured_after=st.measured_after)]
    )
    started = time.monotonic()
    result = optimize(
        shape,
        proposers=make(),
        evaluator=evaluator,
        archive=archive,
        retriever=retriever,
        budget=Budget(evals=st.budget_evals, minutes=st.budget_minutes),
        progress=False,
        command="sweep",
        sanitize=st.sanitize,
        objective=st.objective,
        quick_server=st.quick_server,
        confirm=st.confirm,
        confirm_reps=st.confirm_reps,
    )
    row = searched_row(shape, gpu, result, prior, st.objective, st.sanitize, evaluator.gpu_info())
    row["wall_seconds"] = round(time.monotonic() - started, 2)
    return row


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
    confirm: int = CONFIRM_FINALISTS,
    confirm_reps: int = CONFIRM_REPETITIONS,
    measured_after: str | None = None,
) -> list[dict[str, Any]]:
    """Optimise each shape in turn on one evaluator (budgets are per shape); rows in the order of `shapes`.
    `on_row(rows)` runs after every shape with the rows so far (the command rewrites its report there, so a
    sweep cut off by a time limit still leaves one). Without a terminal, progress is one plain line per shape."""
    settings = SearchSettings(
        budget_evals=budget_evals, budget_minutes=budget_minutes, seed=seed, refresh=refresh,
        refresh_within=refresh_within, sanitize=sanitize, objective=objective, quick_server=quick_server,
        confirm=confirm, confirm_reps=confirm_reps, proposer_factory=proposer_factory, measured_after=measured_after,
    )  # fmt: skip
    gpu = evaluator.gpu_info().name
    rows: list[dict[str, Any]] = []
    bar = _progress(progress)
    with bar:
        task = bar.add_task("sweep", total=len(shapes))
        for shape in shapes:
            bar.update(task, description=f"{shape.M}×{shape.N}×{shape.K}")
            prior = archived_row(archive, shape, gpu, objective, measured_after) if archive is not None else None
            # resumable_row without a second look-up: the prior, unless the shape's last search did not end
            row = prior if resume and prior is not None and not unfinished(archive, shape, gpu) else None
            if row is None:
                started = time.monotonic()
                try:
                    row = search_shape(shape, evaluator=evaluator, archive=archive, retriever=retriever,
                                       settings=settings, gpu=gpu, prior=prior)  # fmt: skip
                except Exception as e:
                    # One shape's failure (say, a worker that could not prepare it) ends its own search only.
                    row = search_failed(shape, gpu, prior, f"{type(e).__name__}: {e}")
                    row["wall_seconds"] = round(time.monotonic() - started, 2)
            rows.append(row)
            bar.advance(task)
            if progress and not bar.console.is_terminal:
                print(f"[{len(rows)}/{len(shapes)}] {_line(row)}", flush=True)
            if on_row is not None:
                on_row(rows)
    return rows


def searched_row(shape: Shape, gpu: str, result: Any, prior: dict[str, Any] | None, objective: str,
                 sanitize: bool, gpu_info: Any) -> dict[str, Any]:  # fmt: skip
    """The report row of a finished search: its best kernel, or the archive's (status "kept") when that one
    scores higher on the objective, unless the sweep sanitizes (it reports only kernels it sanitized)."""
    best = result.best
    spent = sum(r.eval_seconds or 0.0 for _, r in result.results) + getattr(result, "confirm_seconds", 0.0)
    row = row_from_record(shape, result.best_record, kernel=best.hash if best else None,
                          family=best.family if best else None, params=best.params if best else None,
                          proposer=best.proposer if best else None, gpu=gpu,
                          evals=result.evals, gpu_seconds=spent)  # fmt: skip
    if prior is not None and not sanitize and row_score(prior, objective) > row_score(row, objective):
        # What this search spent is still what the row reports.
        row = {**prior, "status": "kept", "evals": row["evals"], "gpu_seconds": row["gpu_seconds"]}
    row["model_spearman"] = model_rank_correlation(result.results, shape, gpu_info)
    row["stop_reason"] = result.stop_reason
    if row.get("status") != "kept":
        conf = getattr(result, "confirmation", None)
        row["measured"] = ("confirmed" if conf else "unconfirmed") if row.get("kernel") else None
        row["confirm_scores"] = conf["winner_scores"] if conf else None
        row["confirm_evals"] = getattr(result, "confirm_evals", 0)
    return row


def search_failed(
    shape: Shape, gpu: str, prior: dict[str, Any] | None, error: str, *, final: bool = False
) -> dict[str, Any]:
    """The report row of a search that raised: the archive's kernel where there is one (status "kept"), else
    no kernel (status "failed" when the sweep gave up on the shape: `final`); `error` says what went wrong.
    What the search archived before it raised stays archived."""
    row = {**prior, "status": "kept"} if prior is not None else row_from_record(shape, None, gpu=gpu)
    if prior is None and final:
        row["status"] = "failed"
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


def model_rank_correlation(results: list[tuple[Any, EvalRecord]], shape: Shape, gpu: Any) -> float | None:
    """Spearman correlation between the analytic model and measured quick-stage offline times of the
    template candidates of one shape (None with fewer than 4): how far the pre-ranking can be trusted."""
    from hgemm.agent.model import predict_us, spearman
    from hgemm.evaluator.kernels import FAMILIES

    pairs = []
    for cand, rec in results:
        t = rec.median_us("offline") if rec.ok and rec.stage == "quick" else None
        if t is not None and cand.family in FAMILIES and cand.params is not None:
            pairs.append((predict_us(FAMILIES[cand.family], cand.params, shape, gpu), t))
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


def register(app: typer.Typer) -> None:
    from hgemm.agent.sweep_cli import sweep_command

    app.command("sweep")(sweep_command)
