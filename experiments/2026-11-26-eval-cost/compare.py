"""Before/after table and plot of evaluation cost from `python -m hgemm.bench.eval_cost` runs.

    python compare.py --before before-r1.json before-r2.json --after after-r1.json after-r2.json --out DIR

Pools the calls of each side's runs (accepted calls only) and reports, per stage, the median wall per call and
GPU-worker seconds, with the after/before ratio; writes eval-cost-<gpu>-<date>.{md,json,png} to --out."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def pooled(paths: list[str]) -> tuple[dict, list[dict]]:
    docs = [json.loads(Path(p).read_text()) for p in paths]
    return docs[0], [r for d in docs for r in d["rows"] if r["ok"]]


def medians(rows: list[dict], stage: str) -> dict[str, float]:
    sel = [r for r in rows if r["stage"] == stage]
    names = sorted({k for r in sel for k in r["phases"]})
    out = {k: statistics.median(r[k] for r in sel) for k in ("wall", "eval_seconds")}
    out.update({k: statistics.median(r["phases"].get(k, 0.0) for r in sel) for k in names})
    out["calls"] = len(sel)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", nargs="+", required=True)
    ap.add_argument("--after", nargs="+", required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--old-wall", type=float, default=0.33, help="v0.10.0's median wall per call (earlier report)")
    args = ap.parse_args()
    head, before = pooled(args.before)
    _, after = pooled(args.after)
    stages = head["stages"]
    summary = {st: {"before": medians(before, st), "after": medians(after, st)} for st in stages}
    tag = "H100" if "H100" in head["gpu"] else head["gpu"].replace(" ", "-")
    stem = f"eval-cost-{tag}-{head['date']}"
    lines = [f"# Evaluation cost per candidate on {head['gpu']} (driver {head['driver']}), {head['date']}", "",
             head["how"], "",
             f"Before: the evaluator as released before this change; after: with runners started ahead. "
             f"{len(args.before)} runs of each, alternated (before, after, before, after) on one machine; "
             f"{len(before)} and {len(after)} accepted calls, none refused.", "",
             "| stage | median wall per call, before | after | after/before | GPU worker, before | after |",
             "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for st in stages:
        b, a = summary[st]["before"], summary[st]["after"]
        lines.append(f"| {st} | {b['wall']:.3f} s | {a['wall']:.3f} s | {a['wall'] / b['wall']:.2f} | "
                     f"{b['eval_seconds']:.3f} s | {a['eval_seconds']:.3f} s |")  # fmt: skip
    full = summary.get("full", {}).get("after")
    if full:
        lines += ["", f"Against the evaluator before the integrity rules (v0.10.0: {args.old_wall:.2f} s median wall "
                  f"per full-stage call on an H100, 2026-11-24, `evaluator-protocol-H100-2026-11-24.md`, a different "
                  f"set of shapes and families), the full stage now costs {full['wall'] / args.old_wall:.2f}x."]  # fmt: skip
    a = summary["full"]["after"]
    top = sorted(((v, k) for k, v in a.items() if k not in ("wall", "eval_seconds", "calls")), reverse=True)[:8]
    lines += ["", "Largest phases after, full stage (median seconds; runner_boot and runner_cuda overlap earlier "
              "calls and count only where waited for, as spare_wait or runner_wait):", "",
              *(f"- {k}: {v:.3f}" for v, k in top)]  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"gpu": head["gpu"], "driver": head["driver"], "date": head["date"], "how": head["how"],
           "runs": {"before": args.before, "after": args.after}, "summary": summary,
           "v0_10_0_wall_full": args.old_wall}  # fmt: skip
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.2))
    x = range(len(stages))
    ax.bar([i - 0.2 for i in x], [summary[s]["before"]["wall"] for s in stages], 0.4, label="before")
    ax.bar([i + 0.2 for i in x], [summary[s]["after"]["wall"] for s in stages], 0.4, label="after")
    ax.axhline(args.old_wall, color="grey", ls="--", lw=1, label="v0.10.0, full stage")
    ax.set_xticks(list(x), stages)
    ax.set_ylabel("median wall per evaluate call (s)")
    ax.set_title(f"Evaluation cost, {tag}, {head['date']}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / f"{stem}.png", dpi=120)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
