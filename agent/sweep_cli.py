"""`hgemm sweep`: argument parsing and wiring; the search is `agent.sweep`, the distribution `agent.sweep_dask`.

- Without `--gpus` or `--scheduler` the shapes are searched one after another on this process's evaluator;
  with them, on a Dask cluster, one worker per GPU (see `agent.sweep_dask`).
- Settings come from `hgemm.toml` like `hgemm optimize`'s ([budget] evals and minutes, [search]); options
  override them; with no file the sweep's defaults hold (64 evaluations per shape, no time limit).
- The report is rewritten after every shape; a resumed run starts from the archive (`--import-archive`
  merges an export first) and `--export-archive` writes it at the end, on Ctrl-C and on SIGTERM, so the
  next machine continues with the same command.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import typer
from hgemm.agent.sweep import (
    DEFAULT_OUT,
    SearchSettings,
    archived_row,
    resumable_row,
    run_sweep,
    search_failed,
)
from hgemm.agent.sweep_grid import parse_shard, resolve_grid, schedule, shard
from hgemm.agent.sweep_report import _fmt, summarize, write_report
from hgemm.agent.template import REFRESH_WITHIN

from hgemm.core.errors import BadInput
from hgemm.core.record import MODES
from hgemm.core.shape import Shape


def record_time(text: str | None) -> str | None:
    """`--measured-after` as records keep their times (ISO 8601, UTC, to the second); a time without a zone is
    UTC. Bad input is a BadInput."""
    if text is None:
        return None
    from datetime import UTC, datetime

    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(f"--measured-after {text!r}: not a date or time (write 2026-11-26 or 2026-11-26T09:30)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    now = datetime.now(UTC)
    if when > now:  # no record of this run would count, and a rerun would resume nothing
        raise BadInput(f"--measured-after {text!r} is after now ({now.isoformat(timespec='seconds')}): no record "
                       "measured by this run would count; give a time before the run starts")  # fmt: skip
    return when.astimezone(UTC).isoformat(timespec="seconds")


def settings_from(config_path: Path | None, **options: Any) -> SearchSettings:
    """The search settings: the options given, else `hgemm.toml`'s values where a file is found, else the
    sweep's defaults."""
    from hgemm.agent.config import load_config

    cfg = load_config(config_path)
    st = SearchSettings()  # the sweep's defaults
    if cfg.path is not None:
        st.budget_evals, st.budget_minutes = cfg.budget.evals, cfg.budget.minutes
        for key in ("seed", "refresh", "refresh_within", "quick_server", "confirm", "confirm_reps"):
            setattr(st, key, getattr(cfg.search, key))
    for key, value in options.items():
        if value is not None:
            setattr(st, key, value)
    return st


def export_atomic(archive: Any, path: Path) -> int:
    """Export the archive to `path` through a temporary name, so a kill mid-export leaves the old file."""
    tmp = path.with_name(".partial-" + path.name)  # the same suffix: .xz and .gz exports stay compressed
    lines = archive.export(tmp, "jsonl")
    os.replace(tmp, path)
    return lines


_CLOCK = [time.monotonic()]  # when this sweep command started: its milestones say how long after


