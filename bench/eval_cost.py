"""Where an evaluation's time goes on this GPU: seconds per phase, GPU-worker seconds and wall per `evaluate`.

Usage: python -m hgemm.bench.eval_cost [--out bench/results] [--families mma_ms,mma_splitk,small,wgmma]
       [--shapes 128x128x128,...] [--stages quick,full] [--repeats 3] [--gap 0] [--max-seconds 200]

- Each family's default kernel for each shape is compiled first (in parallel, cold unless cached); the cold
  compile times are reported apart. Then, shape by shape, one warm-up call prepares the shape (its buffers,
  references and baselines; reported apart), and each stage gets `--repeats` rounds of one `evaluate` call
  per family (one source each, families interleaved, both modes in the full stage, offline in the quick one).
- Reported, per stage and per shape: medians of the wall per call, of `eval_seconds` (the GPU worker's time)
  and of every phase in `EvalRecord.phases` (see evaluator/phases.py; a phase a record lacks counts as 0);
  "other" is worker time in no phase, "outside" the call's time neither in the worker nor in the compile.
- `--gap S` idles S seconds between calls, as a search does while its model proposes (0: back to back, the
  worst case for runners started ahead). No call starts once the run has lasted `--max-seconds`, compiles
  included; the report says how many calls ran.
- Writes eval-cost-<gpu>-<date>.json (every call) and .md to --out, with GPU name, driver and date; prints
  the table. Needs a GPU and nvcc, no network.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from datetime import date
from pathlib import Path

from hgemm.evaluator.compile import compile_sources
from hgemm.evaluator.kernels import get_family
from hgemm.evaluator.local import LocalEvaluator
from hgemm.evaluator.phases import OUTSIDE

from hgemm.core.shape import Shape

SHAPES = ["128x128x128", "512x512x512", "1024x1024x1024", "2048x2048x2048", "4096x4096x128", "256x4096x1024",
          "4096x4096x4096"]  # fmt: skip
FAMILIES = ["mma_ms", "mma_splitk", "small", "wgmma"]
MODES = {"quick": ("offline",), "full": ("offline", "server")}
# The phases in the order an evaluation meets them (evaluator/phases.py).
ORDER = ["prepare", "runner_wait", "open", "references", "calls", "verify", "retire_wait", "spare_wait", "capture",
         "timing_setup", "time_candidate", "time_baselines", "input_checks", "witnesses", "teardown"]  # fmt: skip


def gpu_tag(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'H100'; a name without a model number keeps its words, joined by dashes."""
    m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Za-z]?)\b", name)
    return m.group(1) if m else re.sub(r"[^A-Za-z0-9.]+", "-", name).strip("-")


def row(rec, wall: float, family: str, shape: str, stage: str) -> dict:
    phases = dict(rec.phases)
    inside = sum(s for k, s in phases.items() if k not in OUTSIDE)
    worker = rec.eval_seconds or 0.0
    return {"family": family, "shape": shape, "stage": stage, "ok": rec.ok, "failure_kind": rec.failure_kind,
            "wall": wall, "eval_seconds": worker, "phases": phases, "other": max(0.0, worker - inside),
            "outside": max(0.0, wall - worker - phases.get("compile", 0.0))}  # fmt: skip


def medians(rows: list[dict]) -> dict[str, float]:
    """Median of every quantity over `rows` (a phase missing from a row counts as 0)."""
    names = sorted({k for r in rows for k in r["phases"]})
    out = {k: statistics.median(r[k] for r in rows) for k in ("wall", "eval_seconds", "other", "outside")}
    out.update({k: statistics.median(r["phases"].get(k, 0.0) for r in rows) for k in names})
    return out


