"""The evaluator's offline protocol, replayed in one plain process: before every sample A gets new values
(uniform in [-1, 1), as the judge's fill draws them), the sample is one launch between two events, and after a
candidate's sample its output is read back once (as the witnesses do). Chunks of five samples: ours, then
each of two cuBLAS calls (torch A @ Bt.T and A @ B), three rounds. If ours is slow here too, the protocol's
duty cycle is what the kernel loses to; if not, the runner process is.

Usage (one GPU): python protocol.py OUT_DIR
"""

from __future__ import annotations

import ctypes
import json
import statistics
import sys
from pathlib import Path

import torch
from probe import BASE

SHAPES = [(4096, 16384, 16384), (1024, 8192, 16384), (8192, 8192, 8192)]
ROUNDS, PER_CHUNK = 3, 5


def sample(fn, a: torch.Tensor, witness) -> tuple[torch.cuda.Event, torch.cuda.Event]:
    a.uniform_(-1.0, 1.0)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    if witness is not None:
        witness()
    return start, end


def run_shape(lib, M: int, N: int, K: int, witness_on: bool) -> dict:
    a = torch.empty(M, K, device="cuda", dtype=torch.half).uniform_(-1, 1)
    bt = torch.empty(N, K, device="cuda", dtype=torch.half).uniform_(-1, 1)
    b = bt.t().contiguous()
    c = torch.empty(M, N, device="cuda", dtype=torch.half)
    sums = torch.empty(M, device="cuda", dtype=torch.float32)

    def ours():
        lib.hgemm_run(ctypes.c_void_p(a.data_ptr()), None, ctypes.c_void_p(bt.data_ptr()),
                      ctypes.c_void_p(c.data_ptr()), M, N, K, None, ctypes.c_size_t(0),
                      ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))  # fmt: skip

    contenders = {"ours": ours, "torch_tn": lambda: torch.mm(a, bt.t(), out=c), "torch_nn": lambda: torch.mm(a, b, out=c)}
    witness = (lambda: torch.sum(c, dim=1, dtype=torch.float32, out=sums)) if witness_on else None
    events = {n: [] for n in contenders}
    for fn in contenders.values():
        fn()
    torch.cuda.synchronize()
    for _ in range(ROUNDS):
        for name, fn in contenders.items():
            for _ in range(PER_CHUNK):
                events[name].append(sample(fn, a, witness if name == "ours" else None))
            torch.cuda.synchronize()
    out = {}
    for name, ev in events.items():
        us = [s.elapsed_time(e) * 1000 for s, e in ev]
        out[name] = {"median_us": statistics.median(us), "p10_us": statistics.quantiles(us, n=10)[0],
                     "p90_us": statistics.quantiles(us, n=10)[-1], "all_us": us}  # fmt: skip
    return out


def main(out_dir: str) -> None:
    from hgemm.evaluator.compile import compile_trusted
    from hgemm.evaluator.kernels import get_family

    lib = ctypes.CDLL(compile_trusted(get_family("wgmma").render(BASE)).lib_path)
    rows = []
    for M, N, K in SHAPES:
        for witness_on in (True, False):
            res = run_shape(lib, M, N, K, witness_on)
            rows.append({"shape": [M, N, K], "witness": witness_on, **res})
            text = "  ".join(f"{n} {r['median_us']:8.1f} (p10 {r['p10_us']:8.1f})" for n, r in res.items())
            print(f"{M}x{N}x{K} witness={witness_on!s:5s} {text}", flush=True)
            torch.cuda.empty_cache()
    Path(out_dir, "protocol.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
