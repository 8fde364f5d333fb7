"""The evaluator's offline figure for the long-K kernel with its runners in the full sandbox and in parts of it
(`jails.py`), each variant in a fresh evaluator, on one host (with AB_REPEAT set, the full sandbox and no namespaces again). In every
evaluation the same library is also timed in the judge's process as if it were a baseline (`ours_in_judge`).

Usage (one GPU): python sandbox_ab.py OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from probe import BASE

SHAPE = (4096, 16384, 16384)
ROUNDS = {1: ("sandbox", "no-namespaces", "no-namespaces-no-seccomp", "no-pid", "no-net", "no-readonly", "shm-host",
              "shm-private")}
if os.environ.get("AB_REPEAT"):  # a second round of the two that matter most, when device time allows
    ROUNDS[2] = ("sandbox", "no-namespaces")


def main(out_dir: str) -> None:
    from hgemm.evaluator.compile import compile_trusted
    from hgemm.evaluator.kernels import get_family
    from hgemm.evaluator.local import LocalEvaluator
    from hgemm.evaluator.worker import Worker

    source = get_family("wgmma").render(BASE)
    os.environ["HGEMM_EXPERIMENT_LIB"] = compile_trusted(source).lib_path  # also timed in the judge, as a baseline
    rows = []
    for variants in ROUNDS.values():
        for name in variants:
            os.environ["HGEMM_EXPERIMENT_JAIL"] = name  # the judge process reads it when it starts
            with LocalEvaluator() as ev:
                ev.worker = Worker(session="jails:OursInJudge")
                recs = [ev.evaluate([source], SHAPE, stage="full", modes=("offline",))[0] for _ in range(2)]
            for rec in recs:
                off = rec.modes.get("offline")
                row = {"runner": name, "ok": rec.ok, "failure": rec.failure_message,
                       "median_us": off.candidate.median_us if off else None,
                       "p10_us": off.candidate.p10_us if off else None,
                       "baselines_us": {k: round(v.median_us, 1) for k, v in off.baselines.items()} if off else None,
                       "phases": rec.phases}  # fmt: skip
                rows.append(row)
                cuda_s = (rec.phases or {}).get("runner_cuda")
                print(f"{name:26s} ours {row['median_us']} (p10 {row['p10_us']})  baselines {row['baselines_us']}  "
                      f"runner context {cuda_s} s", flush=True)  # fmt: skip
    Path(out_dir, "sandbox_ab.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
