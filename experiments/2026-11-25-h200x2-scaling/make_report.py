"""The 1 vs 2 GPU sweep scaling report from the runs' own sweep JSON files (see README.md)."""

import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).parent
OUT = HERE.parents[1] / "bench" / "results"
STEM = "sweep-scaling-H200x2-2026-11-25"


def rows(name):
    return {(r["M"], r["N"], r["K"]): r for r in json.loads((HERE / name).read_text())["rows"]}


def util(name):
    per = {}
    for line in (HERE / name).read_text().splitlines():
        gpu, pct = (int(x) for x in line.split(","))
        per.setdefault(gpu, []).append(pct)
    return {f"gpu{g}": round(sum(v) / len(v), 1) for g, v in sorted(per.items())}


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


one = rows("run-d-1gpu.json")
runs = {
    "D: 2 GPUs, worker killed at 45 s (same host as the 1-GPU run)": ("run-d-2gpu-kill45.json", 201.0, "run-d-util-2gpu.csv"),
    "E: 2 GPUs, worker killed at 70 s (another host of the same kind)": ("run-e-2gpu-kill70.json", 341.5, "run-e-util-2gpu-kill.csv"),
}
report = {
    "gpu": "NVIDIA H200 x2, driver 580.159.04",
    "date": "2026-11-25",
    "shapes": "shapes64.txt: 64 configurations of the full grid with M, N, K <= 2048 outside grid100",
    "command": "hgemm sweep --grid shapes64.txt --budget-evals 8 --import-archive "
    "bench/results/archive-grid100-r10-H100-2026-11-24.jsonl.xz --gpus 0|all (fresh HGEMM_HOME each)",
    "one_gpu": {"elapsed_s": 251.4, "shapes": len(one), "sum_wall_s": round(sum(r["wall_seconds"] for r in one.values()), 1),
                "gpu_util_pct": util("run-d-util-1gpu.csv")},
    "two_gpus": {},
}
for label, (name, elapsed, ucsv) in runs.items():
    two = rows(name)
    common = [k for k in one if k in two]
    w1 = sum(one[k]["wall_seconds"] for k in common)
    w2 = sum(two[k]["wall_seconds"] for k in common)
    report["two_gpus"][label] = {
        "elapsed_s": elapsed, "shapes": len(two), "failed": sum(r["status"] == "failed" for r in two.values()),
        "gpu_util_pct": util(ucsv),
        "common_shapes": len(common), "sum_wall_1gpu_s": round(w1, 1), "sum_wall_2gpu_s": round(w2, 1),
        "throughput_ratio_busy": round(2 * w1 / w2, 2),
        "throughput_ratio_elapsed": round((len(two) / elapsed) / (len(one) / 251.4), 2),
        "geomean_offline_1gpu": round(geomean([one[k]["offline_speedup_best"] for k in common]), 3),
        "geomean_offline_2gpu": round(geomean([two[k]["offline_speedup_best"] for k in common]), 3),
        "geomean_server_1gpu": round(geomean([one[k]["server_speedup_best"] for k in common]), 3),
        "geomean_server_2gpu": round(geomean([two[k]["server_speedup_best"] for k in common]), 3),
    }
(OUT / f"{STEM}.json").write_text(json.dumps(report, indent=1) + "\n")

fig, ax = plt.subplots(figsize=(7, 3.8))
keys = sorted(one, key=lambda k: one[k]["wall_seconds"])
ax.plot(range(len(keys)), [one[k]["wall_seconds"] for k in keys], "o-", label="1 GPU")
for (label, (name, _, _)), marker in zip(runs.items(), ("s", "^")):
    two = rows(name)
    ax.plot(range(len(keys)), [two[k]["wall_seconds"] if k in two else float("nan") for k in keys], marker,
            label=label.split(":")[0] + ": 2 GPUs", alpha=0.8)
ax.set_xlabel("shape (sorted by its 1-GPU wall time)")
ax.set_ylabel("wall seconds per shape")
ax.set_title("Per-shape wall time, 1 vs 2 concurrent GPU workers (H200 x2)")
ax.legend()
fig.tight_layout()
fig.savefig(OUT / f"{STEM}.png", dpi=110)
print(json.dumps(report, indent=1))
