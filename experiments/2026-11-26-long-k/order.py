"""Is the runner's slow long-K figure a matter of order? sandbox_ab.py found the candidate at the best baseline's
time in its first evaluator session (full sandbox) and 1.5x slower in every later one (any sandbox variant), while
the same library timed in the judge stayed at the baseline's time throughout. Here: evaluator sessions one after
another in this process, the first with a variant that was slow before; then a session in a fresh process; then
one more here. Before each session: the GPU's compute processes and this host's Python processes.

Usage (one GPU): python order.py OUT_DIR   (python order.py --one OUT_DIR runs one session, for the fresh process)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from probe import BASE

SHAPE = (4096, 16384, 16384)
HERE = os.path.dirname(os.path.abspath(__file__))


def snapshot() -> dict:
    gpu = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip().splitlines()  # fmt: skip
    ps = subprocess.run(["ps", "-eo", "pid,ppid,stat,etimes,args"], capture_output=True, text=True).stdout.splitlines()
    python = [line[:160] for line in ps if "python" in line and "ps -eo" not in line]
    return {"gpu_apps": gpu, "python": python}


def session(variant: str, label: str) -> dict:
    from hgemm.evaluator.compile import compile_trusted
    from hgemm.evaluator.kernels import get_family
    from hgemm.evaluator.local import LocalEvaluator
    from hgemm.evaluator.worker import Worker

    source = get_family("wgmma").render(BASE)
    os.environ["HGEMM_EXPERIMENT_LIB"] = compile_trusted(source).lib_path
    os.environ["HGEMM_EXPERIMENT_JAIL"] = variant
    snap = snapshot()
    with LocalEvaluator() as ev:
        ev.worker = Worker(session="jails:OursInJudge")
        rec = ev.evaluate([source], SHAPE, stage="full", modes=("offline",))[0]
    off = rec.modes.get("offline")
    row = {"label": label, "variant": variant, "pid": os.getpid(), "ok": rec.ok, "failure": rec.failure_message,
           "median_us": off.candidate.median_us if off else None, "p10_us": off.candidate.p10_us if off else None,
           "p90_us": off.candidate.p90_us if off else None,
           "baselines_us": {k: round(v.median_us, 1) for k, v in off.baselines.items()} if off else None,
           "before": snap}  # fmt: skip
    b = row["baselines_us"] or {}
    print(f"{label:28s} {variant:14s} ours {row['median_us'] or 0:7.0f} (p10 {row['p10_us'] or 0:6.0f}, p90 "
          f"{row['p90_us'] or 0:6.0f})  in judge {b.get('ours_in_judge', 0):6.0f}  lt {b.get('lt_heuristic', 0):6.0f}  "
          f"gpu apps before: {len(snap['gpu_apps'])}, python procs: {len(snap['python'])}", flush=True)  # fmt: skip
    return row


def main(out_dir: str) -> None:
    rows = []
    plan = [("no-namespaces", "1st session"), ("sandbox", "2nd session"), ("no-namespaces", "3rd session"),
            ("sandbox", "4th session")]
    for variant, label in plan:
        rows.append(session(variant, label))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([HERE, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, __file__, "--one", out_dir], env=env, capture_output=True, text=True)
    print(done.stdout.strip(), done.stderr.strip()[-400:] if done.returncode else "", flush=True)
    fresh = Path(out_dir, "order-fresh.json")
    if fresh.exists():
        rows.append(json.loads(fresh.read_text()))
    rows.append(session("sandbox", "here again, after it"))
    Path(out_dir, "order.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        row = session("sandbox", "fresh process, 1st session")
        Path(sys.argv[2], "order-fresh.json").write_text(json.dumps(row))
    else:
        main(sys.argv[1])
