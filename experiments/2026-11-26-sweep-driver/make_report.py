"""The 1 vs 2 GPU sweep scaling report (bench/results/sweep-scaling-H200x2-2026-11-26.json and .png) from the
runs' own files in gpu-h200x2-full/ (see NOTES.md)."""

import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).parent / "gpu-h200x2-full"
OUT = Path(__file__).parents[2] / "bench" / "results"
STEM = "sweep-scaling-H200x2-2026-11-26"


def run(name):
    d = json.loads((HERE / name).read_text())
    return d["meta"], {(r["M"], r["N"], r["K"]): r for r in d["rows"]}


def util(name):
    per = {}
    for line in (HERE / name).read_text().splitlines():
        gpu, pct = (int(x) for x in line.split(","))
        per.setdefault(gpu, []).append(pct)
    return {f"gpu{g}": round(sum(v) / len(v), 1) for g, v in sorted(per.items())}


def search_seconds(log):
    for line in (HERE / log).read_text().splitlines():
        if line.startswith("searched "):  # "searched 64 shapes in 385 s on 1 worker(s)"
            return float(line.split(" in ")[1].split(" s ")[0])
    return None


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


meta1, one = run("scale-1gpu.json")
meta2, two = run("scale-2gpu-kill.json")
common = [k for k in one if k in two and one[k]["wall_seconds"] and two[k]["wall_seconds"]]
w1 = sum(one[k]["wall_seconds"] for k in common)
w2 = sum(two[k]["wall_seconds"] for k in common)
s1, s2 = search_seconds("1gpu.log"), search_seconds("2gpu-kill.log")
phases = json.loads((HERE / "phases.json").read_text())
report = {
    "gpu": f"{meta1['gpu']} x2, driver {meta1['driver']}",
    "date": "2026-11-26",
    "shapes": "experiments/2026-11-25-h200x2-scaling/shapes64.txt: 64 configurations of the full grid with "
    "M, N, K <= 2048 outside grid100",
    "command": "hgemm sweep --grid shapes64.txt --budget-evals 8 --import-archive "
    "bench/results/archive-grid100-r10-H100-2026-11-24.jsonl.xz --gpus 0|all (fresh HGEMM_HOME each)",
    "one_gpu": {
        "shapes": len(one),
        "failed": sum(r["status"] == "failed" for r in one.values()),
        "run_wall_s": meta1["run_wall_seconds"],
        "search_s": s1,
        "gpu_util_pct": util("util-1gpu.csv"),
    },
    "two_gpus": {
        "shapes": len(two),
        "failed": sum(r["status"] == "failed" for r in two.values()),
        "run_wall_s": meta2["run_wall_seconds"],
        "search_s": s2,
        "gpu_util_pct": util("util-2gpu-kill.csv"),
        "killed": "the GPU 1 worker, SIGKILL at 60 s; its shape retried on the replacement worker",
    },
    "common_shapes": len(common),
    "sum_wall_1gpu_s": round(w1, 1),
    "sum_wall_2gpu_s": round(w2, 1),
    "throughput_ratio_busy": round(2 * w1 / w2, 2),
    "throughput_ratio_search": round(s1 / s2, 2),
    "throughput_ratio_run": round(meta1["run_wall_seconds"] / meta2["run_wall_seconds"], 2),
    "target_ratio": 1.8,
    "geomean_offline": {
        "1gpu": round(geomean([one[k]["offline_speedup_best"] for k in common]), 3),
        "2gpu": round(geomean([two[k]["offline_speedup_best"] for k in common]), 3),
    },
    "geomean_server": {
        "1gpu": round(geomean([one[k]["server_speedup_best"] for k in common]), 3),
        "2gpu": round(geomean([two[k]["server_speedup_best"] for k in common]), 3),
    },
    "per_evaluation_seconds": {
        label: {
            "eval_median": p["eval_seconds_median"],
            **{
                n: p["phases"][n]["median_s"] for n in ("runner_boot", "runner_cuda", "spare_wait", "compile")
            },
        }
        for label, p in phases.items()
    },
}
(OUT / f"{STEM}.json").write_text(json.dumps(report, indent=1) + "\n")

fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
keys = sorted(common, key=lambda k: one[k]["wall_seconds"])
ax.plot(range(len(keys)), [one[k]["wall_seconds"] for k in keys], "o-", ms=3, label="1 GPU")
ax.plot(
    range(len(keys)),
    [two[k]["wall_seconds"] for k in keys],
    "s",
    ms=3,
    alpha=0.8,
    label="2 GPUs (two searches at once)",
)
killed = (64, 128, 512)  # the shape the killed worker held (2gpu-kill.log): its wall includes the retry
if killed in keys:
    ax.annotate(
        "retried after the kill",
        (keys.index(killed), two[killed]["wall_seconds"]),
        fontsize=8,
        xytext=(8, -4),
        textcoords="offset points",
    )
ax.set_xlabel("shape (sorted by its 1-GPU wall time)")
ax.set_ylabel("wall seconds per shape")
ax.set_title("Per-shape wall time")
ax.legend()
names = ["runner_boot", "runner_cuda", "spare_wait", "eval_median"]
labels = list(report["per_evaluation_seconds"])
for i, label in enumerate(labels):
    vals = [report["per_evaluation_seconds"][label][n] for n in names]
    bx.bar([j + i * 0.2 for j in range(len(names))], vals, width=0.2, label=label)
bx.set_xticks(
    [j + 0.3 for j in range(len(names))],
    ["runner boot", "runner CUDA\ncontext", "spare wait", "evaluation\n(median)"],
)
bx.set_ylabel("seconds per evaluation (median)")
bx.set_title("Where an evaluation waits")
bx.legend(fontsize=7)
fig.suptitle(f"hgemm sweep, 1 vs 2 GPUs, {report['gpu']}, 2026-11-26")
fig.tight_layout()
fig.savefig(OUT / f"{STEM}.png", dpi=110)
print(json.dumps(report, indent=1))
