"""The evaluator's offline figure for the long-K kernel with its runners in the full sandbox, without the
namespaces, and without namespaces or seccomp, alternated twice, on one host.

Usage (one GPU): python sandbox_ab.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from probe import BASE

SHAPE = (4096, 16384, 16384)
SESSIONS = {"sandbox": "hgemm.evaluator.judge:Judge", "no-namespaces": "jails:NoNamespaceJudge",
            "no-namespaces-no-seccomp": "jails:NoSeccompJudge"}  # fmt: skip


def main(out_dir: str) -> None:
    from hgemm.evaluator.kernels import get_family
    from hgemm.evaluator.local import LocalEvaluator
    from hgemm.evaluator.worker import Worker

    source = get_family("wgmma").render(BASE)
    rows = []
    for _ in range(2):
        for name, session in SESSIONS.items():
            with LocalEvaluator() as ev:
                ev.worker = Worker(session=session)
                recs = [ev.evaluate([source], SHAPE, stage="full", modes=("offline",))[0] for _ in range(2)]
            for rec in recs:
                off = rec.modes.get("offline")
                row = {"runner": name, "ok": rec.ok, "failure": rec.failure_message,
                       "median_us": off.candidate.median_us if off else None,
                       "p10_us": off.candidate.p10_us if off else None,
                       "baselines_us": {k: round(v.median_us, 1) for k, v in off.baselines.items()} if off else None,
                       "phases": rec.phases}  # fmt: skip
                rows.append(row)
                print(f"{name:26s} ours {row['median_us']} (p10 {row['p10_us']})  baselines {row['baselines_us']}",
                      flush=True)  # fmt: skip
    Path(out_dir, "sandbox_ab.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
