"""Fit the wgmma family's time factors (`WgmmaFamily.time_factor`) to measured times, and show what they buy.

The analytic model (`agent/model.py`) cannot see the wgmma kernel's own switches. From one GPU's correct
measured wgmma times (`check_wgmma` sweep JSON; an archive's quick-stage records, as a .db or an export) it
centres, per shape, log(measured / predicted) and the features (only ranking within a shape matters) and fits
one log-factor per feature by ridge least squares.

Usage: python -m hgemm.bench.fit_wgmma_factors --archive bench/results/archive-grid100-r10-H100-2026-11-24.jsonl.xz
           [--sweeps SWEEP.json ...] [--gpu-name "NVIDIA H100 80GB HBM3"] [--sms 132] [--l2-mib 50]
           [--current] [--holdout-since 2026-11-22T14:40] [--ridge 1.0]

- Prints, leaving each shape out in turn, the median Spearman rank correlation and the geometric mean of
  (measured time of the model's first choice / best measured time) for the bare model (`predict_us` given the
  family's name applies no factors), the committed factors and fitted ones; then the factors fitted on all
  shapes. Writes nothing.
- Only --gpu-name records count; only shapes with at least 4 configurations are judged.
- `--current` keeps only archive records whose source the family still renders byte for byte;
  `--holdout-since TIME` (ISO 8601) leaves archive records from TIME on out of the fit, judged only.
- Template-switch rows (`_no...` configurations) never count, nor the stream-K rows of `OLD_STREAM_K` sweeps.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from hgemm.agent.model import predict_us, spearman
from hgemm.archive.transfer import read_export
from hgemm.evaluator.kernels import FAMILIES
from hgemm.evaluator.kernels.wgmma_family import TIME_FEATURES, factors_for, time_features

from hgemm.core.record import GpuInfo, kernel_hash
from hgemm.core.shape import Shape

# Sweeps (by file name) whose stream-K rows timed an earlier stream-K hand-over (row-major float2 partials,
# replaced by fragment-order float4 ones); their other rows still count.
OLD_STREAM_K = {"streamk-H200-2026-11-22.json"}


def sweep_rows(paths: list[str]) -> list[tuple[dict, tuple[int, int, int], float]]:
    out = []
    for path in paths:
        for r in json.loads(Path(path).read_text())["rows"]:
            # `_nopdl` / `_nostm` rows measure template switches the family parameters do not carry.
            stale = Path(path).name in OLD_STREAM_K and r.get("params", {}).get("stream_k")
            if r["status"] == "ok" and r.get("median_us") and "_no" not in r["config"] and not stale:
                out.append((r["params"], (r["M"], r["N"], r["K"]), r["median_us"]))
    return out


def archive_rows(
    path: str, gpu_name: str, current: bool = False, since: str | None = None, before: str | None = None
) -> list[tuple[dict, tuple[int, int, int], float]]:
    """(params, shape, offline us) of the archive's correct quick-stage wgmma records on `gpu_name`, created
    at or after `since` and before `before` when given."""
    kernels, out = {}, []
    family = FAMILIES["wgmma"]
    for line in read_export(path):
        if line.get("type") == "kernel" and line.get("family") == "wgmma":
            if not current or kernel_hash(family.render(line["params"])) == line["hash"]:
                kernels[line["hash"]] = line["params"]
        elif line.get("type") == "record":
            rec = line["record"]
            params = kernels.get(rec.get("kernel_hash"))
            if params is None or rec.get("stage") != "quick" or rec.get("failure_kind") or rec.get("gpu") != gpu_name:
                continue
            if (since and rec.get("created", "") < since) or (before and rec.get("created", "") >= before):
                continue
            out.append((params, (rec["M"], rec["N"], rec["K"]), rec["modes"]["offline"]["candidate"]["median_us"]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hgemm.bench.fit_wgmma_factors", description=__doc__.splitlines()[0])
    ap.add_argument("--gpu-name", default="NVIDIA H200")
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--l2-mib", type=int, default=60, help="L2 size for the model (H200 60, H100 50)")
    ap.add_argument("--sweeps", nargs="*", default=[], help="check_wgmma JSON files (glob patterns allowed)")
    ap.add_argument("--archive", default=None, help="archive .db or export (.jsonl, .jsonl.xz)")
    ap.add_argument("--ridge", type=float, default=1.0)
    ap.add_argument("--current", action="store_true", help="only kernels the family renders the same way today")
    ap.add_argument("--holdout-since", default=None, help="judge, not fit, archive records created at or after this")
    args = ap.parse_args(argv)
    if not args.sweeps and not args.archive:
        ap.error("nothing to fit: give --archive and/or --sweeps")
    gpu = GpuInfo(name=args.gpu_name, cc="9.0", driver="", sm_count=args.sms, l2_bytes=args.l2_mib << 20,
                  smem_per_block_optin=232448)  # fmt: skip
    family = FAMILIES["wgmma"]
    rows = sweep_rows([p for pattern in args.sweeps for p in glob.glob(pattern)])
    held: list = []
    if args.archive:
        rows += archive_rows(args.archive, args.gpu_name, args.current, before=args.holdout_since)
        if args.holdout_since:
            held = archive_rows(args.archive, args.gpu_name, args.current, since=args.holdout_since)

    def group(rows) -> dict[tuple[int, int, int], list]:
        by: dict[tuple[int, int, int], list] = defaultdict(list)
        for params, shape, us in rows:
            base = bare_us(family, params, shape, gpu)
            if math.isfinite(base) and base > 0:
                by[shape].append((time_features(params), base, us))
        return by

    by_shape = group(rows)
    shapes = sorted(s for s, v in by_shape.items() if len(v) >= 4)
    if len(shapes) < 2:
        print(f"{len(rows)} measured wgmma times, {len(shapes)} shapes with at least 4 configurations: too few to fit"
              + (f" (--holdout-since {args.holdout_since} leaves {len(held)} times out)" if held else ""),
              file=sys.stderr)  # fmt: skip
        return 2

    def fit(train: list) -> np.ndarray:
        xs, ys = [], []
        for s in train:
            f = np.array([x for x, _, _ in by_shape[s]])
            r = np.array([math.log(us / base) for _, base, us in by_shape[s]])
            xs.append(f - f.mean(0))
            ys.append(r - r.mean())
        x, y = np.vstack(xs), np.concatenate(ys)
        return np.linalg.solve(x.T @ x + args.ridge * np.eye(x.shape[1]), x.T @ y)

    def judge(s, w, by=by_shape) -> tuple[float | None, float]:
        pred = [base * math.exp(float(np.dot(w, x))) for x, base, _ in by[s]]
        times = [us for _, _, us in by[s]]
        return spearman(pred, times), times[int(np.argmin(pred))] / min(times)

    zero = np.zeros(len(TIME_FEATURES))
    before = [judge(s, zero) for s in shapes]
    committed_w = np.log([factors_for(args.gpu_name)[name] for name in TIME_FEATURES])
    committed = [judge(s, committed_w) for s in shapes]
    after = [judge(s, fit([t for t in shapes if t != s])) for s in shapes]

    def line(v) -> str:
        rhos = [a for a, _ in v if a is not None]
        rho = f"{statistics.median(rhos):.2f}" if rhos else "-"
        regret = math.exp(sum(math.log(b) for _, b in v) / len(v))
        return f"median Spearman {rho}, first choice / best {regret:.3f} (geomean), worst {max(b for _, b in v):.2f}"

    print(f"{len(rows)} measured wgmma times, {len(shapes)} shapes with at least 4 configurations")
    print(f"model alone:                {line(before)}")
    print(f"with the committed factors: {line(committed)}")
    print(f"with factors (shape left out): {line(after)}")
    fitted = fit(shapes)
    factors = {name: round(math.exp(w), 3) for name, w in zip(TIME_FEATURES, fitted, strict=True)}
    print("factors fitted on all shapes:", json.dumps(factors))
    if held:
        by_held = group(held)
        hs = sorted(s for s, v in by_held.items() if len(v) >= 4)
        print(f"held out: {len(held)} times measured since {args.holdout_since}, {len(hs)} shapes with at least 4")
        if hs:
            print(f"  model alone:                {line([judge(s, zero, by_held) for s in hs])}")
            print(f"  with the committed factors: {line([judge(s, committed_w, by_held) for s in hs])}")
            print(f"  with the factors fitted above: {line([judge(s, fitted, by_held) for s in hs])}")
    return 0


def bare_us(family, params: dict, shape: tuple[int, int, int], gpu: GpuInfo) -> float:
    """The analytic model's time without the family's factors: they are what is being fitted (given the
    family's name, not the family, `predict_us` applies none)."""
    return predict_us(family.name, params, Shape(*shape), gpu)


if __name__ == "__main__":
    sys.exit(main())
