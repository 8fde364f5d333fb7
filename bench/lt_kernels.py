"""Which kernels cuBLASLt runs for a shape, and how long each takes alone under Nsight Compute.

Knowing the autotuned algorithm's tile, stages and cluster says what our families would need to match it.

Usage: python -m hgemm.bench.lt_kernels 12288x4096x512,16384x16384x1024 [--out bench/results/lt-kernels.json]

- Per shape, the tool runs itself under `ncu` (`--profile-from-start off`): the child builds the evaluator's
  baselines (cuBLASLt heuristic = the plan's first algorithm, autotuned = the fastest in server timing), warms
  both up, then launches each once inside the profiled range.
- One output entry per profiled kernel, in launch order (the heuristic's kernels first), with its ncu
  duration, grid and cluster shape; ncu's units row and thousands separators are handled.
- Needs `ncu` on PATH and the cuBLASLt baselines (the `gpu` extra); exits with the reason otherwise.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

METRICS = "gpu__time_duration.sum,launch__grid_size,launch__cluster_dim_x,launch__cluster_dim_y"
NAMES = ("lt_heuristic", "lt_autotuned")


def child(shape: str) -> None:
    """Launch the heuristic and the autotuned algorithm once each inside the profiled range."""
    import torch
    from hgemm.evaluator.baselines import Baselines

    M, N, K = (int(x) for x in shape.split("x"))
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    B = torch.randn(K, N, device="cuda", dtype=torch.float16)
    stream = torch.cuda.Stream()  # graph capture (autotuning) needs a non-default stream
    torch.cuda.set_stream(stream)
    lt = Baselines.on_tensors(A, B, B.t().contiguous(), "lt-kernels", stream, 50 << 20)
    if lt.missing:
        raise SystemExit(f"cuBLASLt baselines unavailable: {lt.missing}")
    for name in NAMES:  # warm-up outside the range
        lt.contenders[name]()
    torch.cuda.synchronize()
    print(json.dumps({"lt_algorithms": lt.lt_count, "autotuned_index": lt.lt_best_index}), flush=True)
    torch.cuda.profiler.start()
    for name in NAMES:
        lt.contenders[name]()
        torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def parse(stdout: str) -> tuple[dict, list[dict]]:
    """The child's JSON line and one entry per profiled kernel from ncu's raw CSV (a units row has no ID;
    ncu writes numbers with thousands separators)."""
    info = next((json.loads(x) for x in stdout.splitlines() if x.startswith("{")), {})
    table = "\n".join(x for x in stdout.splitlines() if x.startswith('"'))
    kernels = [
        {"kernel": r["Kernel Name"], "ncu_us": float(r["gpu__time_duration.sum"].replace(",", "")) / 1000.0,
         "grid": r["launch__grid_size"], "cluster": f"{r['launch__cluster_dim_x']}x{r['launch__cluster_dim_y']}"}
        for r in csv.DictReader(io.StringIO(table)) if r.get("ID", "").isdigit()
    ]  # fmt: skip
    return info, kernels


def profile(shape: str, ncu: str) -> dict:
    cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--csv", "--page", "raw",
           "--metrics", METRICS, sys.executable, "-m", "hgemm.bench.lt_kernels", "--child", shape]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    info, kernels = parse(out.stdout)
    if not kernels:
        raise SystemExit(f"{shape}: ncu returned no kernels:\n{(out.stderr or out.stdout)[-1500:]}")
    return {"shape": shape, **info, "kernels": kernels}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hgemm.bench.lt_kernels", description=__doc__.splitlines()[0])
    ap.add_argument("shapes", help="comma-separated MxNxK list")
    ap.add_argument("--out", type=Path, default=Path("bench/results/lt-kernels.json"))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.shapes)
        return 0
    ncu = shutil.which("ncu")
    if ncu is None:
        raise SystemExit("ncu (Nsight Compute) is not on PATH")
    rows = []
    for shape in args.shapes.split(","):
        row = profile(shape, ncu)
        rows.append(row)
        for k in row["kernels"]:  # heuristic's kernels first, then the autotuned algorithm's
            print(f"{shape:>18} {k['ncu_us']:9.1f} us  grid {k['grid']:>4}  cluster {k['cluster']}  {k['kernel'][:70]}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    doc = {"date": time.strftime("%Y-%m-%d"), "rows": rows}
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
