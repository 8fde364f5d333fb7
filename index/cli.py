"""`hgemm index ...`: query (nearest shapes' best kernels and attempts), search (text), rebuild.

Commands parse arguments, open the archive and a `Retriever`, and print rich tables; `--json` on the read
commands (query, search) prints the same facts as JSON on stdout instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from hgemm.core.shape import Shape

index_app = typer.Typer(help="Retrieval over the archive (FAISS).", no_args_is_help=True)


def _open(ctx: typer.Context, sm_count: int):
    from hgemm.archive.store import Archive
    from hgemm.index.retriever import Retriever

    a = Archive((ctx.obj or {}).get("db"))
    return a, Retriever(a, gpu_sm_count=sm_count)


def _fmt(v, digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


def _attempt_table(title: str, rows: list[dict], score_key: str):
    from rich.table import Table

    t = Table(title=title)
    for col in ("record", "shape", "gpu", "kernel", "family", "result", "offline speedup", score_key, "text"):
        t.add_column(col)
    for r in rows:
        result = "correct" if r["correct"] else (r["failure_kind"] or "unknown")
        t.add_row(str(r["id"]), f"{r['M']}x{r['N']}x{r['K']}", r["gpu"] or "-", r["kernel"], r["family"] or "-",
                  result, _fmt(r["offline_speedup"]), _fmt(r[score_key]), (r["text"] or "")[:70])  # fmt: skip
    return t


def _json(value) -> None:
    typer.echo(json.dumps(value, indent=2, default=str))


def _console():
    from rich.console import Console

    return Console(width=180)


@index_app.callback()
def _group(
    ctx: typer.Context,
    db: Path = typer.Option(None, "--db", help="Archive file (default: the state root's)."),
):
    ctx.obj = {"db": db}


@index_app.command("query")
def query_cmd(
    ctx: typer.Context,
    M: int = typer.Argument(...),
    N: int = typer.Argument(...),
    K: int = typer.Argument(...),
    gpu: str = typer.Option(None, "--gpu"),
    k: int = typer.Option(5, "--k", min=1, help="How many shapes / attempts."),
    sm_count: int = typer.Option(132, "--sm-count", help="SM count for the wave features."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON on stdout instead of tables."),
) -> None:
    """Best kernels of the nearest shapes, then the nearest attempts (failures included)."""
    from rich.table import Table

    shape = Shape(M, N, K)

    a, r = _open(ctx, sm_count)
    with a:
        shapes = r.similar_shapes(shape, gpu=gpu, k=k)
        attempts = r.history(shape, gpu=gpu, k=k)
    if as_json:
        return _json({"shapes": shapes, "attempts": attempts})
    t = Table(title=f"nearest shapes to {M}x{N}x{K}")
    for col in (
        "shape",
        "distance",
        "gpu",
        "kernel",
        "family",
        "offline speedup",
        "server speedup",
        "offline µs",
    ):
        t.add_column(col)
    for s in shapes:
        t.add_row(f"{s['M']}x{s['N']}x{s['K']}", _fmt(s["distance"]), s["gpu"] or "-", s["kernel_hash"],
                  s["family"] or "-", _fmt(s["speedup_best"].get("offline")), _fmt(s["speedup_best"].get("server")),
                  _fmt(s["median_us"].get("offline"), 2))  # fmt: skip
    c = _console()
    c.print(t if shapes else "no ranked kernels in the archive yet")
    if attempts:
        c.print(_attempt_table("nearest attempts", attempts, "distance"))


@index_app.command("search")
def search_cmd(
    ctx: typer.Context,
    text: str = typer.Argument(..., help="What to look for, in words."),
    k: int = typer.Option(10, "--k", min=1),
    as_json: bool = typer.Option(False, "--json", help="Print JSON on stdout instead of a table."),
) -> None:
    """Attempts whose description matches the text."""
    a, r = _open(ctx, 132)
    with a:
        found = r.search_text(text, k=k)
    if as_json:
        return _json(found)
    if not found:
        typer.echo("nothing matched")
        return
    _console().print(_attempt_table(f"attempts matching {text!r}", found, "score"))


@index_app.command("rebuild")
def rebuild_cmd(ctx: typer.Context, sm_count: int = typer.Option(132, "--sm-count")) -> None:
    """Rebuild the index from the archive."""
    import time

    a, r = _open(ctx, sm_count)
    t0 = time.perf_counter()
    with a:
        summary = r.rebuild()
    mode = "shape + text" if r.text_mode else "shape only"
    typer.echo(f"indexed {summary['total']} attempts ({mode}) in {time.perf_counter() - t0:.1f} s")


def register(app: typer.Typer) -> None:
    app.add_typer(index_app, name="index")