def report(doc: dict) -> str:
    stages = [s for s in doc["stages"] if doc["summary"].get(s)]
    head = f"# Evaluation cost on {doc['gpu']} (driver {doc['driver']}), {doc['date']}"
    lines = [head, "", doc["how"], "",
             f"Calls: {doc['calls']} evaluated of {doc['planned']} planned"
             + (" (stopped at the time limit)" if doc["calls"] < doc["planned"] else "")
             + f", {doc['failed']} not accepted (left out of the medians); gap between calls {doc['gap_s']:g} s.",
             *(f"- not accepted: {line}" for line in doc["not_accepted"]), "",
             "## Per call, median seconds", "",
             "| | " + " | ".join(stages) + " |", "|---|" + "---:|" * len(stages)]  # fmt: skip
    present = {k for s in stages for k in doc["summary"][s]} - {"wall", "eval_seconds", "other", "outside"}
    known = [k for k in ["compile", *ORDER, "ncu", "sanitize", "runner_boot", "runner_cuda"] if k in present]
    names = ["wall", "eval_seconds", *known, *sorted(present - set(known)), "other", "outside"]
    label = {"wall": "**wall per call**", "eval_seconds": "**GPU worker**", "other": "worker, in no phase",
             "outside": "call, outside worker and compile", "runner_boot": "runner_boot (hidden unless waited)",
             "runner_cuda": "runner_cuda (hidden unless waited)"}  # fmt: skip
    for k in names:
        cells = [f"{doc['summary'][s].get(k, 0.0):.4f}" for s in stages]
        lines.append(f"| {label.get(k, k)} | " + " | ".join(cells) + " |")
    lines += ["", "## Per shape, median seconds (worker / wall)", "",
              "| shape | " + " | ".join(stages) + " | largest phases (full) |", "|---|" + "---:|" * len(stages) + "---|"]  # fmt: skip
    for shape, by_stage in doc["shapes"].items():
        cells = [f"{by_stage[s]['eval_seconds']:.3f} / {by_stage[s]['wall']:.3f}" if s in by_stage else "-"
                 for s in stages]  # fmt: skip
        last = by_stage.get("full") or next(iter(by_stage.values()))
        top = sorted(((v, k) for k, v in last.items() if k in ORDER), reverse=True)[:3]
        lines.append(
            f"| {shape} | " + " | ".join(cells) + " | " + ", ".join(f"{k} {v:.3f}" for v, k in top) + " |"
        )
    lines += ["", "## Before the first call on a shape, and cold compiles", "",
              "| shape | first call wall | prepare |", "|---|---:|---:|"]  # fmt: skip
    for r in doc["first_calls"]:
        lines.append(f"| {r['shape']} | {r['wall']:.2f} | {r['phases'].get('prepare', 0.0):.2f} |")
    lines += ["", "| family | cold compile, median s (nvcc runs) |", "|---|---:|"]
    for fam, s in doc["cold_compile"].items():
        lines.append(f"| {fam} | {s['seconds']:.2f} ({s['nvcc_seconds']:.2f}) |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m hgemm.bench.eval_cost", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--stages", default="quick,full")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--gap", type=float, default=0.0, help="seconds idle between calls")
    ap.add_argument("--max-seconds", type=float, default=200.0, help="start no call after this long")
    args = ap.parse_args(argv)
    families = args.families.split(",")
    shapes = [Shape.of(s) for s in args.shapes.split(",")]
    stages = args.stages.split(",")
    defaults = {(f, str(s)): get_family(f).default_params(s) for s in shapes for f in families}
    sources = {key: get_family(key[0]).render(p) for key, p in defaults.items() if p is not None}  # gemv: M <= 4
    started = time.perf_counter()
    built = dict(zip(sources, compile_sources(list(sources.values()))))
    print(f"compiled {len(built)} sources in {time.perf_counter() - started:.1f} s", flush=True)
    cold = {f: [c for (fam, _), c in built.items() if fam == f and c.ok and not c.cached] for f in families}
    rows: list[dict] = []
    first_calls: list[dict] = []
    planned = len(stages) * args.repeats * len(sources)
    with LocalEvaluator() as ev:
        for shape in shapes:
            if time.perf_counter() - started > args.max_seconds:
                break
            t = time.perf_counter()
            first = next(f for f in families if (f, str(shape)) in sources)
            (rec,) = ev.evaluate([sources[(first, str(shape))]], shape, stage="quick", modes=("offline",))
            first_calls.append(row(rec, time.perf_counter() - t, first, str(shape), "quick"))
            for stage in stages:
                for _ in range(args.repeats):
                    for fam in families:
                        if time.perf_counter() - started > args.max_seconds:
                            break
                        if (fam, str(shape)) not in sources:  # the family's default does not take the shape
                            continue
                        time.sleep(args.gap)
                        t = time.perf_counter()
                        (rec,) = ev.evaluate(
                            [sources[(fam, str(shape))]], shape, stage=stage, modes=MODES[stage]
                        )
                        rows.append(row(rec, time.perf_counter() - t, fam, str(shape), stage))
            done = [r for r in rows if r["shape"] == str(shape)]
            print(f"{shape}: " + ", ".join(f"{st} worker {medians(sel)['eval_seconds']:.3f} s wall "
                                           f"{medians(sel)['wall']:.3f} s" for st in stages
                                           if (sel := [r for r in done if r["stage"] == st])), flush=True)  # fmt: skip
        info = ev.gpu_info()
    today = date.today().isoformat()
    good = [r for r in rows if r["ok"]]  # medians are of accepted calls: a refusal stops early
    doc = {
        "gpu": info.name, "driver": info.driver, "cc": info.cc, "date": today,
        "how": f"The default kernel of {', '.join(families)} on {len(shapes)} shapes, `python -m hgemm.bench.eval_cost`: "
               f"per shape a warm-up call, then per stage {args.repeats} rounds of one `evaluate` call per family "
               "(one source, compiled before), back to back unless a gap is given. Seconds are medians per call.",
        "stages": stages, "gap_s": args.gap, "repeats": args.repeats, "planned": planned, "calls": len(rows),
        "failed": sum(not r["ok"] for r in rows),
        "not_accepted": sorted({f"{r['family']} {r['shape']} {r['stage']}: {r['failure_kind']}" for r in rows if not r["ok"]}),
        "summary": {st: medians(sel) for st in stages if (sel := [r for r in good if r["stage"] == st])},
        "shapes": {str(s): {st: medians(sel) for st in stages
                            if (sel := [r for r in good if r["shape"] == str(s) and r["stage"] == st])}
                   for s in shapes if any(r["shape"] == str(s) for r in good)},
        "first_calls": first_calls,
        "cold_compile": {f: {"seconds": statistics.median(c.seconds for c in cs),
                             "nvcc_seconds": statistics.median(c.compile_seconds or 0.0 for c in cs), "sources": len(cs)}
                         for f, cs in cold.items() if cs},
        "rows": rows,
    }  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"eval-cost-{gpu_tag(info.name)}-{today}"
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1) + "\n")
    text = report(doc)
    (out / f"{stem}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
