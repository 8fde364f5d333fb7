"""What each winner objective would have reported for a finished sweep, from its archive alone.

For every shape, takes the full-stage correct records of the archive (each one timed offline and in
server mode in the same evaluation, against baselines timed alongside), picks the winner by each
objective of `agent.loop.objective_score`, and prints the geometric-mean speedups over the best baseline
and the shapes below 0.90x. No GPU: a re-selection among measured records, not a new measurement.

Usage: python experiments/2026-11-22-objective-reselect/objective_reselect.py ARCHIVE
       (an archive .db or jsonl export, plain or compressed). The run in NOTES.md read the export of the
       second H200 grid100 sweep, since removed; the seed archive in bench/results holds its H200 records
       and those of the later H200 search of the 26 worst shapes.
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict

from hgemm.agent.loop import OBJECTIVES, objective_score
from hgemm.archive.transfer import read_export

from hgemm.core.record import EvalRecord


def main(argv: list[str]) -> int:
    by_shape: dict[tuple[int, int, int], list[EvalRecord]] = defaultdict(list)
    if len(argv) != 1:
        sys.exit(__doc__)
    for line in read_export(argv[0]):
        if line.get("type") != "record":
            continue
        rec = EvalRecord.from_dict(line["record"])
        if rec.stage == "full" and rec.ok and objective_score(rec, "both") is not None:
            by_shape[(rec.M, rec.N, rec.K)].append(rec)
    print(f"{len(by_shape)} shapes, {sum(map(len, by_shape.values()))} full-stage records")
    print("objective   offline geomean   server geomean   below 0.90x offline / server")
    for objective in OBJECTIVES:
        picks = [max(recs, key=lambda r: objective_score(r, objective)) for recs in by_shape.values()]
        off = [r.speedup_best("offline") for r in picks]
        srv = [r.speedup_best("server") for r in picks]

        def geo(xs: list[float]) -> float:
            return math.exp(sum(map(math.log, xs)) / len(xs))

        below = f"{sum(x < 0.9 for x in off)} / {sum(x < 0.9 for x in srv)}"
        print(f"{objective:<11} {geo(off):>15.3f}x {geo(srv):>15.3f}x   {below}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
