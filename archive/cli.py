"""`hgemm archive ...`: list, show, best, lineage, diff, history, attempts, stats, export, import.

Commands only parse arguments, call `archive.Archive` and print rich tables; ids accept hash prefixes.
`--db FILE` (on the `archive` group) opens another archive file than the default one. Every read command
takes `--json` (the same facts as JSON on stdout, nothing else there); `--source` prints only the kernel's
source on stdout, so `hgemm archive best M N K --source > k.cu` writes a file that compiles.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

import typer
from hgemm.archive.errors import ArchiveError

from hgemm.core.shape import Shape

archive_app = typer.Typer(help="The ranked archive of every attempt.", no_args_is_help=True)


def _open(ctx: typer.Context):
    from hgemm.archive.store import Archive

    return Archive((ctx.obj or {}).get("db"))


def _shape(text: str) -> Shape:
    parts = text.replace("x", ",").split(",")
    try:
        M, N, K = (int(p) for p in parts)
    except ValueError as e:
        raise ArchiveError(f"--shape wants M,N,K (three integers), got {text!r}") from e
    return Shape(M, N, K)


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _params(p: dict | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(p.items())) if p else "-"


def _console(err: bool = False):
    from rich.console import Console

    return Console(width=160, stderr=err)


def _json(value: Any) -> None:
    """`value` as JSON on stdout: the machine-readable twin of a command's table."""
    typer.echo(json.dumps(value, indent=2, default=str))


JSON_HELP = "Print JSON on stdout instead of a table."


def _ranked_table(title: str, found: list[dict]) -> Any:
    from rich.table import Table

    t = Table(title=title)
    for col in (
        "shape",
        "gpu",
        "#",
        "kernel",
        "family",
        "params",
        "proposer",
        "median µs",
        "speedup",
        "vs",
        "floor",
    ):
        t.add_column(col)
    for r in found:
        t.add_row(
            f"{r['M']}x{r['N']}x{r['K']}", r["gpu"] or "-", str(r.get("rank", 1)), r["kernel"], r["family"] or "-",
            _params(r.get("params")), r["proposer"], _fmt(r["median_us"], 2), _fmt(r["speedup_best"]) + "x",
            r["best_baseline"] or "-", _fmt(r["floor_fraction"], 2),
        )  # fmt: skip
    return t


@archive_app.callback()
def _group(
    ctx: typer.Context,
    db: Path = typer.Option(None, "--db", help="Archive file (default: the state root's)."),
):
    ctx.obj = {"db": db}


