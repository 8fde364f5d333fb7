"""GPU check of our own kernel families (mma_ms, mma_splitk, small): correctness and speed.

For each family, a dozen or so parameter sets across shapes (non-multiples, tiny, K-heavy, square, odd N) go
through the GPU evaluator at stage "quick" (correctness suite, then offline timing against the baselines).

Usage: python -m hgemm.bench.check_families [--out bench/results/families.json] [--families mma_ms,small]
       [--shapes 1024x1024x1024,...]
       python -m hgemm.bench.check_families --compile-only      # no GPU needed: builds and ptxas report

- Every parameter set passes the family's `check` before it is compiled (a refusal is reported as such);
  every source is compiled first, in parallel, then one `evaluate` call per shape takes all its sources.
- Prints a compact table and writes JSON (one row per attempt, plus a per-family summary) to --out.
- Exit status 1 when an attempt that passed the check failed to compile or was incorrect.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from hgemm.evaluator.kernels import get_family

from hgemm.core.shape import Shape

Dims = tuple[int, int, int]
SQUARE_BIG: Dims = (4096, 4096, 4096)
SQUARE: Dims = (1024, 1024, 1024)
ODD: Dims = (200, 136, 264)
ODD_N: Dims = (131, 77, 136)  # odd N and odd M*N: scalar store and scalar reduction paths
TINY: Dims = (64, 64, 64)
KHEAVY: Dims = (512, 128, 8192)
SMALLISH: Dims = (256, 256, 512)
SHAPES = (TINY, ODD_N, ODD, SMALLISH, KHEAVY, SQUARE, SQUARE_BIG)


def _mma(bm, bn, bk, wm, wn, stages, raster, split=None) -> dict:
    p = {"BM": bm, "BN": bn, "BK": bk, "WARPS_M": wm, "WARPS_N": wn, "STAGES": stages, "RASTER": raster}
    if split is not None:
        p["SPLIT_K"] = split
    return p


def _small(bm, bn, wm, wn, wk) -> dict:
    return {"BM": bm, "BN": bn, "WARPS_M": wm, "WARPS_N": wn, "WARPS_K": wk}


# family -> shape -> explicit parameter sets (each family's default params are added for every shape)
EXPLICIT: dict[str, dict[Dims, list[dict]]] = {
    "mma_ms": {
        SQUARE_BIG: [
            _mma(128, 256, 32, 2, 4, 4, 8),
            _mma(256, 128, 32, 4, 2, 3, 8),
            _mma(128, 128, 32, 2, 2, 4, 8),
            _mma(128, 128, 64, 4, 2, 3, 16),
            _mma(128, 64, 64, 2, 2, 4, 4),
        ],
        SQUARE: [
            _mma(128, 128, 32, 2, 2, 4, 8),
            _mma(64, 128, 32, 2, 2, 5, 4),
            _mma(128, 64, 64, 2, 2, 3, 1),
        ],
        ODD: [_mma(64, 64, 32, 2, 2, 2, 1), _mma(32, 64, 64, 1, 2, 3, 4), _mma(256, 32, 32, 4, 1, 6, 16)],
        ODD_N: [_mma(64, 32, 32, 2, 1, 3, 1), _mma(32, 256, 64, 1, 4, 2, 4)],
        TINY: [_mma(64, 64, 64, 2, 2, 2, 1)],
        KHEAVY: [_mma(64, 64, 32, 2, 2, 4, 8)],
    },
    "mma_splitk": {
        KHEAVY: [
            _mma(64, 64, 32, 2, 2, 4, 8, 4),
            _mma(64, 64, 64, 2, 2, 3, 8, 8),
            _mma(32, 64, 32, 1, 2, 4, 1, 8),
            _mma(128, 128, 64, 2, 4, 3, 4, 16),
            _mma(64, 128, 32, 2, 2, 4, 4, 6),
        ],
        SQUARE: [_mma(128, 128, 32, 2, 2, 4, 8, 2), _mma(128, 128, 32, 2, 2, 4, 8, 4)],
        ODD: [_mma(64, 64, 32, 2, 2, 3, 1, 3)],
        ODD_N: [_mma(32, 32, 32, 1, 1, 2, 1, 3), _mma(64, 64, 64, 2, 2, 2, 1, 2)],
        SMALLISH: [_mma(64, 64, 32, 2, 2, 3, 1, 4)],
    },
    "small": {
        TINY: [
            _small(16, 16, 1, 1, 1),
            _small(32, 32, 1, 2, 1),
            _small(64, 64, 2, 2, 1),
            _small(16, 32, 1, 2, 2),
        ],
        SMALLISH: [_small(32, 32, 1, 2, 4), _small(32, 64, 1, 2, 4), _small(16, 16, 1, 1, 8)],
        ODD: [_small(16, 32, 1, 2, 2), _small(64, 32, 2, 1, 2)],
        ODD_N: [_small(16, 16, 1, 1, 2), _small(32, 16, 2, 1, 1)],
        KHEAVY: [_small(16, 32, 1, 2, 8)],
    },
}


def plan(families: list[str], shapes: list[Dims]) -> list[dict]:
    """Every (family, params, shape) attempt; ones the family's check refuses keep the reason."""
    rows, seen = [], set()
    for name in families:
        fam = get_family(name)
        for shape in shapes:
            for params in [fam.default_params(Shape(*shape)), *EXPLICIT.get(name, {}).get(shape, [])]:
                key = (name, shape, tuple(sorted(params.items())))
                if key in seen:
                    continue
                seen.add(key)
                reason = fam.check(params, Shape(*shape))
                rows.append({"family": name, "params": params, "shape": list(shape), "check": reason})
    return rows


