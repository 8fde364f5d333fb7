"""Archive benchmark: insert N synthetic evaluations, then time the ranked queries.

Usage: python -m hgemm.bench.archive_bench [--n 100000] [--batch 1] [--keep FILE]
       [--out bench/results/archive_bench.json]

- `--batch 1` commits every record in its own transaction (what the search loop does); larger batches show
  the bulk path. The target is 100,000 inserts in 60 s.
- Synthetic rows (`hgemm.testing.synthetic`, fixed seed): the same archive for every run; no GPU needed.
- The archive goes to a temporary directory unless --keep names a file; prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from hgemm.archive import Archive

from hgemm.core.shape import Shape
from hgemm.testing.synthetic import SHAPES, attempts


def timeit(fn, reps: int = 50) -> dict:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return {"p50_ms": statistics.median(times), "max_ms": max(times)}


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m hgemm.bench.archive_bench", description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--keep", type=Path, default=None, help="write the archive here instead of a temp dir")
    ap.add_argument("--out", type=Path, default=Path("bench/results/archive_bench.json"), help="JSON output path")
    args = ap.parse_args()
    path = args.keep or Path(tempfile.mkdtemp()) / "bench.db"
    path.unlink(missing_ok=True)
    a = Archive(path)
    items = list(attempts(args.n, seed=1, kernels=2000))
    t0 = time.perf_counter()
    for i in range(0, len(items), args.batch):
        with a.writer.transaction():
            for at in items[i : i + args.batch]:
                h = a.add_kernel(at.source, family=at.family, params=at.params, parents=at.parents,
                                 proposer=at.proposer)  # fmt: skip
                a.add_evaluation(h, at.record)
    insert_s = time.perf_counter() - t0
    shape = Shape(*SHAPES[len(SHAPES) // 2])
    queries = {
        "best": timeit(lambda: a.best(shape)),
        "leaderboard_all_shapes": timeit(lambda: a.leaderboard(top=3), reps=5),
        "history": timeit(lambda: a.history(shape), reps=10),
        "attempts_50": timeit(lambda: a.attempts(shape, limit=50)),
        "lineage": timeit(lambda: a.lineage(items[-1].record.kernel_hash)),
        "stats": timeit(a.stats, reps=5),
    }
    result = {
        "n": args.n,
        "batch": args.batch,
        "insert_s": insert_s,
        "insert_per_s": args.n / insert_s,
        "target_insert_s": 60,
        "db_bytes": path.stat().st_size,
        "stats": {
            k: v for k, v in a.stats().items() if k in ("kernels", "records", "evaluation_rows", "shapes")
        },
        "queries": queries,
    }
    a.close()
    out = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"inserted {args.n} evaluations (batch {args.batch}) in {insert_s:.1f} s ({args.n / insert_s:.0f}/s), "
          f"target 60 s; db {path.stat().st_size / 1e6:.0f} MB")  # fmt: skip
    print(f"{'query':<24}{'p50 ms':>10}{'max ms':>10}")
    for name, q in queries.items():
        print(f"{name:<24}{q['p50_ms']:>10.2f}{q['max_ms']:>10.2f}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
