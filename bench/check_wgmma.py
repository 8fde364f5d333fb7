"""GPU check of the Hopper "wgmma" kernel family: correctness and speed of several configurations.

Renders a fixed set of named configurations (plus the family's default for each shape), evaluates
each on every shape it supports, prints a compact table and writes JSON to `--out`.

Two back ends:
- default: the project's `LocalEvaluator` (correctness suite + timing against the baselines);
- `--raw`: a small standalone harness (nvcc -> .so -> ctypes; torch for data, the reference and
  the cuBLAS timing) for when the evaluator is unavailable. It holds no kernel code: it only loads
  the rendered family source compiled from disk.

Invariants: every configuration passes the family's `check` before it is compiled; a shape the
configuration does not support is reported as "skip" with the reason, never silently dropped.
Meant to finish in under 4 minutes on one H100.

Usage: python bench/check_wgmma.py [--raw] [--out bench/results/wgmma.json] [--shapes 1024x1024x1024,...]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluator.kernels.wgmma_family import FAMILIES  # noqa: E402

FAMILY = FAMILIES["wgmma"]
SHAPES = [(1024, 1024, 1024), (4096, 4096, 4096), (8192, 8192, 4096), (512, 4096, 4096), (16384, 4096, 256)]
_BASE = {
    "bm": 128,
    "consumers": 2,
    "group_m": 8,
    "persistent": 1,
    "epilogue": 1,
    "cluster_m": 1,
    "pingpong": 0,
}
CONFIGS: dict[str, dict] = {
    "simple": {**_BASE, "bn": 128, "stages": 4, "persistent": 0, "epilogue": 0},
    "persist": {**_BASE, "bn": 256, "stages": 4, "epilogue": 0},
    "tma_epi": {**_BASE, "bn": 256, "stages": 3},
    "bn128": {**_BASE, "bn": 128, "stages": 6},
    "cluster": {**_BASE, "bn": 256, "stages": 4, "epilogue": 0, "cluster_m": 2},
    "cluster_epi": {**_BASE, "bn": 128, "stages": 6, "cluster_m": 2},
    "bm256": {**_BASE, "bm": 256, "bn": 128, "stages": 4, "epilogue": 0},
    "one_consumer": {**_BASE, "consumers": 1, "bn": 128, "stages": 5},
    "pingpong": {**_BASE, "bn": 128, "stages": 4, "pingpong": 1},
    "pingpong64": {**_BASE, "bm": 64, "bn": 256, "stages": 4, "pingpong": 1},
}
NVCC_FLAGS = [
    "-O3", "-std=c++17", "--expt-relaxed-constexpr",
    "-gencode=arch=compute_90a,code=sm_90a", "-gencode=arch=compute_80,code=sm_80",
    "-shared", "-Xcompiler", "-fPIC",
]  # fmt: skip


def configs_for(shape: tuple[int, int, int]) -> list[tuple[str, dict | None, str | None]]:
    """(name, params, skip reason) for each named config and the shape's default."""
    out = []
    default = FAMILY.default_params(*shape)
    for name, params in [*CONFIGS.items(), ("default", default)]:
        if params is None:
            out.append((name, None, "no valid default for this shape"))
        else:
            out.append((name, params, FAMILY.check(params, *shape)))
    return out


def tflops(shape: tuple[int, int, int], us: float | None) -> float | None:
    M, N, K = shape
    return None if not us else 2.0 * M * N * K / (us * 1e-6) / 1e12


# ---------------------------------------------------------------------------------------------
# Evaluator back end
# ---------------------------------------------------------------------------------------------
def run_evaluator(shapes) -> list[dict]:
    from evaluator.local import LocalEvaluator

    rows = []
    with LocalEvaluator() as ev:
        for shape in shapes:
            todo = []
            for name, params, reason in configs_for(shape):
                if reason:
                    rows.append(row(name, params, shape, status="skip", message=reason))
                else:
                    todo.append((name, params))
            if not todo:
                continue
            recs = ev.evaluate([FAMILY.render(p) for _, p in todo], *shape, stage="quick", modes=("offline",))
            for (name, params), rec in zip(todo, recs):
                us = rec.median_us("offline") if rec.correct else None
                rows.append(
                    row(name, params, shape, status="ok" if rec.ok else (rec.failure_kind or "fail"),
                        message=(rec.failure_message or "")[:300], median_us=us,
                        speedup=rec.speedup_best("offline") if rec.correct else None,
                        max_rel_err=getattr(rec, "max_rel_err", None))
                )  # fmt: skip
    return rows


# ---------------------------------------------------------------------------------------------
# Standalone back end (--raw)
# ---------------------------------------------------------------------------------------------
def compile_so(source: str, workdir: Path, tag: str) -> tuple[Path | None, str]:
    cu = workdir / f"{tag}.cu"
    so = workdir / f"{tag}.so"
    cu.write_text(source)
    proc = subprocess.run(["nvcc", *NVCC_FLAGS, str(cu), "-o", str(so)], capture_output=True, text=True)
    return (so if proc.returncode == 0 else None), proc.stderr[-2000:]


def load_lib(path: Path):
    lib = ctypes.CDLL(str(path))
    vp, i = ctypes.c_void_p, ctypes.c_int
    lib.hgemm_run.argtypes = [vp, vp, vp, vp, i, i, i, vp, ctypes.c_size_t, vp]
    lib.hgemm_run.restype = i
    lib.hgemm_supports.argtypes = [i, i, i]
    lib.hgemm_supports.restype = i
    return lib


