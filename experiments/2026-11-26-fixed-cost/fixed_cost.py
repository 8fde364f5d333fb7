"""Where the wgmma family loses on mid-size, few-tile shapes (H100, 2026-11-26): after the input-check fix, 70 of
the full grid's 385 cheapest shapes are below 0.90x offline, nearly all wgmma, 4-15 us, mostly K <= 2048, while
server mode is near parity. Is it a fixed cost per launch (prologue, epilogue, launch) or the main loop's rate?

For each output shape M x N and one wgmma configuration (the full-grid winner at the K named), time the kernel and
torch.matmul (the library) back to back (offline: a graph of launches on fixed inputs, warm L2) and alone after an
L2 flush (server) at K = 64 .. 4096, then fit time = a + b * K per contender: a is the fixed cost, b the rate.
Inputs are fixed and trusted here (no evaluator): this compares like with like, nothing more.

Usage (one GPU): python fixed_cost.py OUT_DIR
"""

from __future__ import annotations

import ctypes
import json
import sys
from pathlib import Path

import torch
from hgemm.evaluator import timing
from hgemm.evaluator.compile import compile_sources
from hgemm.evaluator.kernels import get_family

from hgemm.core.shape import Shape

KS = (64, 128, 256, 512, 1024, 2048, 4096)
BASE = {"cluster_m": 1, "split_k": 1, "split_dsmem": 0, "stream_k": 0, "swap_ab": 0, "persistent": 1,
        "group_m": 8, "epi_panels": 0}  # fmt: skip
CASES = [  # (M, N, the full-grid winner's configuration there)
    (512, 512, {"bm": 64, "bn": 64, "consumers": 1, "pingpong": 0, "epilogue": 1, "stages": 12, "group_m": 16}),
    (1024, 256, {"bm": 64, "bn": 32, "consumers": 1, "pingpong": 0, "epilogue": 1, "stages": 16, "group_m": 4}),
    (64, 4096, {"bm": 64, "bn": 32, "consumers": 2, "pingpong": 1, "epilogue": 1, "epi_panels": 2, "stages": 16}),
    (12288, 256, {"bm": 128, "bn": 64, "consumers": 2, "pingpong": 1, "epilogue": 1, "stages": 8}),
    (1024, 1024, {"bm": 64, "bn": 128, "consumers": 1, "pingpong": 0, "epilogue": 1, "stages": 8, "cluster_m": 2}),
    (4096, 2048, {"bm": 128, "bn": 128, "consumers": 2, "pingpong": 1, "epilogue": 1, "stages": 5, "group_m": 16}),
]


def loaded(params: dict):
    return load(get_family("wgmma").render(params))


def load(source: str):
    """hgemm_run of `source`, compiled (through the evaluator's compile cache) and loaded."""
    (built,) = compile_sources([source])
    if not built.ok:
        raise RuntimeError(built.message)
    run = ctypes.CDLL(built.lib_path, mode=ctypes.RTLD_LOCAL).hgemm_run
    vp, ci = ctypes.c_void_p, ctypes.c_int
    run.restype, run.argtypes = ci, [vp, vp, vp, vp, ci, ci, ci, vp, ctypes.c_size_t, vp]
    return run


def fit(ks, ts):
    n = len(ks)
    mk, mt = sum(ks) / n, sum(ts) / n
    b = sum((k - mk) * (t - mt) for k, t in zip(ks, ts, strict=True)) / sum((k - mk) ** 2 for k in ks)
    return mt - b * mk, b


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    family = get_family("wgmma")
    stream = torch.cuda.Stream()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    ws = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    rows = []
    for M, N, cfg in CASES:
        params = {**BASE, **cfg}
        run = loaded(params)
        for K in KS:
            shape = Shape(M, N, K)
            why = family.check(params, shape)
            if why is not None:
                print(f"{M}x{N}x{K}: skipped ({why})")
                continue
            A = torch.randn(M, K, device="cuda", dtype=torch.float16)
            B = torch.randn(K, N, device="cuda", dtype=torch.float16)
            Bt = B.t().contiguous()
            C = torch.empty(M, N, device="cuda", dtype=torch.float16)
            Ct = torch.empty(M, N, device="cuda", dtype=torch.float16)

            def ours(A=A, B=B, Bt=Bt, C=C, M=M, N=N, K=K, run=run):
                rc = run(A.data_ptr(), B.data_ptr(), Bt.data_ptr(), C.data_ptr(), M, N, K, ws.data_ptr(),
                         ws.numel(), torch.cuda.current_stream().cuda_stream)  # fmt: skip
                assert rc == 0, rc

            def lib(A=A, B=B, Ct=Ct):
                torch.mm(A, B, out=Ct)

            with torch.cuda.stream(stream):
                ours()
                lib()
            stream.synchronize()
            err = (C.float() - Ct.float()).abs().max().item()
            off = timing.time_offline({"ours": ours, "lib": lib}, stream, samples=15)
            srv = timing.time_server({"ours": ours, "lib": lib}, stream, l2, samples=20)
            row = {"M": M, "N": N, "K": K, "params": params, "max_abs_diff": err,
                   "offline_us": {n: s.median_us for n, s in off.items()},
                   "server_us": {n: s.median_us for n, s in srv.items()}}  # fmt: skip
            rows.append(row)
            o, s = row["offline_us"], row["server_us"]
            print(f"{M}x{N}x{K:<5} offline ours {o['ours']:7.2f} lib {o['lib']:7.2f} ({o['lib'] / o['ours']:.3f}x)  "
                  f"server ours {s['ours']:7.2f} lib {s['lib']:7.2f} ({s['lib'] / s['ours']:.3f}x)  diff {err:.3g}",
                  flush=True)  # fmt: skip
        mine = [r for r in rows if (r["M"], r["N"]) == (M, N)]
        if len(mine) >= 3:
            for mode in ("offline_us", "server_us"):
                parts = []
                for who in ("ours", "lib"):
                    a, b = fit([r["K"] for r in mine], [r[mode][who] for r in mine])
                    parts.append(f"{who} {a:6.2f} us + {1000 * b:6.3f} us per 1000 K")
                print(f"  {M}x{N} {mode[:-3]:8s} fit: " + ";  ".join(parts))
        (out / "fixed-cost.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
