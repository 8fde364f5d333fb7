"""The gemv kernel for M = 2-8 with each operand converted once per chunk and all loads of a step issued first
(ran 2026-11-27 on an H200: gpu-h200/, README "Result").

At M = 2-4 the gemv family (which converts both operands at every multiply: 16 instructions per element of B and
row of A) won only 2x4096x4096 offline; from M = 3 the tensor-core kernels keep the shapes at 0.87-0.98x of the best
library (`../2026-11-27-gemv-family/m2to4-h100/`), and 7x14336x4096 stays at 0.98x. `gemv_mid.cu` needs 8 FMAs and
about 1 + 8/ROWS conversions per element and row of A. Per shape below, its variants (MAXM the smallest of 2, 4, 8
that holds M; M = 1 uses MAXM 1 to compare with the family) and, for M <= 4, the gemv family's default and two
neighbours are evaluated in the full stage, offline and server; printed: the best of each beside the figure the
search reached for the shape (the family's m2to4 and decode runs, or the shapes-real report).

Usage: python gemv_mid.py OUT_DIR     (one GPU; a few minutes)
       python gemv_mid.py --check     (no GPU: build every variant, registers and spills)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hgemm.evaluator.kernels import get_family

from hgemm.core.shape import Shape

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SHAPES = [Shape(*s) for s in [(1, 6144, 4096), (2, 4096, 4096), (2, 8192, 3584), (3, 5120, 5120), (4, 4096, 14336),
                              (4, 14336, 4096), (7, 14336, 4096), (8, 4096, 4096)]]  # fmt: skip
# (ROWS, UNROLL, KSPLIT), eight warps
MID = [(1, 4, 1), (2, 2, 1), (2, 4, 2), (4, 2, 1), (4, 1, 2), (2, 2, 2)]


def maxm_for(m: int) -> int:
    return 1 if m == 1 else next(v for v in (2, 4, 8) if v >= m)


def render_mid(maxm: int, rows: int, unroll: int, ksplit: int) -> str:
    values = {"MAXM": maxm, "ROWS": rows, "WARPS": 8, "KSPLIT": ksplit, "UNROLL": unroll}
    head = "// gemv-mid probe: " + ", ".join(f"{k}={v}" for k, v in values.items()) + "\n"
    return head + "".join(f"#define HG_{k} {v}\n" for k, v in values.items()) + (HERE / "gemv_mid.cu").read_text()


def variants(shape: Shape) -> list[tuple[str, dict, str]]:
    """(kind, parameters, source): the probe's, then the family's default and two neighbours where M <= 4."""
    out = []
    for rows, unroll, ksplit in MID:
        p = {"MAXM": maxm_for(shape.M), "ROWS": rows, "UNROLL": unroll, "KSPLIT": ksplit}
        out.append(("mid", p, render_mid(p["MAXM"], rows, unroll, ksplit)))
    fam = get_family("gemv")
    base = fam.default_params(shape)
    if base is not None:
        for change in ({}, {"ROWS": 4, "UNROLL": 2}, {"ROWS": 1}):
            p = {**base, **change}
            if fam.check(p, shape) is None:
                out.append(("family", p, fam.render(p)))
    return out


def reference() -> dict[tuple[int, int, int], tuple[float, float, str]]:
    """The search's figure per shape: the gemv family's m2to4 and decode runs, else the H100 shapes-real report."""
    refs = {}
    paths = [ROOT / "bench" / "results" / "shapes-real-H100.json",
             ROOT / "experiments" / "2026-11-27-gemv-family" / "decode-h100" / "decode-H100.json",
             ROOT / "experiments" / "2026-11-27-gemv-family" / "m2to4-h100" / "m24-H100.json"]  # fmt: skip
    for path in paths:  # later files replace earlier figures
        for r in json.loads(path.read_text())["rows"]:
            refs[(r["M"], r["N"], r["K"])] = (r["offline_speedup_best"], r["server_speedup_best"], r["family"])
    return refs


def check() -> None:
    from hgemm.evaluator.compile import compile_sources

    work = {src: (shape, kind, p) for shape in SHAPES for kind, p, src in variants(shape)}
    for (shape, kind, p), res in zip(work.values(), compile_sources(list(work), use_cache=False), strict=True):
        regs = {arch: (r.registers, r.spill_stores) for arch, r in res.resources.items()}
        print(shape, kind, p, "ok" if res.ok else f"{res.failure_kind}: {res.message}", regs, flush=True)


def main() -> None:
    if sys.argv[1:] == ["--check"]:
        check()
        return
    from hgemm.evaluator.compile import compile_sources
    from hgemm.evaluator.local import LocalEvaluator

    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    compile_sources(sorted({src for shape in SHAPES for _, _, src in variants(shape)}))  # in parallel, into the cache
    refs, rows, summary = reference(), [], []
    with LocalEvaluator() as ev:
        for shape in SHAPES:
            vs = variants(shape)
            recs = ev.evaluate([src for _, _, src in vs], shape, stage="full", modes=("offline", "server"))
            best: dict[tuple[str, str], float] = {}
            for (kind, p, _), rec in zip(vs, recs, strict=True):
                row = {"M": shape.M, "N": shape.N, "K": shape.K, "kind": kind, **p, "ok": rec.ok,
                       "failure": rec.failure_kind, "message": (rec.failure_message or "")[:200]}  # fmt: skip
                for mode in ("offline", "server"):
                    row[f"{mode}_us"] = rec.median_us(mode)
                    s = row[f"{mode}_speedup"] = rec.speedup_best(mode)
                    if rec.ok and s is not None:
                        best[(kind, mode)] = max(best.get((kind, mode), 0.0), s)
                rows.append(row)
            ref = refs.get(tuple(shape), (None, None, None))
            line = {"shape": str(shape), **{f"{k}_{m}": best.get((k, m)) for k in ("mid", "family") for m in ("offline", "server")},
                    "search_offline": ref[0], "search_server": ref[1], "search_family": ref[2]}  # fmt: skip
            summary.append(line)
            print(json.dumps(line), flush=True)
            (out / "gemv_mid.json").write_text(json.dumps({"summary": summary, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
