"""`hgemm serve` (the read-only web view) and `hgemm report --out DIR` (the static overview)."""

from __future__ import annotations

import socket
from pathlib import Path

import typer

from hgemm.core.errors import BadInput


def _archive_path(db: Path | None) -> Path:
    """The archive file, migrated to this hgemm's schema (the view itself only reads)."""
    from hgemm.archive.store import Archive

    if db is not None and not Path(db).is_file():
        raise BadInput(f"no archive at {db}")
    with Archive(db) as a:
        return a.path


def _check_port(host: str, port: int) -> None:
    if not 0 < port < 65536:
        raise BadInput(f"--port must be between 1 and 65535, got {port}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise BadInput(f"cannot resolve --host {host!r}: {e.strerror}") from e
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(addr)
        except OSError as e:
            raise BadInput(f"cannot listen on {host}:{port}: {e.strerror}") from e


def serve(
    port: int = typer.Option(8000, "--port", help="TCP port."),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to listen on (default: this machine only)."
    ),
    db: Path = typer.Option(None, "--db", help="Archive file (default: the state root's)."),
) -> None:
    """Browse the archive in a web browser: overview plots, leaderboard, shapes, kernels, lineage, runs."""
    import uvicorn
    from hgemm.archive.web.app import create_app

    path = _archive_path(db)
    _check_port(host, port)
    shown = f"[{host}]" if ":" in host else host
    typer.echo(f"serving {path} read-only at http://{shown}:{port}/ (Ctrl-C stops)", err=True)
    if host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(f"note: {host} is reachable from other machines; the view has no login", err=True)
    uvicorn.run(create_app(path), host=host, port=port, log_level="warning")


def report(
    out: Path = typer.Option(..., "--out", help="Folder to write index.html, plots/ and best.csv into."),
    db: Path = typer.Option(None, "--db", help="Archive file (default: the state root's)."),
) -> None:
    """Write the overview as a static page (HTML, SVG and PNG plots, CSV) for sharing."""
    from hgemm.archive.web.report import write_report

    path = _archive_path(db)
    if out.exists() and not out.is_dir():
        raise BadInput(f"--out {out} exists and is not a folder")
    try:
        written = write_report(path, out)
    except PermissionError as e:
        raise BadInput(f"cannot write into {out}: {e.strerror}") from e
    typer.echo(f"wrote {len(written)} files; open {written[0]}", err=True)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.command("report")(report)
