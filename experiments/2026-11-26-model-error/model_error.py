"""How far the analytic model (agent/model.py) is from measured times, per configuration class.

Reads an archive (a .db or a jsonl export, plain or compressed) and, for every correct quick- or full-stage
record of one GPU with an offline time, compares the measured median offline time with the model's prediction
for that kernel's family, parameters and shape: the model as this working tree has it ("after") and as git
revision BASE had it ("before": its agent/model.py and the wgmma family's time factors). The prediction in a
kernel's note ("model X us") is what an older model said for the shape the kernel was first proposed for; it
is reported for the records of that shape only.

Usage: python experiments/2026-11-26-model-error/model_error.py ARCHIVE [--gpu NAME] [--base REV] [--csv FILE]

Prints markdown tables:
- the ratio measured / predicted (median, 10th and 90th percentiles, n) by family, by split-K kind (none,
  workspace, DSMEM, stream-K), by K/(M*N) class and by class of configuration within the K-heavy shapes;
- the model's ranking of each shape's configurations (all families; configurations are kernels, their time the
  median of their records): Spearman rank correlation with the measured times and the measured time of the
  model's first choice over the best measured one, over shapes with at least 4 configurations, for all shapes
  and per K/(M*N) class.
`--csv FILE` writes one row per record (shape, family, kind, measured, before, after, note) for other plots.
No GPU.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import math
import re
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from types import ModuleType

from hgemm.agent import model as model_after
from hgemm.archive.transfer import read_export
from hgemm.evaluator.kernels import FAMILIES

from hgemm.core.record import GpuInfo
from hgemm.core.shape import Shape

REPO = Path(__file__).resolve().parents[2]
GPUS = {  # what the model needs to know of each GPU in the archive
    "NVIDIA H100 80GB HBM3": GpuInfo("NVIDIA H100 80GB HBM3", "9.0", "", 132, 50 << 20, 232448),
    "NVIDIA H200": GpuInfo("NVIDIA H200", "9.0", "", 132, 60 << 20, 232448),
}
NOTE = re.compile(r"model ([0-9.]+) us")


def module_at(rev: str, path: str, name: str) -> ModuleType:
    """The module `path` of the repository as it was at git revision `rev`, imported under `name`."""
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{path}"], check=True, capture_output=True,
                            text=True).stdout  # fmt: skip
    spec = importlib.util.spec_from_loader(name, loader=None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    exec(compile(source, f"{rev}:{path}", "exec"), module.__dict__)
    return module


class Before:
    """The model and the wgmma family's time factors of revision `rev`; other families as they are now (the
    model reads only their names and shared-memory estimates)."""

    def __init__(self, rev: str) -> None:
        self.model = module_at(rev, "agent/model.py", "model_before")
        wgmma = module_at(rev, "evaluator/kernels/wgmma_family.py", "wgmma_family_before")
        self.families = {**FAMILIES, **wgmma.FAMILIES}

    def predict(self, family: str, params: dict, M: int, N: int, K: int, gpu: GpuInfo) -> float:
        return self.model.predict_us(self.families[family], params, M, N, K, gpu)


def split_kind(params: dict) -> str:
    p = {str(k).lower(): v for k, v in params.items()}
    if p.get("stream_k"):
        return "stream-K"
    if int(p.get("split_k", 1)) > 1:
        return "DSMEM split" if p.get("split_dsmem") else "workspace split"
    return "none"


def kmn_class(M: int, N: int, K: int) -> str:
    x = K / (M * N)
    if x >= 1e-2:
        return "K/(MN) >= 1e-2"
    if x >= 1e-3:
        return "1e-3 <= K/(MN) < 1e-2"
    if x >= 1e-4:
        return "1e-4 <= K/(MN) < 1e-3"
    return "K/(MN) < 1e-4"


KMN_ORDER = ["K/(MN) >= 1e-2", "1e-3 <= K/(MN) < 1e-2", "1e-4 <= K/(MN) < 1e-3", "K/(MN) < 1e-4"]


def load(path: str, gpu: str) -> list[dict]:
    kernels: dict[str, dict] = {}
    first_shape: dict[str, tuple[str, tuple[int, int, int]]] = {}
    rows = []
    for line in read_export(path):
        if line.get("type") == "kernel":
            kernels[line["hash"]] = line
        elif line.get("type") == "record":
            rec = line["record"]
            k = kernels.get(rec.get("kernel_hash"))
            if k is None:
                continue
            shape = (rec["M"], rec["N"], rec["K"])
            created = rec.get("created", "")
            if k["hash"] not in first_shape or created < first_shape[k["hash"]][0]:
                first_shape[k["hash"]] = (created, shape)
            if rec.get("gpu") != gpu or rec.get("stage") not in ("quick", "full"):
                continue
            if not rec.get("correct") or rec.get("failure_kind"):
                continue
            us = (((rec.get("modes") or {}).get("offline") or {}).get("candidate") or {}).get("median_us")
            if not us or k["family"] not in FAMILIES:
                continue
            rows.append({"hash": k["hash"], "family": k["family"], "params": k["params"], "shape": shape,
                         "stage": rec["stage"], "us": us, "note": k.get("note") or ""})  # fmt: skip
    for r in rows:  # the note's prediction was made for the shape of the kernel's first record
        m = NOTE.search(r["note"])
        r["note_us"] = float(m.group(1)) if m and first_shape[r["hash"]][1] == r["shape"] else None
    return rows


def quantile(xs: list[float], f: float) -> float:
    xs = sorted(xs)
    i = f * (len(xs) - 1)
    lo = int(i)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (i - lo)


def cell(ratios: list[float]) -> str:
    if not ratios:
        return "-"
    return f"{statistics.median(ratios):.2f} ({quantile(ratios, 0.1):.2f}-{quantile(ratios, 0.9):.2f})"


def table(title: str, rows: list[dict], key, order: list[str] | None = None) -> None:
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[key(r)].append(r)
    print(f"\n{title}\n")
    print("| class | n | before: measured / predicted, median (p10-p90) | after | note (older model, same shape) |")
    print("|---|---:|---|---|---|")
    for name in order or sorted(groups):
        g = groups.get(name, [])
        if not g:
            continue
        before = [r["us"] / r["before"] for r in g if math.isfinite(r["before"])]
        after = [r["us"] / r["after"] for r in g if math.isfinite(r["after"])]
        notes = [r["us"] / r["note_us"] for r in g if r["note_us"]]
        note = f"{cell(notes)}, n={len(notes)}" if notes else "-"
        print(f"| {name} | {len(g)} | {cell(before)} | {cell(after)} | {note} |")


def ranking(rows: list[dict], which: str) -> dict[tuple[int, int, int], tuple[float | None, float]]:
    """Per shape with >= 4 configurations: (Spearman of predicted vs measured, measured time of the model's
    first choice / best measured time)."""
    by: dict[tuple, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    pred: dict[tuple, dict[str, float]] = defaultdict(dict)
    for r in rows:
        by[r["shape"]][r["hash"]].append(r["us"])
        pred[r["shape"]][r["hash"]] = r[which]
    out = {}
    for shape, kernels in by.items():
        hashes = [h for h in kernels if math.isfinite(pred[shape][h])]
        if len(hashes) < 4:
            continue
        times = [statistics.median(kernels[h]) for h in hashes]
        p = [pred[shape][h] for h in hashes]
        first = min(range(len(p)), key=p.__getitem__)
        out[shape] = (model_after.spearman(p, times), times[first] / min(times))
    return out


def rank_stats(res: dict, shapes: list) -> tuple[float, float, float]:
    """Median Spearman, geomean and worst of first choice / best over `shapes`."""
    rho = statistics.median(res[s][0] for s in shapes if res[s][0] is not None)
    regret = math.exp(statistics.fmean(math.log(res[s][1]) for s in shapes))
    return rho, regret, max(res[s][1] for s in shapes)


def rank_table(rows: list[dict]) -> None:
    before, after = ranking(rows, "before"), ranking(rows, "after")
    print("\nRanking of each shape's configurations (all families; shapes with at least 4 configurations)\n")
    print("| shapes | n | median Spearman before | after | first choice / best, geomean before | after "
          "| worst before | after |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    classes = {"all": lambda s: True} | {c: (lambda s, c=c: kmn_class(*s) == c) for c in KMN_ORDER}
    for name, keep in classes.items():
        shapes = [s for s in before if keep(s) and s in after]
        if not shapes:
            continue

        b, a = rank_stats(before, shapes), rank_stats(after, shapes)
        print(f"| {name} | {len(shapes)} | {b[0]:.2f} | {a[0]:.2f} | {b[1]:.3f} | {a[1]:.3f} | {b[2]:.2f} | "
              f"{a[2]:.2f} |")
    worse = [(s, before[s], after[s]) for s in before if s in after and after[s][1] > before[s][1] * 1.02]
    better = [s for s in before if s in after and after[s][1] < before[s][1] / 1.02]
    print(f"\nFirst choice more than 2% better on {len(better)} shapes, more than 2% worse on {len(worse)}:")
    for s, b, a in sorted(worse, key=lambda x: x[2][1] / x[1][1], reverse=True):
        print(f"- {s[0]}x{s[1]}x{s[2]}: first choice / best {b[1]:.3f} -> {a[1]:.3f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("archive")
    ap.add_argument("--gpu", default="NVIDIA H100 80GB HBM3", choices=sorted(GPUS))
    ap.add_argument("--base", default="2150afa", help="git revision of the 'before' model")
    ap.add_argument("--csv", default=None)
    args = ap.parse_args(argv)
    gpu = GPUS[args.gpu]
    before = Before(args.base)
    rows = load(args.archive, args.gpu)
    for r in rows:
        M, N, K = r["shape"]
        r["before"] = before.predict(r["family"], r["params"], M, N, K, gpu)
        r["after"] = model_after.predict_us(FAMILIES[r["family"]], r["params"], Shape(M, N, K), gpu)
        r["kind"] = split_kind(r["params"])
    shapes = {r["shape"] for r in rows}
    print(f"{args.gpu}: {len(rows)} correct quick- and full-stage records with an offline time, {len(shapes)} "
          f"shapes; 'before' is revision {args.base}")
    table("By family and split-K kind", rows, lambda r: f"{r['family']}, {r['kind']}")
    table("By split-K kind (all families)", rows, lambda r: r["kind"],
          ["none", "workspace split", "DSMEM split", "stream-K"])  # fmt: skip
    table("By K/(M*N) class", rows, lambda r: kmn_class(*r["shape"]), KMN_ORDER)
    heavy = [r for r in rows if kmn_class(*r["shape"]) == KMN_ORDER[0]]
    table("K/(M*N) >= 1e-2, by family and split-K kind", heavy, lambda r: f"{r['family']}, {r['kind']}")
    wg = [r for r in rows if r["family"] == "wgmma"]
    table("wgmma, by TMA-store epilogue and k-blocks per CTA", wg, epilogue_class)
    rank_table(rows)
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["M", "N", "K", "family", "kind", "stage", "hash", "measured_us", "before_us", "after_us",
                        "note_us"])  # fmt: skip
            for r in rows:
                w.writerow([*r["shape"], r["family"], r["kind"], r["stage"], r["hash"], f"{r['us']:.3f}",
                            f"{r['before']:.3f}", f"{r['after']:.3f}", r["note_us"] or ""])  # fmt: skip
    return 0


def epilogue_class(r: dict) -> str:
    p = {**{"split_k": 1, "epilogue": 0}, **r["params"]}
    M, N, K = r["shape"]
    k_blocks = math.ceil(math.ceil(K / p["split_k"]) / 64)
    depth = "<= 8" if k_blocks <= 8 else "9-32" if k_blocks <= 32 else "33-128" if k_blocks <= 128 else "> 128"
    store = "TMA-store epilogue" if p["epilogue"] and p["split_k"] == 1 else "direct stores"
    return f"{store}, k-blocks per CTA {depth}"


if __name__ == "__main__":
    sys.exit(main())
