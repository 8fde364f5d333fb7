"""`hgemm report --out DIR`: the overview as a static page to share: index.html (styles inline, no links to
a server), every plot as an SVG file and a PNG file, and best.csv (the best kernel of every shape, GPU and
mode).

Invariants: reads the archive read-only; writes only inside DIR (created if absent); each file is written
whole (a temporary file, then a rename), so a cut-off report leaves no half file.
"""

from __future__ import annotations

import csv
import io
import re
from contextlib import closing
from pathlib import Path

from hgemm.archive.web import app, data

from hgemm.core.paths import write_text_atomic

CSV_COLUMNS = ["gpu", "mode", "M", "N", "K", "speedup", "median_us", "best_baseline", "kernel", "rows"]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "gpu"


def _png(svg_rows: list[dict], title: str, path: Path, heat_k: list[int]) -> None:
    """One PNG of a GPU and mode: a heatmap per K and the sorted speedups (matplotlib, no display)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import LinearSegmentedColormap, LogNorm

    cmap = LinearSegmentedColormap.from_list("speedup", ["#e63737", "#ffffff", "#37a537"])
    cols = len(heat_k) + 1
    fig, axes = plt.subplots(1, cols, figsize=(3.6 * cols, 3.4), squeeze=False)
    norm = LogNorm(vmin=0.5, vmax=2.0)
    for ax, K in zip(axes[0], heat_k):
        rows = [r for r in svg_rows if r["K"] == K]
        Ms, Ns = sorted({r["M"] for r in rows}), sorted({r["N"] for r in rows})
        grid = np.full((len(Ms), len(Ns)), np.nan)
        for r in rows:
            grid[Ms.index(r["M"]), Ns.index(r["N"])] = r["speedup"]
        ax.imshow(np.clip(grid, 0.5, 2.0), cmap=cmap, norm=norm, aspect="auto")
        for i in range(len(Ms)):
            for j in range(len(Ns)):
                if not np.isnan(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(Ns)), [str(n) for n in Ns], fontsize=7)
        ax.set_yticks(range(len(Ms)), [str(m) for m in Ms], fontsize=7)
        ax.set_xlabel("N")
        ax.set_ylabel("M")
        ax.set_title(f"K = {K}", fontsize=9)
    ax = axes[0][-1]
    speedups = sorted(r["speedup"] for r in svg_rows)
    ax.bar(range(len(speedups)), speedups, color=[cmap(norm(min(2.0, max(0.5, s)))) for s in speedups],
           edgecolor="#888", linewidth=0.3)  # fmt: skip
    ax.axhline(1.0, color="#555", linestyle="--", linewidth=0.8)
    ax.set_title("speedup per configuration, sorted", fontsize=9)
    ax.set_xlabel("configuration")
    ax.set_ylabel("speedup over best baseline")
    fig.suptitle(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(buf.getvalue())
    tmp.replace(path)


def write_report(db_path: Path, out: Path) -> list[Path]:
    """Write the static overview of the archive at `db_path` into `out`; returns the files written."""
    out = Path(out)
    plots = out / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with closing(data.open_readonly(db_path)) as conn:
        ctx = app.overview_context(conn, links=False)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, extrasaction="ignore")
    w.writeheader()
    for g in ctx["gpus"]:
        slug = _slug(g["gpu"] or "unknown")
        for mode, m in g["modes"].items():
            for r in m["rows"]:
                w.writerow(r)
            if not m["rows"]:
                continue
            for K, plot in m["heatmaps"]:
                written.append(_write(plots / f"{slug}-{mode}-heatmap-K{K}.svg", str(plot)))
            written.append(_write(plots / f"{slug}-{mode}-sorted.svg", str(m["bars"])))
            png = plots / f"{slug}-{mode}.png"
            _png(m["rows"], f"{g['gpu'] or 'unknown GPU'}, {mode}", png, [K for K, _ in m["heatmaps"]])
            written.append(png)
            m["png"] = f"plots/{png.name}"
        written.append(_write(plots / f"{slug}-flops.svg", str(g["scatter"])))
    written.append(_write(out / "best.csv", buf.getvalue()))
    html = (
        app.environment()
        .get_template("overview.html")
        .render(archive_name=Path(db_path).name, static=True, inline_css=app.stylesheet(), **ctx)
    )
    written.insert(0, _write(out / "index.html", html))
    return written


def _write(path: Path, text: str) -> Path:
    write_text_atomic(path, text)
    return path
