"""Web view render benchmark: fill an archive with at least 100,000 synthetic evaluations, serve it with
uvicorn, and time every page over HTTP.

Usage: python -m hgemm.bench.web_bench [--evaluations 100000] [--reps 40] [--keep FILE] [--out-dir bench/results]

- Synthetic runs, kernels and LLM calls (`hgemm.testing.web_archive`, fixed seed); no GPU needed.
- Each page is requested `--reps` times after one warm-up request, in rounds (every page once per round),
  from one client over loopback; the time is request sent to last byte received. Shape and kernel pages
  cycle over several shapes and kernels (the most attempted shape, the best kernel, kernels deep in a
  lineage).
- The target: p95 at most 300 ms for every page. Writes web-render-<cpu>-<date>.md, .json and .png
  (p50 and p95 per page against the target) into --out-dir; prints the table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import socket
import statistics
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

TARGET_MS = 300.0


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def fill_archive(path: Path, evaluations: int) -> dict:
    from hgemm.archive import Archive

    from hgemm.testing.web_archive import fill

    n = int(evaluations / 1.33) + 1000  # about 1.35 evaluation rows per synthetic record
    with Archive(path) as a:
        t = time.perf_counter()
        added = fill(a, n, seed=7, per_run=500)
        while a.stats()["evaluation_rows"] < evaluations:
            fill(a, 2000, seed=len(added) + a.record_count(), per_run=500)
        added["fill_s"] = time.perf_counter() - t
        added.update({k: v for k, v in a.stats().items() if k in ("kernels", "records", "evaluation_rows")})
    return added


def pages(path: Path) -> dict[str, list[str]]:
    """Page name -> the URLs it cycles over."""
    from contextlib import closing

    from hgemm.archive.web.data import open_readonly

    with closing(open_readonly(path)) as c:
        shapes = [
            f"/shape/{M}x{N}x{K}"
            for M, N, K, _ in c.execute(
                "SELECT M, N, K, count(*) AS n FROM records GROUP BY M, N, K ORDER BY n DESC LIMIT 4"
            )
        ]
        best = [
            r[0]
            for r in c.execute(
                "SELECT kernel FROM evaluations WHERE ranked = 1 ORDER BY speedup_best DESC LIMIT 2"
            )
        ]
        deep = [r[0] for r in c.execute("SELECT child FROM kernel_parents ORDER BY rowid DESC LIMIT 2")]
        kids = [
            r[0]
            for r in c.execute(
                "SELECT parent, count(*) n FROM kernel_parents GROUP BY parent ORDER BY n DESC LIMIT 2"
            )
        ]
        edges = list(c.execute("SELECT parent, child FROM kernel_parents ORDER BY rowid DESC LIMIT 4"))
    return {
        "overview": ["/"],
        "leaderboard": [
            "/leaderboard",
            "/leaderboard?sort=speedup&desc=1",
            "/leaderboard?mode=server&sort=median",
        ],
        "leaderboard, family filter": ["/leaderboard?family=wgmma_tma&min_speedup=1&sort=speedup&desc=1"],
        "shape": shapes + [s + "?mode=server" for s in shapes[:2]],
        "kernel": [f"/kernel/{h}" for h in best + deep + kids],
        "kernel source download": [f"/kernel/{h}/source.cu" for h in best],
        "parent diff": [f"/diff/{p}/{ch}" for p, ch in edges],
        "runs": ["/runs"],
    }


def serve(path: Path) -> tuple[str, object, threading.Thread]:
    import uvicorn
    from hgemm.archive.web.app import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(create_app(path), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server, thread


def fetch(url: str) -> tuple[float, int, int]:
    t = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as r:
        body = r.read()
        status = r.status
    return (time.perf_counter() - t) * 1e3, status, len(body)


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, int(round(q / 100 * len(s) + 0.5)) - 1))]


def plot(results: dict, title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    p50 = [results[n]["p50_ms"] for n in names]
    p95 = [results[n]["p95_ms"] for n in names]
    fig, ax = plt.subplots(figsize=(8, 3.8))
    y = range(len(names))
    ax.barh([i + 0.2 for i in y], p50, height=0.4, label="p50", color="#8fb8de")
    ax.barh([i - 0.2 for i in y], p95, height=0.4, label="p95", color="#1f5f9f")
    ax.axvline(TARGET_MS, color="#c03030", linestyle="--", label=f"target p95 ≤ {TARGET_MS:.0f} ms")
    ax.set_yticks(list(y), names)
    ax.invert_yaxis()
    ax.set_xlabel("render time, request to last byte (ms)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m hgemm.bench.web_bench", description=__doc__.splitlines()[0])
    ap.add_argument("--evaluations", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--keep", type=Path, default=None, help="build (or reuse) the archive here")
    ap.add_argument("--out-dir", type=Path, default=Path("bench/results"))
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "web.db"
        if path.exists():
            from hgemm.archive import Archive

            with Archive(path) as a:
                filled = {
                    k: v for k, v in a.stats().items() if k in ("kernels", "records", "evaluation_rows")
                }
        else:
            filled = fill_archive(path, args.evaluations)
        print(f"archive: {filled}", flush=True)
        urls = pages(path)
        base, server, thread = serve(path)
        times: dict[str, list[float]] = {name: [] for name in urls}
        sizes: dict[str, int] = {}
        for group in urls.values():  # warm-up: one of each URL
            for u in group:
                assert fetch(base + u)[1] == 200, u
        for rep in range(args.reps):
            for name, group in urls.items():
                ms, status, size = fetch(base + group[rep % len(group)])
                assert status == 200
                times[name].append(ms)
                sizes[name] = max(sizes.get(name, 0), size)
        server.should_exit = True
        thread.join(10)

    results = {
        name: {
            "p50_ms": round(statistics.median(t), 2),
            "p95_ms": round(percentile(t, 95), 2),
            "max_ms": round(max(t), 2),
            "requests": len(t),
            "urls": len(urls[name]),
            "largest_page_bytes": sizes[name],
        }
        for name, t in times.items()
    }
    date = dt.date.today().isoformat()
    cpu = cpu_name()
    machine = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "os": platform.platform(),
    }
    ok = all(r["p95_ms"] <= TARGET_MS for r in results.values())
    report = {"date": date, "machine": machine, "archive": filled, "reps": args.reps, "target_p95_ms": TARGET_MS,
              "all_within_target": ok, "pages": results}  # fmt: skip
    args.out_dir.mkdir(parents=True, exist_ok=True)
    stem = "web-render-" + "-".join(cpu.split()[:3]).replace("(R)", "").replace("(TM)", "") + f"-{date}"
    stem = "".join(ch if ch.isalnum() or ch in "-._" else "-" for ch in stem)
    (args.out_dir / f"{stem}.json").write_text(json.dumps(report, indent=2) + "\n")
    plot(
        results,
        f"hgemm serve, {filled['evaluation_rows']:,} evaluations, {cpu} ({date})",
        args.out_dir / f"{stem}.png",
    )
    lines = [
        f"# Web view render times ({date})",
        "",
        f"Machine: {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}; no GPU involved.",
        f"Archive: {filled['evaluation_rows']:,} evaluation rows, {filled['records']:,} records, "
        f"{filled['kernels']:,} kernels (synthetic, `hgemm.testing.web_archive`, seed 7).",
        f"Method: `python -m hgemm.bench.web_bench`; uvicorn on loopback, one client, {args.reps} requests per page "
        "after a warm-up, request sent to last byte received.",
        "",
        f"Target: p95 ≤ {TARGET_MS:.0f} ms on every page: {'met' if ok else 'NOT met'}.",
        "",
        "| page | URLs | p50 ms | p95 ms | max ms | largest page |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        lines.append(f"| {name} | {r['urls']} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['max_ms']:.1f} | "
                     f"{r['largest_page_bytes'] / 1024:.0f} KiB |")  # fmt: skip
    lines += ["", f"![render times]({stem}.png)", ""]
    (args.out_dir / f"{stem}.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