def short(params: dict) -> str:
    return " ".join(f"{k.lower()}={v}" for k, v in params.items())


def compile_all(rows: list[dict]) -> None:
    from hgemm.evaluator.compile import compile_sources

    todo = [r for r in rows if r["check"] is None]
    sources = [get_family(r["family"]).render(r["params"]) for r in todo]
    started = time.perf_counter()
    results = compile_sources(sources)
    for row, src, res in zip(todo, sources, results, strict=True):
        row["source"] = src
        main = max(res.kernels, key=lambda k: k.registers or 0, default=None)
        row["compiled"] = res.ok
        row["compile_failure"] = None if res.ok else f"{res.failure_kind}: {res.message}"
        row["registers"] = main.registers if main else None
        row["spills"] = (
            max((k.spill_stores or 0) + (k.spill_loads or 0) for k in res.kernels) if res.kernels else None
        )
    print(f"compiled {len(sources)} sources in {time.perf_counter() - started:.1f} s", flush=True)


def evaluate_all(rows: list[dict]) -> None:
    from hgemm.evaluator.local import LocalEvaluator

    by_shape: dict[tuple, list[dict]] = {}
    for r in rows:
        if r.get("source"):
            by_shape.setdefault(tuple(r["shape"]), []).append(r)
    with LocalEvaluator() as ev:
        for shape, group in by_shape.items():
            started = time.perf_counter()
            recs = ev.evaluate([r["source"] for r in group], Shape(*shape), stage="quick", modes=("offline",))
            for r, rec in zip(group, recs, strict=True):
                mode = rec.modes.get("offline")
                r.update(
                    correct=rec.correct,
                    failure_kind=rec.failure_kind,
                    failure_message=(rec.failure_message or "")[:500] or None,
                    max_rel_err=rec.max_rel_err,
                    median_us=rec.median_us("offline"),
                    speedup_best=rec.speedup_best("offline"),
                    best_baseline=mode.best_baseline if mode else None,
                    best_baseline_us=mode.baselines[mode.best_baseline].median_us
                    if mode and mode.best_baseline
                    else None,
                    tflops=mode.tflops if mode else None,
                    kernel_hash=rec.kernel_hash,
                )
            print(
                f"evaluated {len(group)} sources at {shape} in {time.perf_counter() - started:.1f} s",
                flush=True,
            )


def status(r: dict) -> str:
    if r["check"]:
        return "refused: " + r["check"]
    if not r.get("compiled", True):
        return r.get("compile_failure") or "compile failed"
    if r.get("failure_kind"):
        return r["failure_kind"]
    if r.get("correct"):
        return "ok"
    return "compiled" if "correct" not in r else "?"


def fmt(v, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def table(rows: list[dict]) -> str:
    lines = [f"{'family':<11} {'shape':<16} {'status':<18} {'us':>9} {'x best':>7} {'regs':>5}  params"]
    for r in rows:
        shape = "x".join(map(str, r["shape"]))
        lines.append(
            f"{r['family']:<11} {shape:<16} {status(r)[:18]:<18} {fmt(r.get('median_us'), '.2f'):>9} "
            f"{fmt(r.get('speedup_best'), '.3f'):>7} {fmt(r.get('registers'), 'd'):>5}  {short(r['params'])}"
        )
    return "\n".join(lines)


def summary(rows: list[dict]) -> dict:
    out = {}
    for name in dict.fromkeys(r["family"] for r in rows):
        mine = [r for r in rows if r["family"] == name]
        tried = [r for r in mine if r["check"] is None]
        ok = [r for r in tried if r.get("correct")]
        out[name] = {
            "attempts": len(mine),
            "refused_by_check": len(mine) - len(tried),
            "correct": len(ok),
            "failed": sum(1 for r in tried if r.get("failure_kind") or r.get("compiled") is False),
            "best_speedup": max((r["speedup_best"] for r in ok if r.get("speedup_best")), default=None),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hgemm.bench.check_families", description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench/results/families.json", help="JSON output path")
    ap.add_argument("--families", default="mma_ms,mma_splitk,small", help="comma-separated family names")
    ap.add_argument("--shapes", default="", help="comma-separated MxNxK (default: the built-in set)")
    ap.add_argument("--compile-only", action="store_true", help="build and report resources; no GPU")
    args = ap.parse_args(argv)

    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",") if s] or list(SHAPES)
    rows = plan([f for f in args.families.split(",") if f], shapes)
    started = time.perf_counter()
    compile_all(rows)
    if not args.compile_only:
        evaluate_all(rows)
    print(table(rows))
    result = {
        "wall_seconds": round(time.perf_counter() - started, 1),
        "compile_only": args.compile_only,
        "summary": summary(rows),
        "rows": [{k: v for k, v in r.items() if k != "source"} for r in rows],
    }
    print(json.dumps(result["summary"], indent=1))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")
    bad = [
        r for r in rows if r["check"] is None and (r.get("compiled") is False or r.get("correct") is False)
    ]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
