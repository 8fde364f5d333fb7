"""Why are wgmma kernels slow on K = 16384? One shape pair that differs only in K, one long-K shape; variants
of the 128x256 2x1-cluster kernel (raster group, persistence, cluster, tile width), timed offline by the
evaluator beside the baselines; Nsight Compute's DRAM bytes and L2 hit rate for ours and for cuBLAS.

Usage (one GPU): python probe.py OUT_DIR
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from hgemm.evaluator import profile
from hgemm.evaluator.kernels import get_family
from hgemm.evaluator.local import LocalEvaluator

from hgemm.core.shape import Shape

SHAPES = [(1024, 8192, 8192), (1024, 8192, 16384), (4096, 16384, 16384)]
BASE = {"bm": 128, "bn": 256, "cluster_m": 2, "consumers": 2, "epi_panels": 2, "epilogue": 1, "group_m": 8,
        "persistent": 1, "pingpong": 0, "split_dsmem": 0, "split_k": 1, "stages": 4, "stream_k": 0}  # fmt: skip
VARIANTS = {
    "base": {},
    "group1": {"group_m": 1},
    "group2": {"group_m": 2},
    "group4": {"group_m": 4},
    "group16": {"group_m": 16},
    "nonpersistent": {"persistent": 0},
    "cluster1": {"cluster_m": 1},
    "bn128": {"bn": 128, "stages": 6},
}
NCU = {
    "duration_ns": "gpu__time_duration.sum",
    "dram_read_bytes": "dram__bytes_read.sum",
    "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
    "sm_hz": "sm__cycles_elapsed.avg.per_second",
    "l2_read_sectors": "lts__t_sectors_srcunit_tex_op_read.sum",
}
TORCH = """
import torch
M, N, K = {M}, {N}, {K}
a = torch.randn(M, K, device="cuda", dtype=torch.half); bt = torch.randn(N, K, device="cuda", dtype=torch.half)
for _ in range(4): c = a @ bt.t()
torch.cuda.synchronize()
"""


def cublas_ncu(shape) -> dict:
    M, N, K = shape
    cmd = ["ncu", "--clock-control", "none", "--csv", "--page", "raw", "--launch-skip", "2", "--launch-count", "1",
           "--metrics", ",".join(NCU.values()), sys.executable, "-c", TORCH.format(M=M, N=N, K=K)]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    lines = [line for line in out.stdout.splitlines() if line.startswith('"')]
    if len(lines) < 3:
        return {"error": (out.stderr or out.stdout)[-400:]}
    import csv

    rows = list(csv.reader(lines))
    head, row = rows[0], rows[-1]
    got = {"kernel": row[head.index("Kernel Name")][:80]}
    for name, metric in NCU.items():
        if metric in head:
            try:
                got[name] = float(row[head.index(metric)].replace(",", ""))
            except ValueError:
                got[name] = row[head.index(metric)]
    return got


def main(out_dir: str) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    profile.NCU_METRICS.clear()
    profile.NCU_METRICS.update(NCU)
    family = get_family("wgmma")
    results = []
    with LocalEvaluator() as ev:
        for shape in SHAPES:
            names, sources = [], []
            for name, change in VARIANTS.items():
                params = {**BASE, **change}
                problem = family.check(params, Shape(*shape), None)
                if problem:
                    print(f"{shape} {name}: {problem}")
                    continue
                names.append(name)
                sources.append(family.render(params))
            t = time.time()
            records = ev.evaluate(sources, shape, stage="full", modes=("offline",))
            ncu_rec = ev.evaluate([sources[0]], shape, stage="full", modes=("offline",), ncu=True)[0]
            for name, rec in zip(names, records, strict=True):
                off = rec.modes.get("offline")
                row = {"shape": shape, "variant": name, "ok": rec.ok, "failure": rec.failure_message,
                       "us": off.candidate.median_us if off else None,
                       "baselines_us": {k: v.median_us for k, v in off.baselines.items()} if off else None,
                       "speedup_best": off.speedup_best if off else None}  # fmt: skip
                results.append(row)
                print(shape, name, row["us"], row["speedup_best"], flush=True)
            results.append({"shape": shape, "variant": "base+ncu", "ncu": ncu_rec.ncu})
            results.append({"shape": shape, "variant": "cublas_tn+ncu", "ncu": cublas_ncu(shape)})
            print(shape, "ncu ours", ncu_rec.ncu, "\n  cublas", results[-1]["ncu"], f"[{time.time() - t:.0f} s]", flush=True)
            (out / "long-k.json").write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main(sys.argv[1])