@archive_app.command("list")
def list_cmd(
    ctx: typer.Context,
    shape: str = typer.Option(None, "--shape", help="Only this shape, as M,N,K."),
    gpu: str = typer.Option(None, "--gpu", help="Only this GPU name."),
    top: int = typer.Option(1, "--top", min=1, help="Kernels per shape."),
    mode: str = typer.Option("offline", "--mode"),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Leaderboard: the fastest correct kernels per shape and GPU (full-stage evaluations only)."""
    with _open(ctx) as a:
        found = a.leaderboard(gpu=gpu, mode=mode, top=top, shape=_shape(shape) if shape else None)
    if as_json:
        return _json(found)
    if not found:
        typer.echo("no ranked evaluations yet")
        return
    _console().print(_ranked_table(f"leaderboard ({mode})", found))


@archive_app.command("show")
def show_cmd(
    ctx: typer.Context,
    kernel_id: str = typer.Argument(..., metavar="ID"),
    source: bool = typer.Option(False, "--source", help="Print only the source (nothing else on stdout)."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """A kernel: its facts, parents, children and every evaluation."""
    from rich.table import Table

    with _open(ctx) as a:
        k = a.require_kernel(kernel_id)
        evals = a.execute(
            "SELECT r.id, r.M, r.N, r.K, r.gpu, r.stage, r.correct, r.failure_kind, r.failure_message, "
            "e.mode, e.median_us, e.speedup_best, e.best_baseline, e.floor_fraction "
            "FROM records r LEFT JOIN evaluations e ON e.record_id = r.id WHERE r.kernel = ? ORDER BY r.id, e.mode",
            (k["hash"],),
        )
    if source:
        typer.echo(k["source"], nl=not k["source"].endswith("\n"))
        return
    if as_json:
        return _json({**k, "evaluations": [dict(e) for e in evals]})
    c = _console()
    c.print(
        f"[bold]{k['hash']}[/]  family={k['family'] or '-'}  proposer={k['proposer']}  created={k['created']}"
    )
    c.print(f"params: {_params(k['params'])}")
    c.print(f"parents: {', '.join(k['parents']) or '-'}   children: {', '.join(k['children']) or '-'}")
    if k["note"]:
        c.print(f"note: {k['note']}")
    t = Table(title=f"{len(evals)} evaluation rows")
    for col in ("record", "shape", "gpu", "stage", "mode", "result", "median µs", "speedup", "vs", "floor"):
        t.add_column(col)
    for e in evals:
        result = "correct" if e["correct"] else (e["failure_kind"] or "unknown")
        t.add_row(
            str(e["id"]), f"{e['M']}x{e['N']}x{e['K']}", e["gpu"] or "-", e["stage"], e["mode"] or "-", result,
            _fmt(e["median_us"], 2), _fmt(e["speedup_best"]), e["best_baseline"] or "-", _fmt(e["floor_fraction"], 2),
        )  # fmt: skip
    c.print(t)


@archive_app.command("best")
def best_cmd(
    ctx: typer.Context,
    M: int = typer.Argument(...),
    N: int = typer.Argument(...),
    K: int = typer.Argument(...),
    gpu: str = typer.Option(None, "--gpu"),
    mode: str = typer.Option("offline", "--mode"),
    source: bool = typer.Option(
        False, "--source", help="Print only the winning source (the table goes to stderr)."
    ),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """The fastest correct kernel for one shape."""
    shape = Shape(M, N, K)
    with _open(ctx) as a:
        b = a.best(shape, gpu=gpu, mode=mode)
    if b is None:
        if as_json:
            _json(None)
        typer.echo(f"no ranked evaluation of {shape}" + (f" on {gpu}" if gpu else ""), err=as_json or source)
        raise typer.Exit(1)
    if as_json:
        return _json(b)
    _console(err=source).print(_ranked_table(f"best {shape} ({mode})", [b]))
    if source:
        typer.echo(b["source"], nl=not b["source"].endswith("\n"))


@archive_app.command("lineage")
def lineage_cmd(
    ctx: typer.Context,
    kernel_id: str = typer.Argument(..., metavar="ID"),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Ancestors and descendants of a kernel."""
    from rich.table import Table

    with _open(ctx) as a:
        lin = a.lineage(kernel_id)
    if as_json:
        return _json(lin)
    t = Table(title=f"lineage of {lin['kernel']['hash']}")
    for col in ("relation", "depth", "kernel", "family", "proposer", "best offline speedup"):
        t.add_column(col)
    for r in reversed(lin["ancestors"]):
        t.add_row("ancestor", str(r["depth"]), r["hash"], r["family"] or "-", r["proposer"] or "(not in archive)",
                  _fmt(r["best_offline"]))  # fmt: skip
    me = lin["kernel"]
    t.add_row("[bold]this[/]", "0", me["hash"], me["family"] or "-", me["proposer"], _fmt(me["best_offline"]))
    for r in lin["descendants"]:
        t.add_row("descendant", str(r["depth"]), r["hash"], r["family"] or "-", r["proposer"] or "-",
                  _fmt(r["best_offline"]))  # fmt: skip
    _console().print(t)


@archive_app.command("diff")
def diff_cmd(
    ctx: typer.Context,
    first: str = typer.Argument(..., metavar="ID1"),
    second: str = typer.Argument(..., metavar="ID2"),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Unified diff of two kernels' sources."""
    with _open(ctx) as a:
        k1, k2 = a.require_kernel(first), a.require_kernel(second)
    lines = difflib.unified_diff(
        k1["source"].splitlines(keepends=True), k2["source"].splitlines(keepends=True), k1["hash"], k2["hash"]
    )
    text = "".join(lines)
    if as_json:
        return _json({"old": k1["hash"], "new": k2["hash"], "diff": text})
    typer.echo(text, nl=False)


@archive_app.command("history")
def history_cmd(
    ctx: typer.Context,
    M: int = typer.Argument(...),
    N: int = typer.Argument(...),
    K: int = typer.Argument(...),
    gpu: str = typer.Option(None, "--gpu"),
    mode: str = typer.Option("offline", "--mode"),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """How the best speedup on a shape improved over time."""
    from rich.table import Table

    shape = Shape(M, N, K)
    with _open(ctx) as a:
        found = a.history(shape, gpu=gpu, mode=mode)
    if as_json:
        return _json(found)
    t = Table(title=f"improvements on {shape} ({mode})")
    for col in ("when", "kernel", "family", "proposer", "gpu", "speedup", "previous"):
        t.add_column(col)
    for r in found:
        t.add_row(r["created"], r["kernel"], r["family"] or "-", r["proposer"], r["gpu"] or "-",
                  _fmt(r["speedup_best"]), _fmt(r["previous_best"]))  # fmt: skip
    _console().print(t)


@archive_app.command("attempts")
def attempts_cmd(
    ctx: typer.Context,
    M: int = typer.Argument(...),
    N: int = typer.Argument(...),
    K: int = typer.Argument(...),
    gpu: str = typer.Option(None, "--gpu"),
    limit: int = typer.Option(50, "--limit", min=1),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Every attempt on a shape, newest first, failures included."""
    from rich.table import Table

    shape = Shape(M, N, K)
    with _open(ctx) as a:
        found = a.attempts(shape, gpu=gpu, limit=limit)
        fails = a.failures(shape, gpu=gpu)
    if as_json:
        return _json({"attempts": found, "failures": fails})
    t = Table(title=f"attempts on {shape}")
    for col in (
        "record",
        "when",
        "kernel",
        "family",
        "proposer",
        "stage",
        "result",
        "offline speedup",
        "message",
    ):
        t.add_column(col)
    for r in found:
        result = "correct" if r["correct"] else (r["failure_kind"] or "unknown")
        msg = (r["failure_message"] or "").splitlines()[0][:60] if r["failure_message"] else ""
        t.add_row(str(r["id"]), r["created"], r["kernel"], r["family"] or "-", r["proposer"], r["stage"], result,
                  _fmt(r["offline_speedup"]), msg)  # fmt: skip
    c = _console()
    c.print(t)
    if fails:
        c.print("failures: " + ", ".join(f"{k}={n}" for k, n in fails.items()))


@archive_app.command("stats")
def stats_cmd(
    ctx: typer.Context,
    check: bool = typer.Option(False, "--check", help="Also run SQLite's integrity check."),
    as_json: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Counts: kernels, records, shapes, GPUs, failures, runs, LLM calls and cost."""
    from rich.table import Table

    with _open(ctx) as a:
        s = a.stats()
        if check:
            s["integrity"] = a.check()
    if as_json:
        return _json(s)
    t = Table(title="archive")
    t.add_column("what")
    t.add_column("value")
    for key, value in s.items():
        t.add_row(key, json.dumps(value) if isinstance(value, (dict, list)) else _fmt(value, 4))
    _console().print(t)


@archive_app.command("export")
def export_cmd(
    ctx: typer.Context,
    fmt: str = typer.Option("jsonl", "--format", help="jsonl (lossless, importable) or csv."),
    out: Path = typer.Option(None, "--out", help="File to write (default: stdout)."),
) -> None:
    """Write the archive out as jsonl or csv."""
    with _open(ctx) as a:
        n = a.export(out, fmt)
    if out is not None:
        typer.echo(f"wrote {n} {'lines' if fmt == 'jsonl' else 'rows'} to {out}", err=True)


@archive_app.command("import")
def import_cmd(ctx: typer.Context, file: Path = typer.Argument(..., metavar="FILE")) -> None:
    """Merge another archive (.db file or jsonl export) into this one; safe to repeat."""
    with _open(ctx) as a:
        counts = a.import_file(file)
    typer.echo("imported " + ", ".join(f"{k}={v}" for k, v in counts.items()))


def register(app: typer.Typer) -> None:
    app.add_typer(archive_app, name="archive")
