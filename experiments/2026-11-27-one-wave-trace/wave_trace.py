"""Where a one-wave wgmma kernel's time goes, CTA by CTA (prepared 2026-11-27).

At 1024^3 the library runs one wave of 128 CTAs (128x64 or 64x128 tiles, 2x1 clusters, an 8-deep ring) in 5.8-6.0
us; our kernel of that structure takes 6.4-6.6 us (docs/performance.md, "Square and mid shapes"), and the gap is
not in the choice of configuration. This probe puts clock reads into the family's source (an edit of the rendered
text, nothing else changed) and records, for every CTA of the last of 20 back-to-back launches (one CUDA graph):

- t0: entry (%globaltimer, ns, and clock64);
- c1: barriers initialised and the cluster (or block) synchronised;
- c2: the first consumer warpgroup's first full-slot wait passed (its first data has landed);
- c3: that warpgroup's main loop done (its last wgmma waited for);
- c4: its epilogue done (TMA store waited for, where there is one); t4: %globaltimer there.

Printed per configuration (medians over CTAs, and the spread of the entry times): the kernel's offline time
(untraced, and traced: the reads must not move it), prologue c1 - c0, first data c2 - c1, main loop c3 - c2,
epilogue c4 - c3, in ns (cycles over the CTA's own clock rate, (t4 - t0) / (c4 - c0)); torch.matmul's offline time
beside them. Both builds are checked against torch.matmul first.

Usage (one GPU): python trace.py OUT_DIR   (writes trace.json; about a minute)
"""

from __future__ import annotations

import ctypes
import json
import statistics
import sys
from pathlib import Path

import torch
from hgemm.evaluator import timing
from hgemm.evaluator.compile import compile_sources
from hgemm.evaluator.kernels import get_family

from hgemm.core.shape import Shape

BASE = {"split_k": 1, "split_dsmem": 0, "stream_k": 0, "swap_ab": 0, "persistent": 1, "group_m": 8, "epi_panels": 0,
        "pingpong": 0, "warp_producer": 0, "stage_k": 64}  # fmt: skip
CASES = [  # (M, N, K, name, configuration)
    (1024, 1024, 1024, "64x128 c2 tma-store", {"bm": 64, "bn": 128, "cluster_m": 2, "consumers": 1, "epilogue": 1,
                                               "stages": 8}),  # fmt: skip
    (1024, 1024, 1024, "128x64 c2 tma-store", {"bm": 128, "bn": 64, "cluster_m": 2, "consumers": 2, "epilogue": 1,
                                               "stages": 8}),  # fmt: skip
    (1024, 1024, 1024, "128x64 c1 tma-store", {"bm": 128, "bn": 64, "cluster_m": 1, "consumers": 2, "epilogue": 1,
                                               "stages": 8}),  # fmt: skip
    (1024, 1024, 1024, "64x128 c2 registers", {"bm": 64, "bn": 128, "cluster_m": 2, "consumers": 1, "epilogue": 0,
                                               "stages": 8}),  # fmt: skip
    (1024, 1024, 4096, "64x128 c2 tma-store", {"bm": 64, "bn": 128, "cluster_m": 2, "consumers": 1, "epilogue": 1,
                                               "stages": 8}),  # fmt: skip
    (512, 512, 2048, "64x64 deep", {"bm": 64, "bn": 64, "cluster_m": 1, "consumers": 1, "epilogue": 1, "stages": 6,
                                    "warp_producer": 1, "stage_k": 128}),  # fmt: skip
]
SLOTS = 8  # per CTA: t0, c0, c1, c2, c3, c4, t4, smid
MAX_CTAS = 4096

# (anchor in the family's source, found once; text inserted before it, text inserted after it)
EDITS = [
    ("__global__ void __launch_bounds__(hgw_cfg::THREADS, 1)\n    hgemm_wgmma_kernel(",
     f"__device__ unsigned long long hg_trace[{MAX_CTAS * SLOTS}];  // probe\n\n", ""),
    ("  using namespace hgw;\n  extern __shared__ uint8_t smem_raw[];\n", "",
     "  unsigned long long hg_t0;\n  asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(hg_t0));\n"
     "  const long long hg_c0 = clock64();\n"),
    ("  // The split-K reduction may start launching now;", "  const long long hg_c1 = clock64();\n", ""),
    ("    int it = 0;  // ring position: k-blocks of this CTA's tile sequence seen so far\n", "",
     "    long long hg_c2 = 0, hg_c3 = 0;\n"),
    ("        mbar_wait(full_bar + 8 * s, static_cast<uint32_t>(it / STAGES) & 1);\n", "",
     "        if (hg_c2 == 0) hg_c2 = clock64();\n"),
    ("      wgmma_wait<0>();\n      fence_acc(acc);\n", "", "      if (hg_c3 == 0) hg_c3 = clock64();\n"),
    ("    if (SPLIT_K == 1 && wg_thread == 0) tma_store_wait_all();\n#endif\n", "",
     "    if (cw == 0 && wg_thread == 0 && blockIdx.x < " + str(MAX_CTAS) + ") {\n"
     "      const long long hg_c4 = clock64();\n      unsigned long long hg_t4;\n      unsigned smid;\n"
     "      asm volatile(\"mov.u64 %0, %%globaltimer;\" : \"=l\"(hg_t4));\n"
     "      asm volatile(\"mov.u32 %0, %%smid;\" : \"=r\"(smid));\n"
     f"      unsigned long long* o = hg_trace + blockIdx.x * {SLOTS};\n"
     "      o[0] = hg_t0; o[1] = hg_c0; o[2] = hg_c1; o[3] = hg_c2; o[4] = hg_c3; o[5] = hg_c4; o[6] = hg_t4;"
     " o[7] = smid;\n    }\n"),
]
READER = f"""
extern "C" int hgemm_trace(unsigned long long* out, int ctas) {{  // probe: the last launch's records
  return static_cast<int>(cudaMemcpyFromSymbol(out, hg_trace, sizeof(unsigned long long) * {SLOTS} * ctas));
}}
"""


