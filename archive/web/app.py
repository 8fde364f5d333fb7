"""The read-only web view of an archive: a Starlette application with server-rendered pages.

Pages: `/` overview (heatmaps, sorted speedups, speedup against FLOPs, share of shapes won, per GPU),
`/leaderboard` (sortable, filterable), `/shape/MxNxK`, `/kernel/HASH` (+ `/kernel/HASH/source.cu`),
`/diff/OLD/NEW`, `/runs`.

Invariants:
- Only GET and HEAD are routed; every request opens its own read-only connection (`data.open_readonly`).
- Everything from the archive is escaped: Jinja autoescapes, Pygments escapes the source it highlights, the
  plots escape their labels. Pages carry a Content-Security-Policy that allows no script at all.
"""

from __future__ import annotations

import math
from contextlib import closing
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from hgemm.archive.errors import ArchiveError
from hgemm.archive.web import data, svg
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response
from starlette.routing import Route

from hgemm.core.errors import BadInput
from hgemm.core.record import MODES
from hgemm.core.shape import Shape

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
LEADERBOARD_COLUMNS = [
    ("shape", "shape"),
    ("gpu", "GPU"),
    (None, "kernel"),
    ("family", "family"),
    (None, "proposer"),
    ("speedup", "speedup"),
    (None, "vs"),
    ("median", "median µs"),
    ("floor", "floor fraction"),
    ("rows", "ranked rows"),
]


def fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def speed_class(s: float | None) -> str:
    if s is None:
        return ""
    return (
        "sp-r2"
        if s < 0.8
        else "sp-r1"
        if s < 0.98
        else "sp-0"
        if s <= 1.02
        else "sp-g1"
        if s < 1.2
        else "sp-g2"
    )


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.1f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.2f} h"


@lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("hgemm.archive.web", "templates"), autoescape=select_autoescape(default=True)
    )
    env.globals.update(fmt=fmt, speed_class=speed_class, duration=duration, modes=MODES)
    return env


@lru_cache(maxsize=1)
def stylesheet() -> str:
    from pygments.formatters import HtmlFormatter

    base = resources.files("hgemm.archive.web").joinpath("static/style.css").read_text()
    return base + HtmlFormatter(style="default").get_style_defs(".source")


def shape_url(r: dict, **extra: Any) -> str:
    q = {k: v for k, v in extra.items() if v}
    return f"/shape/{r['M']}x{r['N']}x{r['K']}" + (f"?{urlencode(q)}" if q else "")


def geomean(values: list[float]) -> str:
    vals = [v for v in values if v and v > 0]
    return f"{math.exp(sum(math.log(v) for v in vals) / len(vals)):.3f}x" if vals else "-"


def overview_context(conn, links: bool = True) -> dict[str, Any]:
    """The overview's numbers and plots (shared with the static report, which has no links)."""
    ov = data.overview(conn)
    for g in ov["gpus"]:
        gpu_q = g["gpu"] if len(ov["gpus"]) > 1 else ""
        for mode, m in g["modes"].items():
            link = (lambda r, mode=mode, gpu_q=gpu_q: shape_url(r, mode=mode, gpu=gpu_q)) if links else None
            name = g["gpu"] or "unknown GPU"
            m["heatmaps"] = [
                (K, Markup(svg.heatmap([r for r in m["rows"] if r["K"] == K], f"{mode}, K = {K}", link)))
                for K in sorted({r["K"] for r in m["rows"]})
            ]
            m["bars"] = Markup(svg.sorted_bars(m["rows"], f"{name}, {mode}: speedup per configuration", link))
            m["geomean"] = geomean([r["speedup"] for r in m["rows"]])
        g["scatter"] = Markup(
            svg.scatter(
                {mode: m["rows"] for mode, m in g["modes"].items()},
                f"{g['gpu'] or '?'}: speedup against FLOPs",
            )
        )
    return {"gpus": ov["gpus"], "counts": ov["stats"]}


