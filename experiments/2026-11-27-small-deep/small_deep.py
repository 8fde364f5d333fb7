"""The small family's kernel with more chunks of fragments in flight per warp (prepared 2026-11-27, not yet run).

For each shape of bench/shapes-real.txt with 5 <= M <= 16 (the decode-with-batch layers, where the search's kernels
reach 0.73-1.02x of the best library on the H100), the small family's default configuration (DEPTH 2, its own
schedule) and four 16-row tiles (no fragment of A spent past M = 16) are rendered from `small_deep.cu` with DEPTH 2,
4 and 8, and evaluated in the full stage, offline and server, by the product's evaluator. Printed per
shape: the best speedup over the best baseline at each DEPTH, beside the committed shapes-real report's figure.

Usage: python small_deep.py OUT_DIR            (one GPU; a few minutes)
       python small_deep.py --check            (no GPU: build every variant of the first shape, registers, spills)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hgemm.evaluator.kernels import get_family
from hgemm.evaluator.kernels.inline import inline_includes

from hgemm.core.shape import Shape

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "experiments" / "2026-11-27-small-m-gemv"))
from gemv import report_rows  # noqa: E402  (the committed report's figures per shape)

DEPTHS = (2, 4, 8)


def render(params: dict) -> str:
    head = "// small-deep probe: " + ", ".join(f"{k}={v}" for k, v in sorted(params.items())) + "\n"
    defines = "".join(f"#define HG_{k} {v}\n" for k, v in sorted(params.items()))
    return inline_includes(head + defines + (HERE / "small_deep.cu").read_text())


def shapes() -> list[Shape]:
    out = []
    for line in (ROOT / "bench" / "shapes-real.txt").read_text().splitlines():
        parts = line.split("#")[0].split()
        if len(parts) == 3 and 5 <= int(parts[0]) <= 16:
            out.append(Shape(*map(int, parts)))
    return out


# (BM, BN, WARPS_M, WARPS_N, WARPS_K): 16-row tiles, so no fragment of A is spent on rows past M = 16
TILES = [(16, 32, 1, 2, 4), (16, 64, 1, 4, 2), (16, 64, 1, 2, 2), (16, 32, 1, 2, 8)]


def variants(shape: Shape) -> list[dict]:
    """The family's default (DEPTH 2: its own schedule), and each 16-row tile the family accepts at every DEPTH."""
    fam = get_family("small")
    base = fam.default_params(shape)
    out = [{**base, "DEPTH": 2}]
    for bm, bn, wm, wn, wk in TILES:
        p = {**base, "BM": bm, "BN": bn, "WARPS_M": wm, "WARPS_N": wn, "WARPS_K": wk}
        if fam.check(p, shape) is None:  # 512 threads leave 128 registers: DEPTH 8 spills there
            out += [{**p, "DEPTH": d} for d in DEPTHS if d < 8 or 32 * wm * wn * wk <= 256]
    return out


def check() -> None:
    from hgemm.evaluator.compile import compile_sources

    shape = shapes()[0]
    vs = variants(shape)
    for p, res in zip(vs, compile_sources([render(p) for p in vs], use_cache=False), strict=True):
        regs = {arch: (r.registers, r.spill_stores) for arch, r in res.resources.items()}
        print(shape, p, "ok" if res.ok else f"{res.failure_kind}: {res.message}", regs, flush=True)


def main() -> None:
    if sys.argv[1:] == ["--check"]:
        check()
        return
    from hgemm.evaluator.compile import compile_sources
    from hgemm.evaluator.local import LocalEvaluator

    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    work = [(shape, p) for shape in shapes() for p in variants(shape)]
    compile_sources(sorted({render(p) for _, p in work}))  # in parallel, into the cache
    rows, summary = [], []
    with LocalEvaluator() as ev:
        known = report_rows(ev.gpu_info().name)
        for shape in shapes():
            vs = [p for s, p in work if s == shape]
            recs = ev.evaluate([render(p) for p in vs], shape, stage="full", modes=("offline", "server"))
            best: dict[tuple[str, int], float] = {}
            for p, rec in zip(vs, recs, strict=True):
                row = {"M": shape.M, "N": shape.N, "K": shape.K, **p, "ok": rec.ok, "failure": rec.failure_kind,
                       "message": (rec.failure_message or "")[:200]}  # fmt: skip
                for mode in ("offline", "server"):
                    row[f"{mode}_us"] = rec.median_us(mode)
                    s = row[f"{mode}_speedup"] = rec.speedup_best(mode)
                    if rec.ok and s is not None:
                        key = (mode, p["DEPTH"])
                        best[key] = max(best.get(key, 0.0), s)
                rows.append(row)
            ref = known.get(tuple(shape), {})
            line = {"shape": str(shape), **{f"{m}_depth{d}": best.get((m, d)) for m in ("offline", "server") for d in DEPTHS},
                    "search_offline": ref.get("offline_speedup_best"), "search_server": ref.get("server_speedup_best"),
                    "search_family": ref.get("family")}  # fmt: skip
            summary.append(line)
            print(json.dumps(line), flush=True)
            (out / "small_deep.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
