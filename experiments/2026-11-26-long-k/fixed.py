"""After the fix (the arena shared as a file descriptor through the CUDA virtual memory API, not a legacy IPC
handle): the same library timed in the runner, as a candidate, and in the judge, as if it were a baseline
(`jails.py`), in one evaluator session, on the long-K shapes and two controls, both modes, twice each.

Usage (one GPU): python fixed.py OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from probe import BASE

SHAPES = [(4096, 16384, 16384), (1024, 8192, 16384), (2048, 16384, 16384), (8192, 8192, 8192), (4096, 4096, 128)]


def main(out_dir: str) -> None:
    from hgemm.evaluator.compile import compile_trusted
    from hgemm.evaluator.kernels import get_family
    from hgemm.evaluator.local import LocalEvaluator
    from hgemm.evaluator.worker import Worker

    source = get_family("wgmma").render(BASE)
    os.environ["HGEMM_EXPERIMENT_LIB"] = compile_trusted(source).lib_path
    os.environ["HGEMM_EXPERIMENT_JAIL"] = "sandbox"
    rows = []
    with LocalEvaluator() as ev:
        ev.worker = Worker(session="jails:OursInJudge")
        for shape in SHAPES:
            for rep in range(2):
                rec = ev.evaluate([source], shape, stage="full", modes=("offline", "server"))[0]
                for mode in ("offline", "server"):
                    m = rec.modes.get(mode)
                    if m is None:
                        rows.append({"shape": list(shape), "rep": rep, "mode": mode, "failure": rec.failure_message})
                        print(shape, mode, rec.failure_message, flush=True)
                        continue
                    judge_us = m.baselines["ours_in_judge"].median_us if "ours_in_judge" in m.baselines else None
                    best = min(v.median_us for k, v in m.baselines.items() if k != "ours_in_judge")
                    row = {"shape": list(shape), "rep": rep, "mode": mode, "runner_us": m.candidate.median_us,
                           "runner_p10_us": m.candidate.p10_us, "judge_us": judge_us, "best_library_us": best,
                           "runner_over_judge": m.candidate.median_us / judge_us if judge_us else None}  # fmt: skip
                    rows.append(row)
                    ratio = f"{row['runner_over_judge']:.3f}" if judge_us else "-"
                    print(f"{'x'.join(map(str, shape)):18s} {mode:7s} rep {rep}: runner {row['runner_us']:8.1f}  "
                          f"judge {judge_us or 0:8.1f}  ratio {ratio}  best library {best:8.1f}", flush=True)  # fmt: skip
    Path(out_dir, "fixed.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
