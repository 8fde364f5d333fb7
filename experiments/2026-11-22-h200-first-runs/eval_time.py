"""How long one evaluation of an already-compiled candidate takes on the GPU, both modes, full stage.

    python experiments/2026-11-22-h200-first-runs/eval_time.py [--out FILE]

For a few shapes under 1 GFLOP: the first evaluation on a shape (prepares the worker: inputs,
baselines, cuBLASLt autotuning unless cached) and a second, already-compiled candidate on the same
shape (correctness suite + offline and server timing of it and the four baselines).
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import date
from pathlib import Path

from hgemm.evaluator.compile import compile_sources
from hgemm.evaluator.kernels import get_family
from hgemm.evaluator.local import LocalEvaluator

SHAPES = [(128, 128, 128), (512, 512, 512), (1024, 1024, 256), (256, 2048, 512)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="eval-time.json")
    args = ap.parse_args()
    rows = []
    with LocalEvaluator() as ev:
        for M, N, K in SHAPES:
            fams = [get_family("small"), get_family("mma_ms")]
            sources = [f.render(f.default_params(M, N, K)) for f in fams]
            compile_sources(sources)  # compiled before any timing starts
            t0 = time.perf_counter()
            (first,) = ev.evaluate(sources[:1], M, N, K, stage="full")
            t1 = time.perf_counter()
            (second,) = ev.evaluate(sources[1:], M, N, K, stage="full")
            t2 = time.perf_counter()
            rows.append({"M": M, "N": N, "K": K, "gflop": 2 * M * N * K / 1e9, "first_on_shape_s": t1 - t0,
                         "compiled_candidate_both_modes_s": t2 - t1, "worker_seconds": second.eval_seconds,
                         "ok": [first.ok, second.ok]})
            print(f"{M}x{N}x{K}: first on shape {t1 - t0:.2f} s, next compiled candidate {t2 - t1:.2f} s "
                  f"(worker {second.eval_seconds:.2f} s), correct {first.ok}/{second.ok}", flush=True)
        info = ev.gpu_info()
    doc = {"gpu": info.name, "driver": info.driver, "date": date.today().isoformat(), "rows": rows}
    Path(args.out).write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