class View:
    """The pages of one archive file."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.env = environment()

    def _render(self, name: str, conn, code: int = 200, **ctx: Any) -> HTMLResponse:
        ctx.setdefault("counts", data.counts(conn) if conn is not None else {})
        html = self.env.get_template(name).render(archive_name=self.path.name, **ctx)
        return HTMLResponse(html, status_code=code, headers=SECURITY_HEADERS)

    def _error(self, status: int, message: str) -> HTMLResponse:
        counts = {"kernels": "-", "records": "-", "evaluations": "-"}
        return self._render("error.html", None, status, status=status, message=message, counts=counts)

    def _page(self, request: Request, build) -> Response:
        try:
            with closing(data.open_readonly(self.path)) as conn:
                return build(conn)
        except ArchiveError as e:
            return self._error(400, str(e))
        except ValueError as e:
            return self._error(400, f"bad request: {e}")

    # ----- pages ---------------------------------------------------------------------------------------

    def overview(self, request: Request) -> Response:
        return self._page(request, lambda conn: self._render("overview.html", conn, **overview_context(conn)))

    def leaderboard(self, request: Request) -> Response:
        q = request.query_params

        def num(key: str, cast=int):
            v = q.get(key, "").strip()
            if not v:
                return None
            try:
                return cast(v)
            except ValueError as e:
                raise ArchiveError(f"{key} must be a number, got {v!r}") from e

        try:
            f = {
                "mode": q.get("mode") or "offline",
                "M": num("M"),
                "N": num("N"),
                "K": num("K"),
                "gpu": q.get("gpu") or None,
                "family": q.get("family") or None,
                "min_speedup": num("min_speedup", float),
                "max_speedup": num("max_speedup", float),
                "sort": q.get("sort") if q.get("sort") in data.SORTS else "shape",
                "desc": q.get("desc") == "1",
            }
        except ArchiveError as e:
            return self._error(400, str(e))

        def sort_url(key: str) -> str:
            keep = {k: v for k, v in f.items() if v not in (None, "", False) and k not in ("sort", "desc")}
            keep.update(sort=key, desc=int(not f["desc"]) if f["sort"] == key else int(key == "speedup"))
            return "/leaderboard?" + urlencode(keep)

        def build(conn):
            rows = data.leaderboard(conn, **f)
            gpu_q = f["gpu"] or ""
            return self._render(
                "leaderboard.html", conn, rows=rows, f=f, columns=LEADERBOARD_COLUMNS, sort_url=sort_url,
                shape_url=lambda r: shape_url(r, mode=f["mode"], gpu=gpu_q or r["gpu"]),
                gpu_names=data.gpus(conn), family_names=data.families(conn),
            )  # fmt: skip

        return self._page(request, build)

    def shape(self, request: Request) -> Response:
        try:
            shape = Shape(*(int(x) for x in request.path_params["shape"].split("x")))
        except (ValueError, TypeError):
            return self._error(404, "a shape is written MxNxK, e.g. /shape/1024x1024x1024")
        except BadInput as e:
            return self._error(404, str(e))
        mode, gpu = request.query_params.get("mode"), request.query_params.get("gpu")

        def build(conn):
            s = data.shape_page(conn, shape, gpu, mode)
            if not s["n_records"]:
                return self._error(404, f"no attempt on {shape} in this archive")
            names = sorted({k for r in s["ncu"] for k in (r["ncu"] or {})})

            def self_url(**change):
                q = {"mode": s["mode"], "gpu": s["gpu"] or ""}
                q.update(change)
                return shape_url(s, **q)

            title = f"{shape} {s['mode']}: ranked speedup over time"
            return self._render(
                "shape.html", conn, s=s, ncu_names=names, self_url=self_url,
                progress_svg=Markup(svg.progress(s["progress"], title)),
            )  # fmt: skip

        return self._page(request, build)

    def kernel(self, request: Request) -> Response:
        def build(conn):
            h = data.resolve(conn, request.path_params["hash"])
            page = data.kernel_page(conn, h) if h else None
            if page is None:
                return self._error(404, f"no kernel {request.path_params['hash'][:64]} in this archive")
            return self._render(
                "kernel.html", conn, k=page["kernel"], res=page["resources"], records=page["records"],
                n_records=page["n_records"], anc=page["ancestors"], desc=page["descendants"],
                lineage_cut=page["lineage_cut"], llm_calls=page["llm_calls"],
                source_html=highlight(page["kernel"]["source"]),
            )  # fmt: skip

        return self._page(request, build)

    def source(self, request: Request) -> Response:
        def build(conn):
            h = data.resolve(conn, request.path_params["hash"])
            k = data.kernel_row(conn, h) if h else None
            if k is None:
                return self._error(404, "no such kernel in this archive")
            headers = {**SECURITY_HEADERS, "Content-Disposition": f'attachment; filename="{h[:16]}.cu"'}
            return PlainTextResponse(k["source"], headers=headers)

        return self._page(request, build)

    def diff(self, request: Request) -> Response:
        def build(conn):
            old, new = (data.resolve(conn, request.path_params[x]) for x in ("old", "new"))
            ko, kn = (data.kernel_row(conn, x) if x else None for x in (old, new))
            if ko is None or kn is None:
                return self._error(404, "both kernels of a diff must be in this archive")
            lines = data.diff_lines(ko["source"], kn["source"], old[:12], new[:12])
            return self._render(
                "diff.html", conn, old=old, new=new, lines=lines,
                added=sum(k == "add" for k, _ in lines), removed=sum(k == "del" for k, _ in lines),
            )  # fmt: skip

        return self._page(request, build)

    def runs(self, request: Request) -> Response:
        return self._page(request, lambda conn: self._render("runs.html", conn, runs=data.runs_page(conn)))

    def style(self, request: Request) -> Response:
        return Response(stylesheet(), media_type="text/css", headers={"Cache-Control": "max-age=300"})


def highlight(source: str) -> Markup:
    """CUDA source as escaped, highlighted HTML with line numbers."""
    from pygments import highlight as _highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import CudaLexer

    return Markup(_highlight(source, CudaLexer(), HtmlFormatter(linenos="table", cssclass="source")))


def create_app(path: Path) -> Starlette:
    """The ASGI application serving the archive at `path` (read-only)."""
    v = View(path)
    routes = [
        Route("/", v.overview),
        Route("/leaderboard", v.leaderboard),
        Route("/shape/{shape}", v.shape),
        Route("/kernel/{hash}", v.kernel),
        Route("/kernel/{hash}/source.cu", v.source),
        Route("/diff/{old}/{new}", v.diff),
        Route("/runs", v.runs),
        Route("/static/style.css", v.style),
    ]
    return Starlette(routes=routes)
