"""Per-evaluation phases of a GPU sweep, from its exported archive: medians and sums over the run's own records.

    python phases.py LABEL=EXPORT.jsonl.xz ... > phases.json

Only records created on or after the date in `--since` (default: 2026-11-26) count: the imported seed archive's
records are older."""

import json
import lzma
import statistics
import sys
from collections import defaultdict

PHASES = (
    "compile",
    "runner_boot",
    "runner_cuda",
    "runner_wait",
    "spare_wait",
    "retire_wait",
    "open",
    "references",
    "calls",
    "verify",
    "time_candidate",
    "time_baselines",
    "witnesses",
)


def summary(path: str, since: str) -> dict:
    recs = []
    with lzma.open(path, "rt") as f:
        for line in f:
            rec = json.loads(line).get("record")
            if rec and rec.get("created", "") >= since:
                recs.append(rec)
    per = defaultdict(list)
    for rec in recs:
        for name, seconds in (rec.get("phases") or {}).items():
            per[name].append(seconds)
    evals = [r["eval_seconds"] for r in recs if r.get("eval_seconds")]
    return {
        "records": len(recs),
        "failures": sum(1 for r in recs if r.get("failure_kind")),
        "eval_seconds_median": round(statistics.median(evals), 4),
        "phases": {
            n: {"median_s": round(statistics.median(per[n]), 4), "mean_s": round(sum(per[n]) / len(recs), 4)}
            for n in PHASES
            if per[n]
        },
    }


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--since=")]
    since = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--since=")), "2026-11-26")
    print(
        json.dumps({label: summary(path, since) for label, path in (a.split("=", 1) for a in args)}, indent=1)
    )
