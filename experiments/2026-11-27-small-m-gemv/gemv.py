"""A matrix-vector kernel for small M against the libraries and against what the search found (prepared
2026-11-27, not yet run).

NOTES item 49: the small-M shapes of shapes-real are memory-bound, and a kernel streaming B near the HBM rate
would beat the libraries there; the search's kernels for M <= 16 (wgmma, mma_splitk, small) reach 0.73-1.2x of
the best library, worst where B is a few tens of MB (16x4608x3584 0.73x offline, 1x4608x3584 0.73x in server
mode, where mma_splitk's extra launches cost). `gemv.cu` is one launch on the CUDA cores (its header says how).

For each shape of bench/shapes-real.txt with M <= 16 (K a multiple of 8), the variants below are evaluated in the
full stage, offline and server, by the product's evaluator; printed per shape: the best variant's speedup over the
best baseline in each mode, against the figure of the committed shapes-real report of the same GPU model.

Usage: python gemv.py OUT_DIR            (one GPU; a few minutes)
       python gemv.py --check            (no GPU: build every variant, print registers and spills)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# (ROWS, WARPS, KSPLIT, UNROLL)
SHAPES_OF = {1: [(1, 8, 1, 4), (2, 8, 1, 4), (4, 8, 1, 2), (2, 8, 2, 4), (4, 8, 2, 2), (1, 8, 4, 4), (2, 4, 1, 4),
                 (8, 8, 1, 2)],
             8: [(1, 8, 1, 4), (2, 8, 1, 2), (2, 8, 1, 4), (4, 8, 1, 2), (2, 8, 2, 4), (1, 8, 4, 4)],
             16: [(1, 8, 1, 4), (2, 8, 1, 2), (1, 8, 2, 4), (2, 8, 2, 2), (1, 4, 1, 4)]}  # fmt: skip


def maxm_for(m: int) -> int:
    return next(v for v in sorted(SHAPES_OF) if v >= m)


def render(maxm: int, rows: int, warps: int, ksplit: int, unroll: int) -> str:
    values = {"MAXM": maxm, "ROWS": rows, "WARPS": warps, "KSPLIT": ksplit, "UNROLL": unroll}
    head = "// gemv probe: " + ", ".join(f"{k}={v}" for k, v in values.items()) + "\n"
    return head + "".join(f"#define HG_{k} {v}\n" for k, v in values.items()) + (HERE / "gemv.cu").read_text()


def variants(maxm: int) -> list[tuple[dict, str]]:
    out = []
    for rows, warps, ksplit, unroll in SHAPES_OF[maxm]:
        p = {"MAXM": maxm, "ROWS": rows, "WARPS": warps, "KSPLIT": ksplit, "UNROLL": unroll}
        out.append((p, render(maxm, rows, warps, ksplit, unroll)))
    return out


def shapes() -> list[tuple[int, int, int]]:
    rows = []
    for line in (ROOT / "bench" / "shapes-real.txt").read_text().splitlines():
        parts = line.split("#")[0].split()
        if len(parts) == 3:
            m, n, k = map(int, parts)
            if m <= 16 and k % 8 == 0:
                rows.append((m, n, k))
    return rows


def check() -> None:
    from hgemm.evaluator.compile import compile_sources

    for maxm in sorted(SHAPES_OF):
        vs = variants(maxm)
        for (p, _), res in zip(vs, compile_sources([s for _, s in vs], use_cache=False), strict=True):
            regs = {arch: (r.registers, r.spill_stores) for arch, r in res.resources.items()}
            print(p, "ok" if res.ok else f"{res.failure_kind}: {res.message}", regs, flush=True)


def report_rows(gpu_name: str) -> dict[tuple[int, int, int], dict]:
    tag = "H200" if "H200" in gpu_name else "H100"
    path = ROOT / "bench" / "results" / f"shapes-real-{tag}.json"
    if not path.exists():
        return {}
    return {(r["M"], r["N"], r["K"]): r for r in json.loads(path.read_text())["rows"]}


def main() -> None:
    if sys.argv[1:] == ["--check"]:
        check()
        return
    from hgemm.evaluator.local import LocalEvaluator

    from hgemm.core.shape import Shape

    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    results, summary = [], []
    with LocalEvaluator() as ev:
        known = report_rows(ev.gpu_info().name)
        for m, n, k in shapes():
            vs = variants(maxm_for(m))
            recs = ev.evaluate([s for _, s in vs], Shape(m, n, k), stage="full", modes=("offline", "server"))
            best = {"offline": None, "server": None}
            for (p, _), rec in zip(vs, recs, strict=True):
                row = {"M": m, "N": n, "K": k, **p, "ok": rec.ok, "failure": rec.failure_kind,
                       "message": (rec.failure_message or "")[:200]}  # fmt: skip
                for mode in ("offline", "server"):
                    row[f"{mode}_us"] = rec.median_us(mode)
                    row[f"{mode}_speedup"] = rec.speedup_best(mode)
                    s = row[f"{mode}_speedup"]
                    if rec.ok and s is not None and (best[mode] is None or s > best[mode][0]):
                        best[mode] = (s, p)
                results.append(row)
            ref = known.get((m, n, k), {})
            line = {"shape": f"{m}x{n}x{k}",
                    "gemv_offline": best["offline"][0] if best["offline"] else None,
                    "gemv_server": best["server"][0] if best["server"] else None,
                    "search_offline": ref.get("offline_speedup_best"), "search_server": ref.get("server_speedup_best"),
                    "search_family": ref.get("family"),
                    "best_offline_params": best["offline"][1] if best["offline"] else None,
                    "best_server_params": best["server"][1] if best["server"] else None}  # fmt: skip
            summary.append(line)
            print(json.dumps(line), flush=True)
            (out / "gemv.json").write_text(json.dumps({"summary": summary, "rows": results}, indent=1))


if __name__ == "__main__":
    main()
