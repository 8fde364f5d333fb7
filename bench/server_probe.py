"""Where server-mode time goes: kernels and baselines timed as single launches after varied L2 preparations.

Server mode (`evaluator.timing.time_server`) writes twice the L2's size before each launch: cold operands,
dirty lines to write back, an unrelated kernel just before. `--variants` (default all) separates those costs:
dirty (the evaluator's flush), clean (the L2 evicted by reading twice its size), spin (no flush, only a
waiting kernel that covers the host's enqueueing: warm L2), self (as spin, after one run of the contender
itself; each contender timed on its own), offline (for reference: back-to-back launches in one graph).

Usage: python -m hgemm.bench.server_probe REPORT.json ARCHIVE.jsonl.xz --shapes 12288x1024x512,...
       [--also '{"cluster_m": 1}'] [--floors] [--variants offline,dirty]
       [--samples 30] [--out bench/results/server-probe.json]

- Each shape's kernel is the report's, re-rendered with today's template from its family and parameters (in
  the archive export); `--also` adds configurations of that family, `--floors` the non-GEMM contenders of
  `floor_kernels.cu` (an empty launch; one that reads A and Bt and writes C once).
- Every GEMM kernel is checked against torch.mm before timing; a wrong or failed one is reported, not timed.
  Random gaps, single-launch graphs and interleaved contenders are the evaluator's.
- Bad arguments, or a shape whose kernel is in neither report nor archive, exit 2 before the GPU is touched.
- Only our own template kernels run in this process, never candidates. The JSON is rewritten after each shape.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from importlib import resources
from pathlib import Path

VARIANTS = ("offline", "dirty", "clean", "spin", "self")
SPIN_CYCLES = 100_000  # about 50-100 us: long enough for the host to enqueue the timed launch
FLOOR_SOURCE = resources.files("hgemm.bench").joinpath("floor_kernels.cu")  # HG_FLOOR 0: empty, 1: touch


def preparations(l2_bytes: int) -> dict:
    import torch
    from hgemm.evaluator.timing import Flusher

    dirty = Flusher(l2_bytes)
    total = torch.empty((), dtype=torch.int64, device="cuda")
    return {
        "dirty": dirty,
        "clean": lambda: torch.sum(dirty.buf, dim=0, out=total),  # reads the flush buffer: clean lines
        "spin": lambda: torch.cuda._sleep(SPIN_CYCLES),
    }


def kernel_params(archive: Path, hashes: set[str]) -> dict[str, tuple[str, dict]]:
    from hgemm.archive.transfer import read_export

    found = {}
    for line in read_export(archive):
        if line.get("type") == "kernel" and line.get("hash") in hashes:
            found[line["hash"]] = (line["family"], line["params"])
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hgemm.bench.server_probe", description=__doc__.splitlines()[0])
    ap.add_argument("report", type=Path)
    ap.add_argument("archive", type=Path)
    ap.add_argument("--shapes", required=True, help="MxNxK,... (rows of the report)")
    ap.add_argument(
        "--also", action="append", default=[], help="JSON parameter overrides: one more kernel each"
    )
    ap.add_argument("--floors", action="store_true", help="also time floor_empty and floor_touch (floor_kernels.cu)")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"some of {','.join(VARIANTS)}")
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--out", type=Path, default=Path("bench/results/server-probe.json"))
    args = ap.parse_args(argv)

    variants = args.variants.split(",")
    if not set(variants) <= set(VARIANTS):
        ap.error(f"--variants: choose from {','.join(VARIANTS)}")
    try:
        shapes = [tuple(int(x) for x in s.split("x", 2)) for s in args.shapes.split(",")]
    except ValueError:
        ap.error(f"--shapes: expected MxNxK,..., got {args.shapes!r}")
    if any(len(s) != 3 for s in shapes):
        ap.error(f"--shapes: expected MxNxK,..., got {args.shapes!r}")
    try:
        overrides = [json.loads(a) for a in args.also]
    except json.JSONDecodeError as e:
        ap.error(f"--also: not JSON ({e})")
    rows = {(r["M"], r["N"], r["K"]): r for r in json.loads(args.report.read_text())["rows"]}
    missing = [s for s in shapes if not rows.get(s, {}).get("kernel")]
    if missing:
        ap.error(f"no kernel in the report for {missing}")
    params = kernel_params(args.archive, {rows[s]["kernel"] for s in shapes})
    unknown = sorted({rows[s]["kernel"] for s in shapes} - set(params))
    if unknown:
        ap.error(f"kernels not in {args.archive}: {unknown}")

    import torch
    from hgemm.evaluator import gpu_facts
    from hgemm.evaluator.baselines import Baselines
    from hgemm.evaluator.compile import compile_sources
    from hgemm.evaluator.harness import Candidate, Problem
    from hgemm.evaluator.kernels import get_family
    from hgemm.evaluator.timing import time_offline, time_server

    from hgemm.core.record import BASELINES
    from hgemm.core.shape import Shape

    # Every kernel of every shape, compiled up front in parallel.
    plan: list[tuple[tuple, str, str]] = []  # (shape, label, source)
    for s in shapes:
        family_name, p = params[rows[s]["kernel"]]
        family = get_family(family_name)
        for i, extra in enumerate([{}, *overrides]):
            q = family.repair({**p, **extra}) if extra else p
            why = extra and (family.check(q, Shape(*s)) or (q == p and "same as the report kernel"))
            if why:
                print(f"{s} also{i}: {why}; skipped", file=sys.stderr)
                continue
            plan.append((s, "ours" if not extra else f"also{i}", family.render(q)))
        if args.floors:
            floor_src = FLOOR_SOURCE.read_text()
            plan += [(s, f"floor_{kind}", f"#define HG_FLOOR {i}\n{floor_src}") for i, kind in enumerate(("empty", "touch"))]
    built = compile_sources([src for _, _, src in plan])
    bad = [(s, label, b.message) for (s, label, _), b in zip(plan, built) if not b.ok]
    if bad:
        print(f"compile failures: {bad}", file=sys.stderr)
        return 1

    info = gpu_facts.gpu_info()
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    preps = preparations(info.l2_bytes)
    out = {
        "gpu": info.name,
        "driver": info.driver,
        "date": time.strftime("%Y-%m-%d"),
        "samples": args.samples,
        "variants": variants,
        "rows": [],
    }
    for s in shapes:
        p = Problem(Shape(*s))
        p.draw("randn")
        ref = torch.mm(p.a, p.b)
        base = Baselines.on_tensors(p.a, p.b, p.bt, gpu_facts.gpu_key(info), p.stream, info.l2_bytes)
        contenders = dict(base.contenders)
        kernels = {}
        for (shape, label, _), b in zip(plan, built):
            if shape != s:
                continue
            cand = Candidate(b.lib_path)
            if p.launch(cand) != 0:
                print(f"{s} {label}: launch failed; not timed", file=sys.stderr)
                continue
            torch.cuda.synchronize()
            if label.startswith("floor_"):  # not a GEMM: nothing to check
                kernels[label] = {"hash": b.kernel_hash}
                contenders[label] = lambda cand=cand, p=p: p.launch(cand)
                continue
            err = ((p.c.float() - ref.float()).norm() / ref.float().norm()).item()
            if not err < 1e-2:
                print(f"{s} {label}: wrong result (relative error {err:.3g}); not timed", file=sys.stderr)
                continue
            kernels[label] = {"hash": b.kernel_hash, "rel_err": err}
            contenders[label] = lambda cand=cand, p=p: p.launch(cand)
        row = {"M": s[0], "N": s[1], "K": s[2], "kernels": kernels, "variants": {}}
        for v in variants:
            if v == "offline":
                stats = time_offline(contenders, p.stream, samples=15)
            elif v == "self":
                stats = {}
                for name, fn in contenders.items():

                    def again(fn=fn):
                        fn()
                        torch.cuda._sleep(SPIN_CYCLES)

                    stats.update(time_server({name: fn}, p.stream, info.l2_bytes, samples=args.samples, flush=again))
            else:
                stats = time_server(contenders, p.stream, info.l2_bytes, samples=args.samples, flush=preps[v])
            row["variants"][v] = {name: st.median_us for name, st in stats.items()}
        out["rows"].append(row)
        args.out.write_text(json.dumps(out, indent=1))
        del base, contenders
        torch.cuda.empty_cache()

    for i, extra in enumerate(overrides, 1):
        print(f"also{i} = {json.dumps(extra)}")
    print(f"{'shape':>17} {'variant':>6} {'ours':>8} {'best base':>9} {'ratio':>6}  others")
    for row in out["rows"]:
        for v in variants:
            t = row["variants"][v]
            b = min((t[n], n) for n in BASELINES if n in t)
            extra = " ".join(f"{k}={t[k]:.2f}" for k in t if k.startswith(("also", "floor")))
            ours = t.get("ours", float("nan"))
            print(
                f"{row['M']:>5}x{row['N']}x{row['K']:<5} {v:>6} {ours:8.2f} {b[0]:9.2f} {b[0] / ours:6.3f}  "
                f"{b[1]} {extra}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
