"""GPU check of the Hopper "wgmma" kernel family: correctness and speed of named and generated configurations.

Evaluates the named configurations (`CONFIGS`, plus the family's default) on every shape each supports;
`--sweep` adds generated tile / consumer / split-K / cluster variants per shape (`sweep_configs`), `--configs
a,b` keeps only the named ones. Prints a compact table and writes JSON to --out.

Usage: python -m hgemm.bench.check_wgmma [--raw] [--sweep] [--configs simple,tma_epi]
       [--shapes 1024x1024x1024,...] [--out bench/results/wgmma.json]

- Back ends: `LocalEvaluator` at stage "quick" (correctness suite, then offline timing against the
  baselines), or with `--raw` a standalone harness (nvcc -> .so -> ctypes; torch for data, the fp32 reference
  and cuBLAS timing) that holds no kernel code of its own.
- Every configuration passes the family's `check` before it is compiled; one the shape does not support is
  reported as "skip" with the reason, never dropped.
- Every configuration renders exactly as the search renders it (the template has no switches of its own).
- The evaluator back end rewrites --out after every shape. Exit status 1 when any configuration is neither
  "ok" nor "skip".
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

from hgemm.evaluator.compile import DEFAULT_ARCHS, nvcc_flags
from hgemm.evaluator.kernels.wgmma_family import FAMILIES

from hgemm.core.shape import Shape

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
    "one_consumer_cl2": {**_BASE, "consumers": 1, "bn": 128, "stages": 5, "cluster_m": 2},
    "pingpong": {**_BASE, "bn": 128, "stages": 4, "pingpong": 1},
    "pingpong64": {**_BASE, "bm": 64, "bn": 256, "stages": 4, "pingpong": 1},
    "cluster_256": {**_BASE, "bn": 256, "stages": 3, "cluster_m": 2},
    "splitk4": {**_BASE, "bn": 128, "stages": 6, "epilogue": 0, "split_k": 4},
    "m64_splitk8": {**_BASE, "bm": 64, "consumers": 1, "bn": 128, "stages": 8, "epilogue": 0, "split_k": 8},
    "dsmem_splitk4": {**_BASE, "bn": 128, "stages": 6, "epilogue": 0, "persistent": 0, "split_k": 4,
                      "split_dsmem": 1},
    "m64_dsmem_splitk8": {**_BASE, "bm": 64, "consumers": 1, "bn": 128, "stages": 8, "epilogue": 0,
                          "persistent": 0, "split_k": 8, "split_dsmem": 1},
    "pingpong_cl2": {**_BASE, "bn": 128, "stages": 5, "pingpong": 1, "cluster_m": 2},
    "cluster_256_panels": {**_BASE, "bn": 256, "stages": 4, "cluster_m": 2, "epi_panels": 2},
    "tma_epi_panels": {**_BASE, "bn": 256, "stages": 4, "epi_panels": 2},
    "streamk": {**_BASE, "bn": 128, "stages": 6, "stream_k": 1},
    "streamk_256_cl2": {**_BASE, "bn": 256, "stages": 4, "cluster_m": 2, "epi_panels": 2, "stream_k": 1},
    "m64_streamk_direct": {**_BASE, "bm": 64, "consumers": 1, "bn": 128, "stages": 8, "epilogue": 0,
                           "stream_k": 1},
    # 192-column tiles: N need not be a multiple (the last tile column is clipped by TMA)
    "wide": {**_BASE, "bn": 192, "stages": 4},
    "wide_cl2": {**_BASE, "bn": 192, "stages": 4, "cluster_m": 2},
    "wide_pp64": {**_BASE, "bm": 64, "bn": 192, "stages": 5, "pingpong": 1},
    # ping-pong consumers each holding a whole 128x192 tile (192 accumulators), C through the panel ring
    "wide_pp": {**_BASE, "bn": 192, "stages": 4, "pingpong": 1, "epi_panels": 2},
    "wide_pp_cl2": {**_BASE, "bn": 192, "stages": 4, "pingpong": 1, "epi_panels": 2, "cluster_m": 2},
    # 160-column tiles: C in 32-column panels (64-byte swizzle); with them a 5-deep ring fits
    "pp160_cl2": {**_BASE, "bn": 160, "stages": 5, "pingpong": 1, "epi_panels": 2, "cluster_m": 2},
    "pp160": {**_BASE, "bn": 160, "stages": 5, "pingpong": 1, "epi_panels": 2},
    "coop160_cl2": {**_BASE, "bn": 160, "stages": 5, "epi_panels": 2, "cluster_m": 2},
    "pp160_whole": {**_BASE, "bn": 160, "stages": 4, "pingpong": 1, "cluster_m": 2},
    # 64x64 tiles with a deep ring (cuBLASLt's heuristic kernel for 2048x256x4096 keeps 13 stages)
    "m64n64_s8": {**_BASE, "bm": 64, "bn": 64, "consumers": 1, "stages": 8},
    "m64n64_s12": {**_BASE, "bm": 64, "bn": 64, "consumers": 1, "stages": 12},
    "m64n64_s12_cl2": {**_BASE, "bm": 64, "bn": 64, "consumers": 1, "stages": 12, "cluster_m": 2},
    # 64x32 tiles with a 16-deep ring (cuBLASLt's kernel for 128x2048x1024: 64x32, 16 stages, 2x1)
    "slim16_cl2": {**_BASE, "bm": 64, "bn": 32, "consumers": 1, "stages": 16, "cluster_m": 2},
    "slim16": {**_BASE, "bm": 64, "bn": 32, "consumers": 1, "stages": 16},
    # the producer's loop in its whole warp, an elected lane issuing
    "slim16_warp": {**_BASE, "bm": 64, "bn": 32, "consumers": 1, "stages": 16, "warp_producer": 1},
    "cluster_epi_warp": {**_BASE, "bn": 128, "stages": 6, "cluster_m": 2, "warp_producer": 1},
    "streamk_warp": {**_BASE, "bn": 128, "stages": 6, "stream_k": 1, "warp_producer": 1},
    "dsmem_splitk4_warp": {**_BASE, "bn": 128, "stages": 6, "epilogue": 0, "persistent": 0, "split_k": 4,
                           "split_dsmem": 1, "warp_producer": 1},
    "slim8_cl2": {**_BASE, "bm": 64, "bn": 32, "consumers": 1, "stages": 8, "cluster_m": 2},
    "slim16_cl2_np": {**_BASE, "bm": 64, "bn": 32, "consumers": 1, "stages": 16, "cluster_m": 2, "persistent": 0},
    "m64n64_s16_cl2": {**_BASE, "bm": 64, "bn": 64, "consumers": 1, "stages": 16, "cluster_m": 2},
    "m64n64_s8_cl2": {**_BASE, "bm": 64, "bn": 64, "consumers": 1, "stages": 8, "cluster_m": 2},
    # 192-row tiles: three consumer warpgroups of 64 rows; M need not be a multiple (TMA clips the last tile row)
    "m192": {**_BASE, "bm": 192, "bn": 128, "consumers": 3, "stages": 4},
    "m192_cl2": {**_BASE, "bm": 192, "bn": 128, "consumers": 3, "stages": 4, "cluster_m": 2},
    "m192_wide": {**_BASE, "bm": 192, "bn": 192, "consumers": 3, "stages": 3},
    "m192_wide_cl2": {**_BASE, "bm": 192, "bn": 192, "consumers": 3, "stages": 3, "cluster_m": 2},
    "m192_n64": {**_BASE, "bm": 192, "bn": 64, "consumers": 3, "stages": 6},
    # widths between the powers of two (any multiple of 16): 256-row cooperative tiles of 144 columns, 224
    # columns with C in 32-column panels, ping-pong 176, one consumer 80; the transposed product 16 and 48 wide
    "w256x144_cl2": {**_BASE, "bm": 256, "bn": 144, "stages": 4, "epilogue": 0, "cluster_m": 2},
    "w224_panels_cl2": {**_BASE, "bn": 224, "stages": 4, "cluster_m": 2, "epi_panels": 2},
    "w176_pp_cl2": {**_BASE, "bn": 176, "stages": 4, "pingpong": 1, "epilogue": 0, "cluster_m": 2},
    "m64n80_cl2": {**_BASE, "bm": 64, "bn": 80, "consumers": 1, "stages": 8, "epilogue": 0, "cluster_m": 2},
    "swap16_splitk4": {**_BASE, "bm": 64, "bn": 16, "consumers": 1, "stages": 8, "epilogue": 0, "swap_ab": 1,
                       "split_k": 4},
    "swap48": {**_BASE, "bm": 64, "bn": 48, "consumers": 1, "stages": 8, "epilogue": 0, "swap_ab": 1},
    # clusters of four along M, each CTA loading a quarter of the Bt tile (of A in the transposed product)
    "pp96_cl4": {**_BASE, "bn": 96, "stages": 6, "pingpong": 1, "epi_panels": 2, "cluster_m": 4},
    "w256_cl4": {**_BASE, "bn": 256, "stages": 4, "epi_panels": 2, "cluster_m": 4},
    "swap96_cl4": {**_BASE, "bm": 64, "bn": 96, "consumers": 1, "stages": 10, "epilogue": 0, "swap_ab": 1,
                   "cluster_m": 4},
}  # fmt: skip
WIDTHS = ["w256x144_cl2", "w224_panels_cl2", "w176_pp_cl2", "m64n80_cl2", "swap16_splitk4", "swap48"]
SMS = 132


def best_stages(params: dict, shape: tuple[int, int, int], most: int = 8) -> dict | None:
    """`params` with the deepest ring (<= most) that passes the family check, or None."""
    for stages in range(most, 1, -1):
        candidate = {**params, "stages": stages}
        if FAMILY.check(candidate, Shape(*shape)) is None:
            return candidate
    return None


def sweep_configs(shape: tuple[int, int, int], limit: int = 40) -> dict[str, dict]:
    """Generated variants for one shape: (bm, consumers) x bn x split_k with a sensible unit count,
    plus ping-pong and 2x1-cluster variants of the no-split tiles. Names encode the parameters."""
    M, N, K = shape
    out: dict[str, dict] = {}
    for bm, consumers in ((64, 1), (128, 1), (128, 2), (192, 3)):
        for bn in (64, 128, 192, 256):
            # 192: a partial last tile row or column (TMA clips it)
            if (M % bm and bm != 192) or M % 64 or N % 64 or (N % bn and bn != 192):
                continue
            tiles = -(-M // bm) * -(-N // bn)
            for split in FAMILY.space["split_k"]:
                units = tiles * split
                few = units < 0.75 * SMS and split < 16  # tiny grids: only the deep splits
                if split > 1 and (tiles >= 2 * SMS or few or units > 8 * SMS):
                    continue
                params = {**_BASE, "bm": bm, "consumers": consumers, "bn": bn, "split_k": split,
                          "epilogue": 1 if split == 1 else 0}  # fmt: skip
                params = best_stages(params, shape)
                if params is None:
                    continue
                out[f"b{bm}x{bn}c{consumers}s{split}"] = params
                if 1 < split <= 8:  # the same split summed in the cluster's shared memory
                    dsk = best_stages({**params, "persistent": 0, "split_dsmem": 1}, shape)
                    if dsk is not None:
                        out[f"b{bm}x{bn}c{consumers}s{split}dsk"] = dsk
                if split == 1 and tiles % SMS and consumers <= 2:  # the last partial wave cut into k-block ranges
                    out[f"b{bm}x{bn}c{consumers}sk"] = {**params, "stream_k": 1}
                    if consumers == 2 and bm == 128 and M >= 1024:
                        skcl = best_stages({**params, "stream_k": 1, "cluster_m": 2}, shape)
                        if skcl is not None:
                            out[f"b{bm}x{bn}skcl2"] = skcl
                if split == 1 and bm == 64 and consumers == 1 and bn >= 128:
                    # ping-pong on 64-row tiles: each consumer owns a whole 64 x bn tile, so one tile's
                    # epilogue overlaps the other's main loop (with and without B multicast)
                    for c in (1, 2):
                        pp = best_stages({**params, "consumers": 2, "pingpong": 1, "cluster_m": c}, shape)
                        if pp is not None:
                            out[f"b64x{bn}pp{'cl2' if c == 2 else ''}"] = pp
                if split == 1 and consumers == 2 and bm == 128:
                    pp = best_stages({**params, "pingpong": 1}, shape)
                    if pp is not None:
                        out[f"b{bm}x{bn}pp"] = pp
                    cl = best_stages({**params, "cluster_m": 2}, shape)
                    if cl is not None and M >= 1024 and N >= 1024:
                        out[f"b{bm}x{bn}cl2"] = cl
                    ppcl = best_stages({**params, "pingpong": 1, "cluster_m": 2}, shape)
                    if ppcl is not None and M >= 1024 and N >= 1024:
                        out[f"b{bm}x{bn}ppcl2"] = ppcl
                    if bn == 256:  # C staged a panel at a time: one more ring stage
                        for c in (1, 2):
                            ep = best_stages({**params, "cluster_m": c, "epi_panels": 2}, shape)
                            if ep is not None:
                                out[f"b{bm}x{bn}cl{c}ep"] = ep
                if split == 1 and bm == 192 and M >= 1024:
                    cl = best_stages({**params, "cluster_m": 2}, shape)
                    if cl is not None:
                        out[f"b192x{bn}cl2"] = cl

    # Keep the variants whose unit count fills the GPU best (fewest idle SM slots in the last wave).
    def waste(item):
        p = item[1]
        n_tiles = -(-N // p["bn"])
        units = -(-M // p["bm"]) * n_tiles * p["split_k"]
        waves = -(-units // SMS)
        padding = 1 - M * N / (-(-M // p["bm"]) * p["bm"] * n_tiles * p["bn"])  # rows and columns computed past M, N
        if p.get("stream_k"):
            return 0.01 + padding  # no idle slots, a small fix-up cost
        return (waves * SMS - units) / (waves * SMS) + padding + 0.02 * (p["split_k"] > 1) * p["split_k"] ** 0.5

    ranked = sorted(out.items(), key=waste)[:limit]
    return dict(ranked)


def configs_for(
    shape: tuple[int, int, int],
    names: list[str] | None = None,
    sweep: bool = False,
) -> list[tuple[str, dict | None, str | None]]:
    """(name, params, skip reason) for each named config (or those in `names`), the shape's default, and with
    `sweep` the generated variants."""
    out = []
    default = FAMILY.default_params(Shape(*shape))
    named = [(n, p) for n, p in CONFIGS.items() if names is None or n in names]
    extra = list(sweep_configs(shape).items()) if sweep else []
    for name, params in [*named, ("default", default), *extra]:
        if params is None:
            out.append((name, None, "no valid default for this shape"))
        else:
            out.append((name, params, FAMILY.check(params, Shape(*shape))))
    return out


def source_for(name: str, params: dict) -> str:
    """The rendered kernel of a configuration."""
    return FAMILY.render(params)


def tflops(shape: tuple[int, int, int], us: float | None) -> float | None:
    M, N, K = shape
    return None if not us else 2.0 * M * N * K / (us * 1e-6) / 1e12


# ---------------------------------------------------------------------------------------------
# Evaluator back end
# ---------------------------------------------------------------------------------------------
def run_evaluator(
    shapes, names=None, sweep=False, meta=None, out: Path | None = None
) -> list[dict]:
    """Evaluate on the GPU; with `out`, rewrite the JSON after every shape (a cut-off run keeps its rows)."""
    from hgemm.evaluator.local import LocalEvaluator

    rows = []
    with LocalEvaluator() as ev:
        if meta is not None:
            info = ev.gpu_info()
            meta.update(gpu=info.name, cc=info.cc, driver=info.driver, sm_count=info.sm_count)
        for shape in shapes:
            todo = []
            seen: set[str] = set()
            for name, params, reason in configs_for(shape, names, sweep):
                source = source_for(name, params) if params is not None and not reason else None
                if source is not None and source in seen:
                    continue  # the same kernel under another name
                if source is not None:
                    seen.add(source)
                if reason:
                    rows.append(row(name, params, shape, status="skip", message=reason))
                else:
                    todo.append((name, params))
            if not todo:
                continue
            recs = ev.evaluate([source_for(n, p) for n, p in todo], Shape(*shape), stage="quick", modes=("offline",))
            for (name, params), rec in zip(todo, recs):
                us = rec.median_us("offline") if rec.correct else None
                rows.append(
                    row(name, params, shape, status="ok" if rec.ok else (rec.failure_kind or "fail"),
                        message=(rec.failure_message or "")[:300], median_us=us,
                        speedup=rec.speedup_best("offline") if rec.correct else None,
                        max_rel_err=getattr(rec, "max_rel_err", None))
                )  # fmt: skip
            best = max((r for r in rows if r["M"] == shape[0] and r["N"] == shape[1] and r["K"] == shape[2]
                        and r["speedup"]), key=lambda r: r["speedup"], default=None)  # fmt: skip
            if best:
                print(f"{shape}: best {best['config']} {best['median_us']:.1f} us speedup {best['speedup']:.3f}",
                      flush=True)  # fmt: skip
            if out is not None:
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(
                    json.dumps({"backend": "evaluator", **(meta or {}), "partial": True, "rows": rows})
                )
    return rows


# ---------------------------------------------------------------------------------------------
# Standalone back end (--raw)
# ---------------------------------------------------------------------------------------------
def compile_so(source: str, workdir: Path, tag: str) -> tuple[Path | None, str]:
    cu = workdir / f"{tag}.cu"
    so = workdir / f"{tag}.so"
    cu.write_text(source)
    proc = subprocess.run(["nvcc", *nvcc_flags(DEFAULT_ARCHS), str(cu), "-o", str(so)], capture_output=True, text=True)
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


def run_raw(shapes, names=None, sweep=False) -> list[dict]:
    import torch

    rows: list[dict] = []
    libs: dict[str, tuple] = {}
    workspace = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    with tempfile.TemporaryDirectory(prefix="check_wgmma_") as tmp:
        for shape in shapes:
            rows += raw_shape(shape, libs, Path(tmp), workspace, names, sweep)
    return rows


def raw_shape(shape: tuple[int, int, int], libs: dict[str, tuple], tmp: Path, workspace, names=None,
              sweep=False) -> list[dict]:  # fmt: skip
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
    for name, params, reason in configs_for(shape, names, sweep):
        if reason:
            rows.append(row(name, params, shape, status="skip", message=reason))
            continue
        source = source_for(name, params)
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
        # Once more after the timed launches: state a kernel keeps between calls must not go stale.
        C.fill_(float("nan"))
        lib.hgemm_run(*args)
        torch.cuda.synchronize()
        again = (C.float() - ref).abs().max().item() / scale
        if not again < 2e-3:  # NaN compares false
            message = f"correct once, then max rel err {again:.2e} after the timed launches"
            rows.append(row(name, params, shape, status="incorrect", max_rel_err=again, message=message))
            continue
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
    ap = argparse.ArgumentParser(prog="python -m hgemm.bench.check_wgmma", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--raw", action="store_true", help="standalone ctypes/torch harness instead of the evaluator"
    )
    ap.add_argument("--out", default="bench/results/wgmma.json")
    ap.add_argument(
        "--shapes", default=None, help="comma-separated MxNxK list (default: the five standard shapes)"
    )
    ap.add_argument(
        "--sweep", action="store_true", help="add generated tile/split-K/cluster variants per shape"
    )
    ap.add_argument("--configs", default=None, help="comma-separated named configs to keep (default: all)")
    ap.add_argument(
        "--quiet-skips", action="store_true", help="leave skipped configurations out of the table"
    )
    args = ap.parse_args(argv)
    shapes = parse_shapes(args.shapes)
    names = args.configs.split(",") if args.configs else None
    started = time.time()
    meta: dict = {}
    if args.raw:
        rows = run_raw(shapes, names, args.sweep)
    else:
        rows = run_evaluator(shapes, names, args.sweep, meta, Path(args.out))
    print_table([r for r in rows if not (args.quiet_skips and r["status"] == "skip")])
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    backend = "raw" if args.raw else "evaluator"
    doc = {"backend": backend, **meta, "date": time.strftime("%Y-%m-%d"), "seconds": time.time() - started,
           "rows": rows}  # fmt: skip
    out.write_text(json.dumps(doc, indent=1))
    print(f"wrote {out} ({len(rows)} rows, {time.time() - started:.0f} s)", file=sys.stderr)
    bad = [r for r in rows if r["status"] not in ("ok", "skip")]
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