def time_us(fn, stream, iters: int = 30, warmup: int = 5) -> float:
    import torch

    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        fn()
        end.record(stream)
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(times)


def run_raw(shapes) -> list[dict]:
    import torch

    rows: list[dict] = []
    libs: dict[str, tuple] = {}
    workspace = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    with tempfile.TemporaryDirectory(prefix="check_wgmma_") as tmp:
        for shape in shapes:
            rows += raw_shape(shape, libs, Path(tmp), workspace)
    return rows


def raw_shape(shape: tuple[int, int, int], libs: dict[str, tuple], tmp: Path, workspace) -> list[dict]:
    """Check and time every configuration on one shape against torch (fp32 reference, cuBLAS timing)."""
    import torch

    M, N, K = shape
    stream = torch.cuda.current_stream()
    gen = torch.Generator(device="cuda").manual_seed(M * 31 + N * 7 + K)
    A = torch.rand(M, K, device="cuda", dtype=torch.float16, generator=gen) * 2 - 1
    B = torch.rand(K, N, device="cuda", dtype=torch.float16, generator=gen) * 2 - 1
    Bt = B.t().contiguous()
    ref = A.float() @ B.float()
    scale = ref.abs().max().item()
    cublas_us = time_us(lambda: torch.matmul(A, B), stream)
    rows = []
    for name, params, reason in configs_for(shape):
        if reason:
            rows.append(row(name, params, shape, status="skip", message=reason))
            continue
        source = FAMILY.render(params)
        if source not in libs:
            so, log = compile_so(source, tmp, f"k{len(libs)}")
            libs[source] = (load_lib(so) if so else None, log)
        lib, log = libs[source]
        if lib is None:
            rows.append(row(name, params, shape, status="compile_error", message=log[-300:]))
            continue
        if not lib.hgemm_supports(M, N, K):
            rows.append(row(name, params, shape, status="skip", message="hgemm_supports returned 0"))
            continue
        C = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)
        args = (A.data_ptr(), B.data_ptr(), Bt.data_ptr(), C.data_ptr(), M, N, K,
                workspace.data_ptr(), workspace.numel(), stream.cuda_stream)  # fmt: skip
        err = lib.hgemm_run(*args)
        torch.cuda.synchronize()
        if err != 0:
            rows.append(row(name, params, shape, status="launch_error", message=f"hgemm_run returned {err}"))
            continue
        nan = int(torch.isnan(C).sum().item())
        rel = (C.float() - ref).abs().max().item() / scale
        if nan or not rel < 2e-3:
            message = f"{nan} unwritten/NaN elements, max rel err {rel:.2e}"
            rows.append(row(name, params, shape, status="incorrect", max_rel_err=rel, message=message))
            continue
        us = time_us(lambda lib=lib, args=args: lib.hgemm_run(*args), stream)
        rows.append(
            row(name, params, shape, status="ok", median_us=us, speedup=cublas_us / us, max_rel_err=rel)
        )
    return rows


def row(name, params, shape, *, status, message="", median_us=None, speedup=None, max_rel_err=None) -> dict:
    return {
        "config": name, "params": params, "M": shape[0], "N": shape[1], "K": shape[2], "status": status,
        "median_us": median_us, "tflops": tflops(shape, median_us), "speedup": speedup,
        "max_rel_err": max_rel_err, "message": message,
    }  # fmt: skip


def print_table(rows: list[dict]) -> None:
    print(f"{'shape':>18} {'config':>13} {'status':>14} {'us':>9} {'TFLOP/s':>8} {'speedup':>8}  note")
    for r in rows:
        shape = f"{r['M']}x{r['N']}x{r['K']}"
        us = f"{r['median_us']:.1f}" if r["median_us"] else "-"
        tf = f"{r['tflops']:.0f}" if r["tflops"] else "-"
        sp = f"{r['speedup']:.2f}" if r["speedup"] else "-"
        note = (r["message"] or "").splitlines()[0][:70] if r["message"] else ""
        print(f"{shape:>18} {r['config']:>13} {r['status']:>14} {us:>9} {tf:>8} {sp:>8}  {note}")


def parse_shapes(text: str | None) -> list[tuple[int, int, int]]:
    if not text:
        return SHAPES
    return [tuple(int(x) for x in s.lower().split("x")) for s in text.split(",")]  # type: ignore[misc]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--raw", action="store_true", help="standalone ctypes/torch harness instead of the evaluator"
    )
    ap.add_argument("--out", default="bench/results/wgmma.json")
    ap.add_argument(
        "--shapes", default=None, help="comma-separated MxNxK list (default: the five standard shapes)"
    )
    args = ap.parse_args(argv)
    shapes = parse_shapes(args.shapes)
    started = time.time()
    rows = run_raw(shapes) if args.raw else run_evaluator(shapes)
    print_table(rows)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    backend = "raw" if args.raw else "evaluator"
    out.write_text(json.dumps({"backend": backend, "seconds": time.time() - started, "rows": rows}, indent=1))
    print(f"wrote {out} ({len(rows)} rows, {time.time() - started:.0f} s)", file=sys.stderr)
    bad = [r for r in rows if r["status"] not in ("ok", "skip")]
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
