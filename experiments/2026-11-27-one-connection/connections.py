"""One hardware connection per runner against the driver's default of eight (prepared 2026-11-27, not yet run).

NOTES item 75: the driver creates CUDA contexts one at a time for the whole host, and a context with
CUDA_DEVICE_MAX_CONNECTIONS=1 comes up in half the time alone and a third with eight at once. The branch that sets
it for every runner also moves the early writer's gate from a second stream to a flag in host memory. Do the
evaluator's figures change with it?

For each shape, the same candidates as `../2026-11-27-quick-overlap/` (ten wgmma configurations) are evaluated in
the full stage (offline and server, the correctness suite with the early writer's check included) by the
product's evaluator with the judge of `conn_judge.py`, in rounds of eight, one, one, eight connections. Printed per
shape and timing mode: the median |one / eight - 1| of the candidates' time over the best baseline, the same
between the two passes with eight (the noise floor), Spearman's rank correlation likewise, refusals, median seconds
per evaluation; and per connection count the median seconds of the suite's calls (a gate the writer never saw set
would wait its 60 s limit there).

Usage (one GPU, the package installed from the branch): python connections.py OUT_DIR [rounds]   (a few minutes)
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-11-27-quick-overlap"))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH", "")]))

from overlap import SHAPES, arguments, evaluator, sources, summarize  # noqa: E402

PASSES = {"eight": 8, "one": 1}
TIMING = ("offline", "server")


def main() -> None:
    out, rounds = arguments()
    rows, summary = [], []
    with evaluator("conn_judge:ConnectionsJudge") as ev:
        for shape in SHAPES:
            srcs = sources(shape)
            n_pass = 0
            for r in range(rounds):
                for mode in ("eight", "one", "one", "eight"):
                    ev._prepare(shape)
                    ev.worker.request("set_connections", 60.0, n=PASSES[mode])
                    recs = ev.evaluate(srcs, shape, stage="full", modes=TIMING)
                    for i, rec in enumerate(recs):
                        for timing in TIMING:
                            res = rec.modes.get(timing)
                            best = min(res.baselines.values(), key=lambda s: s.median_us).median_us if res else None
                            rows.append({"shape": str(shape), "timing": timing, "round": r, "pass": n_pass,
                                         "mode": mode, "candidate": i, "ok": rec.ok, "failure": rec.failure_kind,
                                         "us": res.candidate.median_us if res else None, "best_lib_us": best,
                                         "eval_s": rec.eval_seconds, "phases": rec.phases})  # fmt: skip
                    n_pass += 1
                    (out / "connections.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
            for timing in TIMING:
                mine = [row for row in rows if row["timing"] == timing]
                try:
                    line = {"timing": timing, **summarize(str(shape), len(srcs), mine, names=("eight", "one"))}
                except (statistics.StatisticsError, ZeroDivisionError) as e:
                    line = {"shape": str(shape), "timing": timing, "error": f"{type(e).__name__}: {e}"}
                line["calls_s"] = {m: statistics.median([row["phases"].get("calls", 0.0) for row in mine
                                                         if row["shape"] == str(shape) and row["mode"] == m
                                                         and row["phases"]] or [0.0])
                                   for m in PASSES}  # fmt: skip
                summary.append(line)
                print(json.dumps(line), flush=True)
            (out / "connections.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
