"""Quick-stage timings with and without the quiet rule (prepared 2026-11-27, not yet run).

NOTES item 72: on one GPU an evaluation is one runner context (about 0.2 s, created while nothing is timed) plus
about 0.1 s of timing, and the context's wait is most of the judge's time; with four GPUs the contexts took three
times as long. The quick stage only ranks candidates for the full stage. If its timings may overlap the next
runner's context creation (and a retired runner's teardown), does the ranking change, do more timings get refused
as disturbed, and how much faster is an evaluation?

For each shape, the same candidates (the wgmma family's configurations below, rendered today) are evaluated in the
quick stage (offline, as searches do) by the product's evaluator with the judge of `overlap_judge.py`, in rounds of
quiet, overlap, overlap, quiet (so drift cancels). Per candidate and mode: the median of its offline times over the
rounds, its time over the best baseline's in the same evaluation, refusals (`timing_disturbed`), and the
evaluation's seconds and phases. Printed per shape: the median |overlap / quiet - 1| of candidate times, the same
between the two quiet rounds (the noise floor), Spearman's rank correlation of the candidates' ratios between the
modes and between the two quiet rounds, refusals per mode, and median seconds per evaluation.

Usage (one GPU): python overlap.py OUT_DIR [rounds]   (default 2 rounds of four passes; a few minutes)
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH", "")]))

from hgemm.evaluator.kernels import get_family  # noqa: E402
from hgemm.evaluator.local import LocalEvaluator  # noqa: E402
from hgemm.evaluator.worker import Worker  # noqa: E402

from hgemm.core.shape import Shape  # noqa: E402

BASE = {"split_k": 1, "split_dsmem": 0, "stream_k": 0, "swap_ab": 0, "persistent": 1, "group_m": 8, "epi_panels": 0,
        "pingpong": 0, "warp_producer": 0, "stage_k": 64, "epilogue": 1}  # fmt: skip
TILES = [  # (bm, bn, consumers, cluster_m, stages)
    (64, 64, 1, 1, 8), (64, 64, 1, 2, 8), (64, 128, 1, 1, 8), (64, 128, 1, 2, 8), (128, 64, 2, 1, 8),
    (128, 64, 2, 2, 8), (128, 128, 2, 1, 6), (128, 128, 2, 2, 6), (128, 256, 2, 1, 4), (128, 256, 2, 2, 4),
]  # fmt: skip
SHAPES = [Shape(1024, 1024, 1024), Shape(512, 512, 2048), Shape(4096, 4096, 1024)]


def sources(shape: Shape) -> list[str]:
    family = get_family("wgmma")
    out = []
    for bm, bn, consumers, cluster_m, stages in TILES:
        params = family.repair({**BASE, "bm": bm, "bn": bn, "consumers": consumers, "cluster_m": cluster_m,
                                "stages": stages})  # fmt: skip
        if family.check(params, shape) is None:
            out.append(family.render(params))
    return out


def spearman(a: list[float], b: list[float]) -> float:
    def ranks(v):
        order = sorted(range(len(v)), key=v.__getitem__)
        r = [0.0] * len(v)
        for i, j in enumerate(order):
            r[j] = float(i)
        return r

    ra, rb = ranks(a), ranks(b)
    n = len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb, strict=True)) / (n * (n * n - 1))


def arguments() -> tuple[Path, int]:
    """OUT_DIR (made) and the number of rounds (default 2) from the command line."""
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    return out, int(sys.argv[2]) if len(sys.argv) > 2 else 2


def evaluator(session: str) -> LocalEvaluator:
    """The product's evaluator with its worker running the judge `session` ("module:Class")."""
    ev = LocalEvaluator()
    ev.worker.close()
    ev.worker = Worker(session=session)
    return ev


def main() -> None:
    out, rounds = arguments()
    rows, summary = [], []
    with evaluator("overlap_judge:OverlapJudge") as ev:
        for shape in SHAPES:
            srcs = sources(shape)
            passes = []
            for r in range(rounds):
                for mode in ("quiet", "overlap", "overlap", "quiet"):
                    ev._prepare(shape)
                    ev.worker.request("set_overlap", 10.0, on=mode == "overlap")
                    recs = ev.evaluate(srcs, shape, stage="quick", modes=("offline",))
                    passes.append(mode)
                    for i, rec in enumerate(recs):
                        off = rec.modes.get("offline")
                        best = min(off.baselines.values(), key=lambda s: s.median_us).median_us if off else None
                        rows.append({"shape": str(shape), "round": r, "pass": len(passes) - 1, "mode": mode,
                                     "candidate": i, "ok": rec.ok, "failure": rec.failure_kind,
                                     "us": off.candidate.median_us if off else None, "best_lib_us": best,
                                     "eval_s": rec.eval_seconds, "phases": rec.phases})  # fmt: skip
            (out / "overlap.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))
            try:
                summary.append(summarize(str(shape), len(srcs), rows))
            except (statistics.StatisticsError, ZeroDivisionError) as e:  # too few candidates timed in both modes
                summary.append({"shape": str(shape), "error": f"{type(e).__name__}: {e}"})
            print(json.dumps(summary[-1]), flush=True)
            (out / "overlap.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))


def summarize(shape: str, n: int, rows: list[dict], names: tuple[str, str] = ("quiet", "overlap")) -> dict:
    """`names`: the reference mode (passed first and last in each round of four) and the one compared with it."""
    ref, other = names
    mine = [r for r in rows if r["shape"] == shape]

    def ratio(mode: str, first_quiet: bool | None = None) -> list[float | None]:
        """Per candidate, the median over its passes in `mode` of time / best baseline (`first_quiet`: only the
        first (True) or last (False) quiet pass of each round)."""
        out = []
        for i in range(n):
            vals = [r["us"] / r["best_lib_us"] for r in mine
                    if r["candidate"] == i and r["mode"] == mode and r["us"] and r["best_lib_us"]
                    and (first_quiet is None or (r["pass"] % 4 == 0) == first_quiet)]  # fmt: skip
            out.append(statistics.median(vals) if vals else None)
        return out

    q, o = ratio(ref), ratio(other)
    q1, q2 = ratio(ref, True), ratio(ref, False)
    both = [i for i in range(n) if q[i] and o[i] and q1[i] and q2[i]]
    evals = {m: statistics.median([r["eval_s"] for r in mine if r["mode"] == m and r["eval_s"]]) for m in
             names}  # fmt: skip
    return {
        "shape": shape, "candidates": n,
        f"median_abs_change_{other}": statistics.median(abs(o[i] / q[i] - 1) for i in both),
        f"median_abs_change_{ref}_vs_{ref}": statistics.median(abs(q2[i] / q1[i] - 1) for i in both),
        f"spearman_{other}_vs_{ref}": spearman([q[i] for i in both], [o[i] for i in both]),
        f"spearman_{ref}_vs_{ref}": spearman([q1[i] for i in both], [q2[i] for i in both]),
        "disturbed": {m: sum(r["failure"] == "timing_disturbed" for r in mine if r["mode"] == m)
                      for m in names},  # fmt: skip
        "median_eval_s": evals,
    }


if __name__ == "__main__":
    main()
