"""What the timing rules change: honest kernels' and the baselines' times with the rules and without them.

Usage: python -m hgemm.bench.timing_rules [--out bench/results] [--families wgmma,mma_ms,small]
       [--shapes 128x128x128,...] [--rounds 4]

- Per shape, each family's default kernel is checked once, then timed `--rounds` times under each protocol
  of evaluator/judge.py (PROTOCOLS), in a new random order every round, with the four baselines sampled
  beside it exactly as in an evaluation (full stage: offline and server).
  - rules: what every evaluation uses (new input values before every sample, every timed launch's output
    checked through its witnesses, the inputs checked after, the offline ring of one A and C per launch);
  - bare: the same graphs on inputs given once, nothing checked;
  - one_slot: bare, with every launch of the offline graph on slot 0's A and C (offline before the rules).
- Per contender, mode and protocol: the median over rounds of each round's median. Reported: rules / bare
  (what the sampling rules change) and rules / one_slot (that and the ring), and as noise the spread of the
  rules protocol's round medians (largest over smallest).
- Writes timing-rules-<gpu>-<date>.{json,md,png} to --out, with GPU name, driver and date. Needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
from datetime import date
from pathlib import Path

from hgemm.bench.eval_cost import gpu_tag
from hgemm.evaluator.compile import compile_sources
from hgemm.evaluator.judge import PROTOCOLS
from hgemm.evaluator.kernels import get_family
from hgemm.evaluator.local import LocalEvaluator, _check_timeout

from hgemm.core.shape import Shape

SHAPES = ["128x128x128", "512x512x512", "1024x1024x1024", "2048x2048x2048", "4096x4096x128", "256x4096x1024",
          "4096x4096x4096", "16x4608x3584"]  # fmt: skip
FAMILIES = ["wgmma", "mma_ms", "small"]
MODES = ["offline", "server"]
BAND = 0.02


def time_shape(ev: LocalEvaluator, libs: dict[str, str], shape: Shape, rounds: int, rng: random.Random) -> list[dict]:
    """Rows of (family, contender, mode, protocol, per-round medians) for one shape."""
    ev._prepare(shape)
    rows: dict[tuple, list[float]] = {}
    slots = ev.prepared["slots"]
    for family, lib in libs.items():
        cid = f"{family}-{shape}"
        checked = ev.worker.request("check", 60.0 + 8 * _check_timeout(shape), cid=cid, lib=lib, stage="full")
        if checked["failure"]:
            print(f"  {family} {shape}: not accepted: {checked['failure'][0]}", flush=True)
            continue
        for _ in range(rounds):
            for protocol in rng.sample(PROTOCOLS, len(PROTOCOLS)):
                reply = ev.worker.request("time", 300.0 + 4 * _check_timeout(shape), cid=cid, modes=MODES,
                                          stage="full", protocol=protocol)
                if "failure" in reply or "disturbed" in reply:
                    raise SystemExit(f"{family} {shape} {protocol}: {reply.get('failure') or reply.get('disturbed')}")
                for mode in MODES:
                    for contender, stats in reply[mode].items():
                        rows.setdefault((family, contender, mode, protocol), []).append(stats["median_us"])
        ev.worker.request("forget", 10.0, cid=cid)
    return [{"shape": str(shape), "slots": slots, "family": f, "contender": c, "mode": m, "protocol": p,
             "round_medians": v} for (f, c, m, p), v in rows.items()]  # fmt: skip


def summarise(rows: list[dict]) -> dict:
    """Per (shape, family, contender, mode): the protocols' medians and the ratios to the rules' one.
    Baselines appear once per family's run; their entries are kept per family (they are separate timings)."""
    table: dict[tuple, dict] = {}
    for r in rows:
        key = (r["shape"], r["family"], r["contender"], r["mode"])
        entry = table.setdefault(key, {"shape": r["shape"], "slots": r["slots"], "family": r["family"],
                                       "contender": r["contender"], "mode": r["mode"]})  # fmt: skip
        entry[r["protocol"]] = statistics.median(r["round_medians"])
        if r["protocol"] == "rules":
            entry["noise"] = max(r["round_medians"]) / min(r["round_medians"]) - 1.0
    out = []
    for e in table.values():
        e["rules_over_bare"] = e["rules"] / e["bare"]
        if e["mode"] == "offline":
            e["rules_over_one_slot"] = e["rules"] / e["one_slot"]
        out.append(e)
    return out


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def totals(entries: list[dict], key: str) -> dict:
    sel = [e for e in entries if key in e]
    out = {}
    for who, pick in (("candidates", lambda e: e["contender"] == "candidate"),
                      ("baselines", lambda e: e["contender"] != "candidate")):  # fmt: skip
        for mode in MODES:
            xs = [e[key] for e in sel if pick(e) and e["mode"] == mode]
            if xs:
                out[f"{who} {mode}"] = {"n": len(xs), "geomean": geomean(xs),
                                        "within_band": sum(abs(x - 1) < BAND for x in xs),
                                        "worst": max(xs, key=lambda x: abs(x - 1)),
                                        "noise_median": statistics.median(e["noise"] for e in sel
                                                                          if pick(e) and e["mode"] == mode)}  # fmt: skip
    return out