def traced(source: str) -> str:
    for anchor, before, after in EDITS:
        if source.count(anchor) != 1:
            raise RuntimeError(f"anchor not found once in the family's source: {anchor[:60]!r}")
        source = source.replace(anchor, before + anchor + after)
    return source + READER


def load(source: str, trace: bool):
    (built,) = compile_sources([source], check=False)  # the probe's own edit: trusted, not a candidate
    if not built.ok:
        raise RuntimeError(built.message[:2000])
    lib = ctypes.CDLL(built.lib_path, mode=ctypes.RTLD_LOCAL)
    run = lib.hgemm_run
    vp, ci = ctypes.c_void_p, ctypes.c_int
    run.restype, run.argtypes = ci, [vp, vp, vp, vp, ci, ci, ci, vp, ctypes.c_size_t, vp]
    if trace:
        lib.hgemm_trace.restype, lib.hgemm_trace.argtypes = ci, [vp, ci]
        return run, lib.hgemm_trace
    return run, None


def records(read) -> list[dict]:
    """The last launch's per-CTA records, in ns (cycles over each CTA's own clock rate)."""
    buf = (ctypes.c_ulonglong * (MAX_CTAS * SLOTS))()
    assert read(ctypes.addressof(buf), MAX_CTAS) == 0
    ctas = []
    for b in range(MAX_CTAS):
        t0, c0, c1, c2, c3, c4, t4, sm = buf[b * SLOTS : (b + 1) * SLOTS]
        if t0 == 0 or c4 <= c0:
            continue
        ns = (t4 - t0) / (c4 - c0)
        ctas.append({"cta": b, "sm": sm, "t0": t0, "t4": t4, "ns_per_cycle": ns, "prologue_ns": (c1 - c0) * ns,
                     "first_data_ns": (c2 - c1) * ns, "main_loop_ns": (c3 - c2) * ns,
                     "epilogue_ns": (c4 - c3) * ns})  # fmt: skip
    return ctas


def measure(M: int, N: int, K: int, name: str, params: dict, source: str, stream, ws) -> dict:
    plain, _ = load(source, False)
    run, read = load(traced(source), True)
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    B = torch.randn(K, N, device="cuda", dtype=torch.float16)
    Bt = B.t().contiguous()
    C = torch.empty(M, N, device="cuda", dtype=torch.float16)
    ref = torch.mm(A, B).float()

    def call(fn):
        return lambda: fn(A.data_ptr(), B.data_ptr(), Bt.data_ptr(), C.data_ptr(), M, N, K, ws.data_ptr(),
                          ws.numel(), torch.cuda.current_stream().cuda_stream)  # fmt: skip

    for label, fn in (("plain", plain), ("traced", run)):
        C.fill_(float("nan"))
        with torch.cuda.stream(stream):
            assert call(fn)() == 0
        torch.cuda.synchronize()
        err = (C.float() - ref).abs().max().item()
        assert err < 0.05 * ref.abs().max().item(), (name, label, err)  # NaN fails too
    times = timing.time_offline({"lib": lambda: torch.mm(A, B, out=C), "plain": call(plain), "traced": call(run)},
                                stream, samples=15)  # fmt: skip
    graph = timing.capture(call(run), 20, stream)  # back to back, as the offline timing runs them
    with torch.cuda.stream(stream):
        graph.replay()
    torch.cuda.synchronize()
    ctas = records(read)
    first = min(c["t0"] for c in ctas)
    keys = ("prologue_ns", "first_data_ns", "main_loop_ns", "epilogue_ns", "ns_per_cycle")
    return {"M": M, "N": N, "K": K, "config": name, "params": params, "ctas": len(ctas),
            "offline_us": {n: st.median_us for n, st in times.items()},
            "median": {k: statistics.median(c[k] for c in ctas) for k in keys},
            "entry_spread_ns": max(c["t0"] for c in ctas) - first, "last_exit_ns": max(c["t4"] for c in ctas) - first,
            "per_cta": ctas}  # fmt: skip


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    family = get_family("wgmma")
    stream = torch.cuda.Stream()
    ws = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    results = []
    for M, N, K, name, cfg in CASES:
        params = family.repair({**BASE, **cfg})
        why = family.check(params, Shape(M, N, K))
        if why is not None:
            print(f"{M}x{N}x{K} {name}: skipped ({why})", flush=True)
            continue
        try:
            row = measure(M, N, K, name, params, family.render(params), stream, ws)
        except (AssertionError, RuntimeError, ValueError) as e:  # one case's failure is reported, the rest go on
            print(f"{M}x{N}x{K} {name}: failed ({type(e).__name__}: {e})", flush=True)
            results.append({"M": M, "N": N, "K": K, "config": name, "error": f"{type(e).__name__}: {e}"})
            continue
        results.append(row)
        o, med = row["offline_us"], row["median"]
        print(f"{M}x{N}x{K} {name}: lib {o['lib']:.2f}  ours {o['plain']:.2f} (traced {o['traced']:.2f}) us; "
              f"{row['ctas']} CTAs, entries spread {row['entry_spread_ns']} ns, last exit {row['last_exit_ns']} ns; "
              f"median prologue {med['prologue_ns']:.0f}  first data {med['first_data_ns']:.0f}  "
              f"main loop {med['main_loop_ns']:.0f}  epilogue {med['epilogue_ns']:.0f} ns", flush=True)  # fmt: skip
        (out / "trace.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