def _say(message: str, err: bool = False) -> None:
    """A milestone of the run, with the seconds since the command started (where start-up time goes)."""
    typer.echo(f"{message} [{time.monotonic() - _CLOCK[0]:.1f} s]", err=err)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def sweep_command(
    grid: str = typer.Option(
        "grid100",
        "--grid",
        help="full (the 1,000 configurations M, N, K in 64..16384), grid100, or a shapes "
        "file: one 'M N K' per line, # comments",
    ),  # fmt: skip
    budget_evals: int = typer.Option(
        None, "--budget-evals", min=1, help="evaluations per shape (default 64, or hgemm.toml's)"
    ),
    budget_minutes: float = typer.Option(None, "--budget-minutes", help="wall-clock minutes per shape"),
    resume: bool = typer.Option(
        True,
        "--resume/--no-resume",
        help="skip shapes already optimized on this GPU, unless their last sweep search did not finish (--no-resume "
        "searches them again and keeps the archived kernel where the new search found nothing better)",
    ),
    out: Path = typer.Option(DEFAULT_OUT, "--out", help="directory for <name>.json, .md and .png"),
    name: str = typer.Option(None, "--name", help="report name (default: the grid's name)"),
    seed: int = typer.Option(None, "--seed", help="template proposer seed"),
    refresh: int = typer.Option(
        None,
        "--refresh",
        min=0,
        help="re-measure this many of a shape's fastest configurations whose template "
        "changed since they were archived (0: never; default 2)",
    ),  # fmt: skip
    refresh_within: float = typer.Option(
        None,
        "--refresh-within",
        min=1.0,
        help="re-measure only those measured within this factor of the "
        f"shape's best time (default {REFRESH_WITHIN})",
    ),  # fmt: skip
    sanitize: bool = typer.Option(
        False,
        "--sanitize",
        help="run compute-sanitizer memcheck and racecheck on each shape's winner (the next best if it fails)",
    ),
    export_archive: Path = typer.Option(
        None,
        "--export-archive",
        help="also write the whole archive as jsonl (.jsonl.xz: compressed) at the end, on Ctrl-C and on SIGTERM "
        "(for --import-archive or `hgemm archive import` elsewhere)",
    ),  # fmt: skip
    import_archive: list[Path] = typer.Option(
        [],
        "--import-archive",
        help="first merge this archive export (or .db) where the file exists; idempotent, repeatable",
    ),
    objective: str = typer.Option(
        "both",
        "--objective",
        help="pick each shape's kernel by: both (geomean of offline and server speedups), offline, server",
    ),
    quick_server: bool = typer.Option(
        None,
        "--quick-server/--no-quick-server",
        help="time server mode at the quick stage too; promote finalists by the objective",
    ),
    confirm: int = typer.Option(
        None,
        help="after each search, measure this many best kernels again and report the winner by those figures "
        "(0: unconfirmed; not counted in --budget-evals; default 3)",
    ),  # fmt: skip
    confirm_reps: int = typer.Option(
        None, help="fresh evaluations of each kernel --confirm measures (default 3)"
    ),
    gpus: str = typer.Option(None, "--gpus", help="all or device numbers (0,1,...): one Dask worker per GPU"),
    scheduler: str = typer.Option(
        None, "--scheduler", help="address of a running Dask scheduler (workers on other hosts)"
    ),
    limit: int = typer.Option(
        None, "--limit", min=1, help="search at most this many shapes in this run (resumed ones are free)"
    ),
    shard_spec: str = typer.Option(
        None, "--shard", help="I/N: only every N-th shape of the grid, from the I-th (0-based)"
    ),
    eval_timeout: float = typer.Option(
        900.0,
        "--eval-timeout",
        min=1.0,
        help="with --gpus/--scheduler: seconds before a silent worker counts as hung",
    ),
    measured_after: str = typer.Option(
        None,
        "--measured-after",
        help="UTC time (2026-11-26T09:30): archived figures from before it (say, before a fix to the evaluator) "
        "neither count as a shape's result nor resume it; such shapes are searched again",
    ),  # fmt: skip
    config: Path = typer.Option(
        None, "--config", help="settings file (default: ./hgemm.toml, then $HGEMM_HOME/hgemm.toml)"
    ),
    finetune_every: int = typer.Option(
        None,
        "--finetune-every",
        help="fine-tune llm.local_model (hgemm.toml) in a separate process after every N new archive bests",
    ),
) -> None:
    """Optimise every shape of a grid with the template proposer and write a report."""
    from hgemm.agent.loop import validate_objective
    from hgemm.archive import Archive

    shapes, stem = resolve_grid(grid)
    shapes = shard(shapes, parse_shard(shard_spec))
    if not shapes:
        raise BadInput(f"--shard {shard_spec} leaves no shapes of the grid")
    if gpus is not None and scheduler is not None:
        raise BadInput("give --gpus (this host) or --scheduler (a running cluster), not both")
    validate_objective(objective)
    settings = settings_from(
        config, budget_evals=budget_evals, budget_minutes=budget_minutes, seed=seed, refresh=refresh,
        refresh_within=refresh_within, sanitize=sanitize, objective=objective, quick_server=quick_server,
        confirm=confirm, confirm_reps=confirm_reps, measured_after=record_time(measured_after),
    )  # fmt: skip
    from hgemm.agent.config import load_config
    from hgemm.agent.finetune.periodic import check_after, trigger_for

    trigger = trigger_for(finetune_every, load_config(config).llm.local_model)
    report_name = name or stem
    latest: list[list[dict[str, Any]]] = [[]]
    meta: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "grid": grid + (f" shard {shard_spec}" if shard_spec else ""),
        "budget_evals": settings.budget_evals,
        "budget_minutes": settings.budget_minutes,
        "objective": settings.objective,
        "measured_after": settings.measured_after,
    }  # the run functions add the GPU, its driver and the workers

    def on_rows(rows: list[dict[str, Any]]) -> None:
        latest[0] = list(rows)
        write_report(rows, out, report_name, plot_png=False, meta=meta)
        check_after(trigger)  # the archive's new bests may start a fine-tune cycle

    interrupted = False
    started = _CLOCK[0] = time.monotonic()
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)  # a time limit's SIGTERM stops like Ctrl-C
    try:
        with Archive() as archive:
            for source in import_archive:
                if source.exists():
                    counts = archive.import_file(source)
                    _say(f"imported {source}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
                else:
                    typer.echo(f"no {source} yet: nothing to import from it")
            try:
                if gpus is None and scheduler is None:
                    _run_here(
                        shapes, archive, settings, resume=resume, limit=limit, on_rows=on_rows, meta=meta
                    )
                else:
                    _run_dask(shapes, archive, settings, resume=resume, limit=limit, on_rows=on_rows, meta=meta, gpus=gpus,
                              scheduler=scheduler, eval_timeout=eval_timeout)  # fmt: skip
            except KeyboardInterrupt:
                interrupted = True
            finally:
                if export_archive is not None:
                    lines = export_atomic(archive, export_archive)
                    _say(f"exported {lines} archive lines to {export_archive}")
    finally:
        signal.signal(signal.SIGTERM, previous)
    rows = latest[0]
    if rows:
        meta["run_wall_seconds"] = round(time.monotonic() - started, 1)
        paths = write_report(rows, out, report_name, meta=meta)
        summary = summarize(rows)
        for mode in MODES:
            typer.echo(
                f"{mode}: geomean speedup vs best baseline {_fmt(summary[mode]['geomean_speedup_best'])}x"
            )
        typer.echo("wrote " + ", ".join(str(p) for p in paths.values()))
    if interrupted:
        typer.echo(f"interrupted after {len(rows)} of {len(shapes)} shapes: run the same command again to continue",
                   err=True)  # fmt: skip
        raise typer.Exit(130)


def _pick(shapes: list[Shape], done: dict[Shape, dict[str, Any]], limit: int | None) -> list[Shape]:
    """The shapes this run covers: every resumable one, and at most `limit` to search."""
    pending = [s for s in shapes if s not in done]
    keep = set(pending[:limit] if limit is not None else pending) | set(done)
    return [s for s in shapes if s in keep]


def _gpu_meta(meta: dict[str, Any], info: Any, workers: int) -> None:
    meta.update(gpu=info.name, driver=info.driver, cc=info.cc, workers=workers)


def _run_here(shapes: list[Shape], archive: Any, st: SearchSettings, *, resume: bool, limit: int | None,
              on_rows: Any, meta: dict[str, Any]) -> None:  # fmt: skip
    from hgemm.agent.commands import open_evaluator
    from hgemm.index import Retriever

    with open_evaluator() as evaluator:
        info = evaluator.gpu_info()
        _gpu_meta(meta, info, 1)
        _say(f"evaluator on {info.name}")
        if limit is not None:
            done = {
                s: r
                for s in shapes
                if resume and (r := resumable_row(archive, s, info.name, st.objective, st.measured_after))
            }
            shapes = _pick(shapes, done, limit)
        retriever = Retriever(archive, gpu_sm_count=info.sm_count)
        run_sweep(
            shapes, evaluator=evaluator, archive=archive, retriever=retriever, budget_evals=st.budget_evals,
            budget_minutes=st.budget_minutes, resume=resume, seed=st.seed, refresh=st.refresh,
            refresh_within=st.refresh_within, sanitize=st.sanitize, on_row=on_rows, objective=st.objective,
            quick_server=st.quick_server, confirm=st.confirm, confirm_reps=st.confirm_reps,
            measured_after=st.measured_after,
        )  # fmt: skip


def _run_dask(shapes: list[Shape], archive: Any, st: SearchSettings, *, resume: bool, limit: int | None, on_rows: Any,
              meta: dict[str, Any],
              gpus: str | None, scheduler: str | None, eval_timeout: float) -> None:  # fmt: skip
    import threading

    try:
        from distributed import Client
    except ImportError:
        raise BadInput("--gpus and --scheduler need Dask: pip install 'dask[distributed]'") from None
    from hgemm.agent import commands
    from hgemm.agent.sweep_dask import Locked, WorkerPool, open_cluster, parse_gpus, run_slots, worker_gpu
    from hgemm.agent.sweep_live import SweepDisplay
    from hgemm.agent.sweep_slots import SlotProcesses, end_spares, prestart, stop_event
    from hgemm.index import Retriever

    devices = parse_gpus(gpus) if gpus is not None else None
    stop = stop_event()
    # On this host the slots are known now: their search processes warm up while the cluster starts.
    spares = prestart(len(devices), stop) if devices is not None else []
    cluster = None
    slots = None
    try:
        cluster = open_cluster(devices) if devices is not None else None
        with Client(cluster if cluster is not None else scheduler, timeout="60s") as client:
            pool = WorkerPool(client, commands.open_evaluator, eval_timeout=eval_timeout, stop=stop)
            infos = {slot: pool.call(slot, worker_gpu, timeout=600) for slot in pool.slots()}
            names = sorted({info.name for info, _, _ in infos.values()})
            if len(names) != 1:
                raise BadInput(
                    f"the workers have different GPUs ({', '.join(names)}): run one sweep per GPU model"
                )
            info = next(iter(infos.values()))[0]
            gpu = info.name
            _gpu_meta(meta, info, len(infos))
            meta["workers_up_seconds"] = round(time.monotonic() - _CLOCK[0], 1)
            _say(
                f"{len(infos)} worker(s) on {gpu}: "
                + ", ".join(
                    f"{slot} (CUDA_VISIBLE_DEVICES={pin or '-'}, pid {pid})"
                    for slot, (_, pin, pid) in sorted(infos.items())
                )
            )
            shared = Locked(archive, threading.RLock())  # the slot threads commit their searches' writes
            if resume:
                _say(f"checking the archive for {len(shapes)} shapes on {gpu} ...")
            done = {
                s: r for s in shapes if resume and (r := resumable_row(archive, s, gpu, st.objective, st.measured_after))
            }
            order = schedule([s for s in _pick(shapes, done, limit) if s not in done], done)
            rows = {s: r for s, r in done.items()}
            grid_order = {s: i for i, s in enumerate(shapes)}
            if done:
                _say(
                    f"resuming: {len(done)} of {len(shapes)} shapes already in the archive; {len(order)} to search"
                )
                on_rows([rows[s] for s in sorted(rows, key=grid_order.get)])
            retriever = Retriever(archive, gpu_sm_count=info.sm_count)
            slots = SlotProcesses(pool, shared, settings=st, gpu=gpu, sm_count=info.sm_count, archive_path=archive.path,
                                  index_dir=retriever.store.dir, spares=spares if order else None)  # fmt: skip
            if order:
                slots.start(sorted(infos))  # those not started yet warm up meanwhile
            retriever.sync()  # up to date before the first search: each slot's process starts from a copy of it
            if order:
                _say(f"searching {len(order)} shapes on {len(infos)} worker(s)")

            def search(slot: str, shape: Shape) -> dict[str, Any]:
                prior = archived_row(shared, shape, gpu, st.objective, st.measured_after)
                return slots.search(slot, shape, prior)

            def failed(shape: Shape, reason: str) -> dict[str, Any]:
                prior = archived_row(shared, shape, gpu, st.objective, st.measured_after)
                return search_failed(shape, gpu, prior, reason, final=True) | {"wall_seconds": 0.0}

            def on_row(row: dict[str, Any]) -> None:
                rows[Shape(row["M"], row["N"], row["K"])] = row
                on_rows([rows[s] for s in sorted(rows, key=grid_order.get)])

            started = time.monotonic()
            with SweepDisplay(len(done) + len(order), list(done.values())) as display:
                run_slots(order, pool=pool, search=search, failed=failed, on_row=on_row, display=display,
                          pins={slot: pin for slot, (_, pin, _) in infos.items()})  # fmt: skip
            meta["search_seconds"] = round(time.monotonic() - started, 1)
            _say(f"searched {len(order)} shapes in {meta['search_seconds']:.0f} s on {len(infos)} worker(s)")
    finally:
        end_spares(spares)  # where no slot took them
        if slots is not None:
            slots.close()
        if cluster is not None:
            cluster.close()