def report(doc: dict) -> str:
    lines = [f"# What the timing rules change, on {doc['gpu']} (driver {doc['driver']}), {doc['date']}", "",
             doc["how"], ""]  # fmt: skip
    for key, title in (("rules_over_bare", "With the rules over without them (same graphs and ring)"),
                       ("rules_over_one_slot", "With the rules over offline on one slot (before the rules)")):  # fmt: skip
        lines += [f"## {title}", "", "| contenders, mode | n | geomean | within 2% | worst | noise (median) |",
                  "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
        for name, t in doc["totals"][key].items():
            lines.append(f"| {name} | {t['n']} | {t['geomean']:.3f} | {t['within_band']} of {t['n']} | "
                         f"{t['worst']:.3f} | {100 * t['noise_median']:.1f}% |")  # fmt: skip
        lines.append("")
    lines += ["## Per shape and kernel (candidate; baselines: geomean of the four)", "",
              "| shape | slots | family | offline rules/bare | offline rules/one_slot | server rules/bare | "
              "baselines offline rules/bare | rules/one_slot | server rules/bare |",
              "|---|---:|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    by = {}
    for e in doc["entries"]:
        by.setdefault((e["shape"], e["family"]), []).append(e)
    for (shape, family), es in by.items():
        def pick(mode, key, cand, es=es):
            xs = [e[key] for e in es if e["mode"] == mode and key in e and (e["contender"] == "candidate") == cand]
            return f"{geomean(xs):.3f}" if xs else "-"

        lines.append(f"| {shape} | {es[0]['slots']} | {family} | {pick('offline', 'rules_over_bare', True)} | "
                     f"{pick('offline', 'rules_over_one_slot', True)} | {pick('server', 'rules_over_bare', True)} | "
                     f"{pick('offline', 'rules_over_bare', False)} | {pick('offline', 'rules_over_one_slot', False)} | "
                     f"{pick('server', 'rules_over_bare', False)} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, key, title in ((axes[0], "rules_over_bare", "rules / bare"),
                           (axes[1], "rules_over_one_slot", "rules / one slot (offline)")):  # fmt: skip
        groups = [(f"{who} {mode}", [e[key] for e in doc["entries"] if key in e and e["mode"] == mode
                                     and (e["contender"] == "candidate") == (who == "cand.")])
                  for who in ("cand.", "base.") for mode in MODES]  # fmt: skip
        groups = [(n, xs) for n, xs in groups if xs]
        for i, (_, xs) in enumerate(groups):
            jitter = [i + 0.25 * (random.Random(j).random() - 0.5) for j in range(len(xs))]
            ax.scatter(jitter, xs, s=12, alpha=0.7)
        ax.axhspan(1 - BAND, 1 + BAND, color="green", alpha=0.12, label="within 2%")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xticks(range(len(groups)), [n for n, _ in groups])
        ax.set_title(title)
        ax.set_ylabel("time ratio (above 1: slower under the rules)")
        ax.legend(loc="upper left")
    fig.suptitle(f"Timing rules on {doc['gpu']}, {doc['date']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m hgemm.bench.timing_rules", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args(argv)
    families = args.families.split(",")
    shapes = [Shape.of(s) for s in args.shapes.split(",")]
    rng = random.Random()
    rows: list[dict] = []
    with LocalEvaluator() as ev:
        for shape in shapes:
            params = {f: get_family(f).default_params(shape) for f in families}
            sources = {f: get_family(f).render(p) for f, p in params.items()
                       if p is not None and get_family(f).check(p, shape) is None}  # fmt: skip
            built = dict(zip(sources, compile_sources(list(sources.values()))))
            libs = {f: c.lib_path for f, c in built.items() if c.ok}
            rows += time_shape(ev, libs, shape, args.rounds, rng)
            print(f"{shape}: {len(libs)} kernels timed", flush=True)
        info = ev.gpu_info()
    entries = summarise(rows)
    today = date.today().isoformat()
    doc = {"gpu": info.name, "driver": info.driver, "date": today,
           "how": f"`python -m hgemm.bench.timing_rules`: the default kernel of {', '.join(families)} on {len(shapes)} "
                  f"shapes and the four baselines beside each, {args.rounds} rounds of each protocol in random order "
                  "(full stage: 15 offline and 30 server samples per round). Ratios are of medians over rounds of "
                  "each round's median time; above 1, slower under the rules. Noise: the rules protocol's largest "
                  "over smallest round median.",
           "totals": {k: totals(entries, k) for k in ("rules_over_bare", "rules_over_one_slot")},
           "entries": entries, "rows": rows}  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"timing-rules-{gpu_tag(info.name)}-{today}"
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1) + "\n")
    text = report(doc)
    (out / f"{stem}.md").write_text(text)
    plot(doc, out / f"{stem}.png")
    print(text)


if __name__ == "__main__":
    main()
