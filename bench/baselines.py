"""Time the four baselines and the floor for a list of shapes, in both modes, on this GPU.

Usage: python -m hgemm.bench.baselines [--out bench/results] [M,N,K ...]

- Writes baselines-<gpu>-<date>.json and .md to --out: GPU name, driver, date and the GPU facts; per shape
  and mode each baseline's median/p10/p90 and TFLOP/s, the best, and the floor. Prints the table.
- Every baseline is timed afresh (`baseline_table(..., fresh=True)`), never read from the cache.
- Without shapes, a fixed set of 12 (`SHAPES`) from tiny to 8192x8192x4096.
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import date
from pathlib import Path

from hgemm.evaluator.local import LocalEvaluator

from hgemm.core.shape import Shape

SHAPES = [(128, 128, 128), (64, 128, 64), (1024, 128, 1024), (512, 128, 8192), (256, 2048, 4096),
          (1024, 1024, 1024), (2048, 256, 512), (512, 4096, 4096), (4096, 4096, 4096), (128, 16384, 1024),
          (16384, 4096, 256), (8192, 8192, 4096)]


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m hgemm.bench.baselines", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("shapes", nargs="*")
    args = ap.parse_args()
    shapes = [tuple(map(int, s.split(","))) for s in args.shapes] or SHAPES
    rows = []
    with LocalEvaluator() as ev:
        for M, N, K in shapes:
            t0 = time.perf_counter()
            table = ev.baseline_table(Shape(M, N, K), fresh=True)
            table["seconds"] = time.perf_counter() - t0
            rows.append(table)
            print(f"{M}x{N}x{K}: " + "  ".join(
                f"{mode} best {min(m['baselines'].values(), key=lambda s: s['median_us'])['median_us']:.2f} us "
                f"floor {m['floor_us']:.2f}" for mode, m in table["modes"].items()), flush=True)
        info = ev.gpu_info()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"baselines-{info.name.replace(' ', '-')}-{date.today().isoformat()}"
    doc = {"gpu": info.name, "driver": info.driver, "cc": info.cc, "sm_count": info.sm_count,
           "date": date.today().isoformat(), "facts": rows[0]["facts"], "shapes": rows}
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1))
    lines = [f"# Baselines on {info.name} (driver {info.driver}), {doc['date']}", "",
             f"Facts: {json.dumps(doc['facts'])}", "",
             "| shape | mode | torch_nn | torch_tn | lt_heuristic | lt_autotuned | best | floor |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for mode, m in r["modes"].items():
            b = m["baselines"]
            best = min(b, key=lambda k: b[k]["median_us"])
            cells = [f"{b[k]['median_us']:.2f}" if k in b else "-" for k in ("torch_nn", "torch_tn", "lt_heuristic", "lt_autotuned")]
            lines.append(f"| {r['M']}x{r['N']}x{r['K']} | {mode} | " + " | ".join(cells) + f" | {best} | {m['floor_us']:.2f} |")
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
