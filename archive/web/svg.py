"""Plots as inline SVG markup: heatmaps of speedup over (M, N), sorted speedups, speedup against FLOPs,
search progress. Drawn here rather than by a plotting library so a page renders in milliseconds and the
browser scales them.

Invariants: every text that comes from the archive is escaped; colours say the same thing on every plot
(green: faster than the best baseline, red: slower, white: even); links are only added when a `link`
function is given (the static report has no shape pages).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape

FONT = 'font-family="sans-serif" font-size="11"'


def colour(speedup: float | None) -> str:
    """Diverging colour on log2(speedup), saturating at 0.5x and 2x."""
    if speedup is None or speedup <= 0:
        return "#e5e5e5"
    t = max(-1.0, min(1.0, math.log2(speedup)))
    if t >= 0:  # white -> green
        r, g, b = 255 - 200 * t, 255 - 90 * t, 255 - 200 * t
    else:  # white -> red
        r, g, b = 255 + 25 * t, 255 + 200 * t, 255 + 200 * t
    return f"#{int(r):02x}{int(g):02x}{int(b):02x}"


def _svg(width: float, height: float, body: list[str], label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(label)}" '
        f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" {FONT}>'
        f"<title>{escape(label)}</title>" + "".join(body) + "</svg>"
    )


def _text(x: float, y: float, text: str, anchor: str = "middle", extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{escape(text)}</text>'


def heatmap(rows: list[dict], title: str, link: Callable[[dict], str] | None = None) -> str:
    """One cell per (M, N) of `rows` (each with M, N, speedup), value written in the cell."""
    Ms = sorted({r["M"] for r in rows})
    Ns = sorted({r["N"] for r in rows})
    cell = {(r["M"], r["N"]): r for r in rows}
    cw, ch, left, top = 52, 24, 58, 36
    body = [
        _text(left + cw * len(Ns) / 2, 14, title, extra=' font-weight="bold"'),
        _text(left - 6, 28, "M \\ N", "end"),
    ]
    for j, n in enumerate(Ns):
        body.append(_text(left + cw * j + cw / 2, top - 4, str(n)))
    for i, m in enumerate(Ms):
        y = top + ch * i
        body.append(_text(left - 6, y + ch / 2 + 4, str(m), "end"))
        for j, n in enumerate(Ns):
            x = left + cw * j
            r = cell.get((m, n))
            s = r["speedup"] if r else None
            rect = (
                f'<rect x="{x}" y="{y}" width="{cw - 2}" height="{ch - 2}" fill="{colour(s)}">'
                f"<title>{m}x{n}: {'-' if s is None else f'{s:.3f}x'}</title></rect>"
            )
            label = _text(x + cw / 2 - 1, y + ch / 2 + 3, "" if s is None else f"{s:.2f}")
            if r and link:
                body.append(f'<a href="{escape(link(r))}">{rect}{label}</a>')
            else:
                body.append(rect + label)
    return _svg(left + cw * len(Ns) + 8, top + ch * len(Ms) + 8, body, title)


def _axis_y(lo: float, hi: float, top: float, h: float, left: float, width: float, ticks: int = 5) -> tuple:
    span = hi - lo or 1.0

    def y(v: float) -> float:
        return top + h - (v - lo) / span * h

    body = []
    for i in range(ticks + 1):
        v = lo + span * i / ticks
        body.append(f'<line x1="{left}" x2="{left + width}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#eee"/>')
        body.append(_text(left - 4, y(v) + 4, f"{v:.2f}", "end"))
    if lo < 1.0 < hi:
        body.append(
            f'<line x1="{left}" x2="{left + width}" y1="{y(1.0):.1f}" y2="{y(1.0):.1f}" '
            'stroke="#555" stroke-dasharray="4 3"/>'
        )
    return y, body


def _range(values: list[float]) -> tuple[float, float]:
    lo, hi = min([*values, 1.0]), max([*values, 1.0])
    pad = (hi - lo) * 0.08 or 0.1
    return max(0.0, lo - pad), hi + pad


def sorted_bars(rows: list[dict], title: str, link: Callable[[dict], str] | None = None) -> str:
    """Speedup of every configuration, sorted ascending, one bar each, drawn from the 1.0 line."""
    rows = sorted(rows, key=lambda r: r["speedup"])
    width, h, left, top = max(320, 8 * len(rows) + 70), 180, 48, 24
    plot_w = width - left - 10
    bw = plot_w / max(1, len(rows))
    lo, hi = _range([r["speedup"] for r in rows])
    y, body = _axis_y(lo, hi, top, h, left, plot_w)
    body.insert(0, _text(width / 2, 14, title, extra=' font-weight="bold"'))
    for i, r in enumerate(rows):
        s = r["speedup"]
        x = left + i * bw
        bar = (  # from the 1.0 line: up when faster than the best baseline, down when slower
            f'<rect x="{x:.1f}" y="{min(y(s), y(1.0)):.1f}" width="{max(1.0, bw - 1):.1f}" '
            f'height="{max(0.5, abs(y(1.0) - y(s))):.1f}" '
            f'fill="{colour(s)}" stroke="#888" stroke-width="0.5"><title>{r["M"]}x{r["N"]}x{r["K"]}: '
            f"{s:.3f}x</title></rect>"
        )
        body.append(f'<a href="{escape(link(r))}">{bar}</a>' if link else bar)
    body.append(_text(left + plot_w / 2, top + h + 16, f"{len(rows)} configurations, sorted by speedup"))
    return _svg(width, top + h + 24, body, title)


def scatter(series: dict[str, list[dict]], title: str) -> str:
    """Speedup against FLOPs (2·M·N·K, log scale), one colour per series (mode)."""
    points = [(name, r) for name, rows in series.items() for r in rows]
    width, h, left, top = 460, 200, 48, 24
    plot_w = width - left - 90
    if not points:
        return _svg(width, 60, [_text(width / 2, 30, f"{title}: nothing ranked yet")], title)
    xs = [math.log10(2.0 * r["M"] * r["N"] * r["K"]) for _, r in points]
    x_lo, x_hi = math.floor(min(xs)), math.ceil(max(xs)) + (1 if min(xs) == max(xs) else 0)
    lo, hi = _range([r["speedup"] for _, r in points])
    y, body = _axis_y(lo, hi, top, h, left, plot_w)
    body.insert(0, _text(width / 2, 14, title, extra=' font-weight="bold"'))

    def x(v: float) -> float:
        return left + (v - x_lo) / (x_hi - x_lo) * plot_w

    for d in range(int(x_lo), int(x_hi) + 1):
        body.append(_text(x(d), top + h + 14, f"1e{d}"))
    body.append(_text(left + plot_w / 2, top + h + 28, "FLOPs (2·M·N·K)"))
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd"]
    for i, name in enumerate(series):
        c = palette[i % len(palette)]
        body.append(f'<circle cx="{left + plot_w + 16}" cy="{top + 10 + 16 * i}" r="4" fill="{c}"/>')
        body.append(_text(left + plot_w + 24, top + 14 + 16 * i, name, "start"))
    for (name, r), xv in zip(points, xs):
        c = palette[list(series).index(name) % len(palette)]
        body.append(
            f'<circle cx="{x(xv):.1f}" cy="{y(r["speedup"]):.1f}" r="3" fill="{c}" fill-opacity="0.75">'
            f"<title>{escape(name)} {r['M']}x{r['N']}x{r['K']}: {r['speedup']:.3f}x</title></circle>"
        )
    return _svg(width, top + h + 36, body, title)


def progress(points: list[dict], title: str) -> str:
    """Each ranked attempt's speedup in time order (dots) and the best so far (step line)."""
    width, h, left, top = 560, 180, 48, 24
    plot_w = width - left - 10
    if not points:
        return _svg(width, 60, [_text(width / 2, 30, f"{title}: nothing ranked yet")], title)
    lo, hi = _range([p["speedup_best"] for p in points])
    y, body = _axis_y(lo, hi, top, h, left, plot_w)
    body.insert(0, _text(width / 2, 14, title, extra=' font-weight="bold"'))
    n = len(points)

    def x(i: int) -> float:
        return left + (i + 0.5) / n * plot_w

    step = max(1, n // 400)  # at most ~400 dots; the best-so-far line keeps every improvement
    best, path = None, []
    for i, p in enumerate(points):
        s = p["speedup_best"]
        if i % step == 0:
            body.append(f'<circle cx="{x(i):.1f}" cy="{y(s):.1f}" r="2" fill="#999"/>')
        if best is None or s > best:
            if best is not None:
                path.append(f"L{x(i):.1f},{y(best):.1f}")
            best = s
            path.append(("M" if not path else "L") + f"{x(i):.1f},{y(best):.1f}")
    path.append(f"L{x(n - 1):.1f},{y(best):.1f}")
    body.append(f'<path d="{" ".join(path)}" fill="none" stroke="#1a7f37" stroke-width="2"/>')
    body.append(
        _text(left + plot_w / 2, top + h + 16, f"{n} ranked attempts in time order; line: best so far")
    )
    return _svg(width, top + h + 24, body, title)
