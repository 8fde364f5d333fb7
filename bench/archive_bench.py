"""Archive benchmark: insert N synthetic evaluations, then time the ranked queries.

Prints a short table and writes bench/results/archive_bench.json. Usage:
    python bench/archive_bench.py [--n 100000] [--batch 1] [--keep FILE]
`--batch 1` commits every record on its own (what the search loop does); larger batches show the bulk path.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hgemm.archive import Archive  # noqa: E402

from hgemm.testing.synthetic import SHAPES, attempts  # noqa: E402


def timeit(fn, reps: int = 50) -> dict:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return {"p50_ms": statistics.median(times), "max_ms": max(times)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--keep", type=Path, default=None, help="write the archive here instead of a temp dir")
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
    M, N, K = SHAPES[len(SHAPES) // 2]
    queries = {
        "best": timeit(lambda: a.best(M, N, K)),
        "leaderboard_all_shapes": timeit(lambda: a.leaderboard(top=3), reps=5),
        "history": timeit(lambda: a.history(M, N, K), reps=10),
        "attempts_50": timeit(lambda: a.attempts(M, N, K, limit=50)),
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
    out = Path(__file__).resolve().parent / "results" / "archive_bench.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"inserted {args.n} evaluations (batch {args.batch}) in {insert_s:.1f} s ({args.n / insert_s:.0f}/s), "
          f"target 60 s; db {path.stat().st_size / 1e6:.0f} MB")  # fmt: skip
    print(f"{'query':<24}{'p50 ms':>10}{'max ms':>10}")
    for name, q in queries.items():
        print(f"{name:<24}{q['p50_ms']:>10.2f}{q['max_ms']:>10.2f}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
