"""nvcc builds per run, from a scaling run's exported archive: how many evaluations spent over half a second in
their compile phase (an nvcc build, or a wait for another caller's build of the same source), over how many
distinct kernels, and the summed compile phase. `repeat_s` sums, over kernels with more than one such phase, all
but the longest: the second worker's own build of the same source (before the build lock) or its wait for the
first one's (after).

Usage: python builds.py RUN_DIR... > builds.json (each RUN_DIR holds <run>.jsonl.xz from
`experiments/2026-11-27-scaling-4gpu/run.sh`; the archives themselves are not kept here).
"""

from __future__ import annotations

import json
import lzma
import statistics
import sys
from collections import Counter
from pathlib import Path

LONG_S = 0.5  # a cache hit takes a few hundredths of a second; a build about two seconds


def builds(run_dir: Path, since: str) -> dict:
    (archive,) = run_dir.glob("*.jsonl.xz")
    per_kernel: Counter[str] = Counter()
    phases: dict[str, list[float]] = {}
    long, total = [], 0.0
    with lzma.open(archive, "rt") as f:
        for line in f:
            rec = json.loads(line).get("record")
            if not rec or rec.get("created", "") < since:
                continue
            seconds = (rec.get("phases") or {}).get("compile", 0.0)
            total += seconds
            if seconds > LONG_S:
                per_kernel[rec["kernel_hash"]] += 1
                phases.setdefault(rec["kernel_hash"], []).append(seconds)
                long.append(seconds)
    return {
        "run": run_dir.name,
        "long_compile_phases": sum(per_kernel.values()),
        "kernels": len(per_kernel),
        "kernels_twice_or_more": sum(1 for n in per_kernel.values() if n > 1),
        "median_long_s": round(statistics.median(long), 3) if long else None,
        "compile_phase_sum_s": round(total, 1),
        "repeat_s": round(sum(sum(v) - max(v) for v in phases.values()), 1),
    }


if __name__ == "__main__":
    since = "2026-11-27T15"  # the runs' own records; the seed archive's are older
    print(json.dumps([builds(Path(d), since) for d in sys.argv[1:]], indent=1))
