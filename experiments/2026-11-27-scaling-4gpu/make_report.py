"""The 1 vs 4 GPU sweep scaling report (bench/results/sweep-scaling-H200x4-2026-11-27.json and .png) from the runs'
own files in gpu-h200x4/ (see README.md)."""

import json
import math
import statistics
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

HERE = Path(__file__).parent / "gpu-h200x4"
OUT = Path(__file__).parents[2] / "bench" / "results"
STEM = "sweep-scaling-H200x4-2026-11-27"
PHASES = ("compile", "runner_boot", "runner_cuda", "spare_wait")


def run(name):
    d = json.loads((HERE / name).read_text())
    return d["meta"], {(r["M"], r["N"], r["K"]): r for r in d["rows"]}


def util(name):
    per = {}
    for line in (HERE / name).read_text().splitlines():
        gpu, pct = (int(x) for x in line.split(","))
        per.setdefault(gpu, []).append(pct)
    return {f"gpu{g}": round(sum(v) / len(v), 1) for g, v in sorted(per.items())}


def log_seconds(log, prefix):
    """The bracketed time of the log's first line starting with `prefix` ("... [28.7 s]"), and, for "searched",
    the search phase ("searched 64 shapes in 503 s on 1 worker(s)")."""
    for line in (HERE / log).read_text().splitlines():
        if line.startswith(prefix):
            if prefix == "searched ":
                return float(line.split(" in ")[1].split(" s ")[0])
            return float(line.rsplit("[", 1)[1].split(" s]")[0])
    return None


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def side(meta, rows, log, csv):
    walls = [r["wall_seconds"] for r in rows.values()]
    waits = [r["worker_seconds"] for r in rows.values()]
    return {
        "shapes": len(rows),
        "failed": sum(r["status"] == "failed" for r in rows.values()),
        "evaluations": sum(r["evals"] for r in rows.values()),
        "run_wall_s": meta["run_wall_seconds"],
        "workers_up_s": log_seconds(log, f"{meta['workers']} worker(s) on "),
        "search_s": log_seconds(log, "searched "),
        "sum_shape_wall_s": round(sum(walls), 1),
        "sum_worker_wait_s": round(sum(waits), 1),
        "median_shape_wall_s": round(statistics.median(walls), 2),
        "gpu_util_pct": util(csv),
        "geomean_offline": round(geomean([r["offline_speedup_best"] for r in rows.values()]), 3),
        "geomean_server": round(geomean([r["server_speedup_best"] for r in rows.values()]), 3),
    }


meta1, one = run("scale-1gpu.json")
meta4, four = run("scale-4gpu.json")
assert set(one) == set(four), "the two runs searched different shapes"
a, b = side(meta1, one, "1gpu.log", "util-1gpu.csv"), side(meta4, four, "4gpu.log", "util-4gpu.csv")
phases = json.loads((HERE / "phases.json").read_text())
report = {
    "gpu": f"{meta1['gpu']} x4, driver {meta1['driver']}",
    "date": "2026-11-27",
    "shapes": "experiments/2026-11-27-scaling-4gpu/shapes64.txt: 64 configurations of the full grid with "
    "M, N, K <= 2048 outside grid100",
    "command": "hgemm sweep --grid shapes64.txt --budget-evals 8 --import-archive "
    "bench/results/archive-grid100-r10-H100-2026-11-24.jsonl.xz --gpus 0|all (fresh HGEMM_HOME each)",
    "one_gpu": a,
    "four_gpus": b,
    "throughput_ratio_busy": round(4 * a["sum_shape_wall_s"] / b["sum_shape_wall_s"], 2),
    "throughput_ratio_search": round(a["search_s"] / b["search_s"], 2),
    "throughput_ratio_run": round(a["run_wall_s"] / b["run_wall_s"], 2),
    "target_ratio": 3.6,
    "per_evaluation_seconds": {
        label: {"eval_median": p["eval_seconds_median"], **{n: p["phases"][n]["median_s"] for n in PHASES}}
        for label, p in phases.items()
    },
}
(OUT / f"{STEM}.json").write_text(json.dumps(report, indent=1) + "\n")

fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
keys = sorted(one, key=lambda k: one[k]["wall_seconds"])
ax.plot(range(len(keys)), [one[k]["wall_seconds"] for k in keys], "o-", ms=3, label="1 GPU")
ax.plot(range(len(keys)), [four[k]["wall_seconds"] for k in keys], "s", ms=3, alpha=0.8,
        label="4 GPUs (four searches at once)")  # fmt: skip
ax.set_xlabel("shape (sorted by its 1-GPU wall time)")
ax.set_ylabel("wall seconds per shape")
ax.set_title("Per-shape wall time")
ax.legend()
names = [*PHASES, "eval_median"]
for i, label in enumerate(report["per_evaluation_seconds"]):
    vals = [report["per_evaluation_seconds"][label][n] for n in names]
    bx.bar([j + i * 0.35 for j in range(len(names))], vals, width=0.35, label=label)
bx.set_xticks([j + 0.17 for j in range(len(names))],
              ["compile", "runner boot", "runner CUDA\ncontext", "spare wait", "evaluation\n(median)"])  # fmt: skip
bx.set_ylabel("seconds per evaluation (median)")
bx.set_title("Where an evaluation waits")
bx.legend(fontsize=8)
fig.suptitle(f"hgemm sweep, 1 vs 4 GPUs, {report['gpu']}, 2026-11-27")
fig.tight_layout()
fig.savefig(OUT / f"{STEM}.png", dpi=110)
print(json.dumps(report, indent=1))
