"""Second probe: which structure gets the library's time per K on the shapes where `fixed_cost.py` found the
loss in the main loop's rate (not in a fixed cost). Per output shape, several wgmma configurations (the full-grid
winner, narrower tiles on more SMs, the 2x1 cluster multicasting B, the transposed product whose 2x1 cluster
multicasts A, a split of K summed in the cluster's shared memory, wider tiles for tall outputs), each timed
against torch.matmul at K = 512 .. 4096 as in `fixed_cost.py`, then time = a + b * K fitted per configuration.

Usage (one GPU): python structures.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from fixed_cost import BASE, fit, loaded
from hgemm.evaluator import timing
from hgemm.evaluator.kernels import get_family

from hgemm.core.shape import Shape

KS = (512, 1024, 2048, 4096)
ONE = {"consumers": 1, "pingpong": 0, "epilogue": 1}
SWAP = {"consumers": 1, "pingpong": 0, "epilogue": 0, "swap_ab": 1}
CASES = {
    (512, 512): {
        "winner 64x64 c1": {**ONE, "bm": 64, "bn": 64, "stages": 12, "group_m": 16},
        "64x32 c1": {**ONE, "bm": 64, "bn": 32, "stages": 16},
        "64x32 c2": {**ONE, "bm": 64, "bn": 32, "stages": 16, "cluster_m": 2},
        "64x64 c2": {**ONE, "bm": 64, "bn": 64, "stages": 12, "cluster_m": 2},
        "64x64 split2 dsmem": {**ONE, "bm": 64, "bn": 64, "stages": 12, "split_k": 2, "split_dsmem": 1,
                               "persistent": 0, "epilogue": 0},
        "swap 64x32 c2": {**SWAP, "bm": 64, "bn": 32, "stages": 16, "cluster_m": 2},
    },
    (64, 4096): {
        "winner 64x32 pp": {"bm": 64, "bn": 32, "consumers": 2, "pingpong": 1, "epilogue": 1, "epi_panels": 2,
                            "stages": 16},
        "64x32 c1": {**ONE, "bm": 64, "bn": 32, "stages": 16},
        "swap 64x32 c2": {**SWAP, "bm": 64, "bn": 32, "stages": 16, "cluster_m": 2},
        "swap 64x64 c2": {**SWAP, "bm": 64, "bn": 64, "stages": 12, "cluster_m": 2},
        "64x64 split2 dsmem": {**ONE, "bm": 64, "bn": 64, "stages": 12, "split_k": 2, "split_dsmem": 1,
                               "persistent": 0, "epilogue": 0},
    },
    (1024, 256): {
        "winner 64x32 c1": {**ONE, "bm": 64, "bn": 32, "stages": 16, "group_m": 4},
        "64x32 c2": {**ONE, "bm": 64, "bn": 32, "stages": 16, "cluster_m": 2},
        "64x64 c2": {**ONE, "bm": 64, "bn": 64, "stages": 12, "cluster_m": 2},
        "swap 64x32 c2": {**SWAP, "bm": 64, "bn": 32, "stages": 16, "cluster_m": 2},
    },
    (12288, 256): {
        "winner 128x64 pp": {"bm": 128, "bn": 64, "consumers": 2, "pingpong": 1, "epilogue": 1, "stages": 8},
        "128x128 coop": {"bm": 128, "bn": 128, "consumers": 2, "pingpong": 0, "epilogue": 1, "stages": 6},
        "128x128 pp": {"bm": 128, "bn": 128, "consumers": 2, "pingpong": 1, "epilogue": 1, "stages": 6},
        "128x256 coop": {"bm": 128, "bn": 256, "consumers": 2, "pingpong": 0, "epilogue": 1, "epi_panels": 2,
                         "stages": 4},
        "128x128 c2": {"bm": 128, "bn": 128, "consumers": 2, "pingpong": 0, "epilogue": 1, "stages": 6,
                       "cluster_m": 2},
    },
}


def main() -> None:
    run_cases(Path(sys.argv[1]), CASES, "structures.json")


def run_cases(out: Path, cases: dict, report: str) -> None:
    """Time every configuration of `cases` against torch.matmul at each K of KS; fit; rewrite OUT/`report`."""
    out.mkdir(parents=True, exist_ok=True)
    family = get_family("wgmma")
    stream = torch.cuda.Stream()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    ws = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    rows = []
    for (M, N), configs in cases.items():
        runs = {}
        for name, cfg in configs.items():
            params = family.repair({**BASE, **cfg})
            try:
                runs[name] = (params, loaded(params))
            except RuntimeError as e:
                print(f"{M}x{N} {name}: not built ({str(e)[:200]})")
        for K in KS:
            A = torch.randn(M, K, device="cuda", dtype=torch.float16)
            B = torch.randn(K, N, device="cuda", dtype=torch.float16)
            Bt = B.t().contiguous()
            Ct = torch.empty(M, N, device="cuda", dtype=torch.float16)
            outs, contenders = {}, {"lib": lambda A=A, B=B, Ct=Ct: torch.mm(A, B, out=Ct)}
            for name, (params, run) in runs.items():
                if family.check(params, Shape(M, N, K)) is not None:
                    continue
                C = outs[name] = torch.empty(M, N, device="cuda", dtype=torch.float16)

                def ours(A=A, B=B, Bt=Bt, C=C, K=K, run=run, M=M, N=N):
                    rc = run(A.data_ptr(), B.data_ptr(), Bt.data_ptr(), C.data_ptr(), M, N, K, ws.data_ptr(),
                             ws.numel(), torch.cuda.current_stream().cuda_stream)  # fmt: skip
                    assert rc == 0, rc

                contenders[name] = ours
            with torch.cuda.stream(stream):
                for fn in contenders.values():
                    fn()
            stream.synchronize()
            diffs = {n: (C.float() - Ct.float()).abs().max().item() for n, C in outs.items()}
            off = timing.time_offline(contenders, stream, samples=15)
            srv = timing.time_server(contenders, stream, l2, samples=20)
            for n in contenders:
                rows.append({"M": M, "N": N, "K": K, "config": n, "params": runs[n][0] if n in runs else None,
                             "max_abs_diff": diffs.get(n), "offline_us": off[n].median_us,
                             "server_us": srv[n].median_us})  # fmt: skip
            print(f"{M}x{N}x{K}: " + "  ".join(f"{n} {off[n].median_us:.2f}/{srv[n].median_us:.2f}"
                                                for n in contenders), flush=True)  # fmt: skip
            bad = {n: d for n, d in diffs.items() if d > 0.5}
            if bad:
                print(f"  DIFFERS from the library: {bad}")
        print(f"{M}x{N}: fit time = a + b per 1000 K (offline | server)")
        for n in ["lib", *runs]:
            mine = [r for r in rows if (r["M"], r["N"], r["config"]) == (M, N, n)]
            if len(mine) >= 3:
                a, b = fit([r["K"] for r in mine], [r["offline_us"] for r in mine])
                a2, b2 = fit([r["K"] for r in mine], [r["server_us"] for r in mine])
                print(f"  {n:22s} {a:6.2f} + {1000 * b:6.3f} | {a2:6.2f} + {1000 * b2:6.3f}")
        (out / report).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
