"""Probe: the evaluator's offline figure against a plain in-process timing of the same kernel (2026-11-27).

Item 68 saw the wgmma 64x64 tile with 128-deep stages and the warp producer run 512x512x2048 at 5.82 us against
torch.matmul's 6.34 in a probe, while the evaluator had measured the same configuration there at 6.90 against
6.18 (another H100, earlier that day). Two things differ besides the machine: the probe replays one set of inputs
(A, B and C stay in L2 from one launch to the next), and the evaluator's offline graph gives every launch a new A
and C from its ring and times the candidate in its own process. Here all three run on one GPU, alternated:

- "judge": `LocalEvaluator.evaluate(..., stage="full", modes=("offline",))`, the candidate and torch_nn as every
  evaluation reports them;
- "one": `timing.time_offline` in this process, one set of inputs (the probes' way);
- "ring": the same, each captured launch on the next of `slots` A and C buffers (together twice the L2), as the
  judge's ring does; B shared.

Prediction: if the ring is what the probes miss, "ring" lands on "judge" for kernel and library alike and "one"
is the faster of the three; if the process or the judge's sampling is, "ring" stays near "one".

Usage (one GPU): python compare.py OUT_DIR [rounds]
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-11-26-fixed-cost"))

from fixed_cost import BASE, load  # noqa: E402
from hgemm.evaluator import timing  # noqa: E402
from hgemm.evaluator.kernels import get_family  # noqa: E402
from hgemm.evaluator.local import LocalEvaluator  # noqa: E402

from hgemm.core.shape import Shape  # noqa: E402

DEEP = {**BASE, "consumers": 1, "pingpong": 0, "epilogue": 1, "warp_producer": 1, "stage_k": 128}
CASES = [  # (M, N, K, name, configuration)
    (512, 512, 2048, "64x64 deep", {**DEEP, "bm": 64, "bn": 64, "stages": 6}),
    (512, 512, 2048, "64x32 deep", {**DEEP, "bm": 64, "bn": 32, "stages": 8}),
    (512, 512, 4096, "64x64 deep", {**DEEP, "bm": 64, "bn": 64, "stages": 6}),
    (64, 4096, 2048, "64x32 deep", {**DEEP, "bm": 64, "bn": 32, "stages": 8}),
    (1024, 1024, 2048, "64x128 c2", {**BASE, "consumers": 1, "pingpong": 0, "epilogue": 1, "bm": 64, "bn": 128,
                                     "stages": 6, "cluster_m": 2}),
]


def in_process(run, M: int, N: int, K: int, slots: int, stream, ws) -> dict[str, float]:
    """Offline medians (us) of the kernel and torch.mm on one set of inputs, and on a ring of `slots` A and C."""
    As = [torch.randn(M, K, device="cuda", dtype=torch.float16) for _ in range(slots)]
    Cs = [torch.empty(M, N, device="cuda", dtype=torch.float16) for _ in range(slots)]
    B = torch.randn(K, N, device="cuda", dtype=torch.float16)
    Bt = B.t().contiguous()
    turn = [0]

    def kernel(a, c):
        err = run(a.data_ptr(), B.data_ptr(), Bt.data_ptr(), c.data_ptr(), M, N, K, ws.data_ptr(), ws.numel(),
                  torch.cuda.current_stream().cuda_stream)  # fmt: skip
        assert err == 0, err

    def ringed(fn):
        def call():
            i = turn[0] % slots
            turn[0] += 1
            fn(As[i], Cs[i])
        return call

    contenders = {
        "kernel one": lambda: kernel(As[0], Cs[0]),
        "lib one": lambda: torch.mm(As[0], B, out=Cs[0]),
        "kernel ring": ringed(kernel),
        "lib ring": ringed(lambda a, c: torch.mm(a, B, out=c)),
    }
    stats = timing.time_offline(contenders, stream, samples=15)
    return {n: s.median_us for n, s in stats.items()}


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    family = get_family("wgmma")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    stream = torch.cuda.Stream()
    ws = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    rows = []
    with LocalEvaluator() as judge:
        for M, N, K, name, cfg in CASES:
            params = family.repair(cfg)
            source = family.render(params)
            run = load(source)
            slots = max(2, math.ceil(2 * l2 / ((M * K + M * N) * 2)))
            for r in range(rounds):
                (rec,) = judge.evaluate([source], Shape(M, N, K), stage="full", modes=("offline",))
                if not rec.ok:
                    raise SystemExit(f"{M}x{N}x{K} {name}: {rec.failure_kind}: {rec.failure_message}")
                off = rec.modes["offline"]
                row = {"M": M, "N": N, "K": K, "config": name, "round": r, "slots": slots,
                       "kernel judge": off.candidate.median_us, "lib judge": off.baselines["torch_nn"].median_us,
                       **in_process(run, M, N, K, slots, stream, ws)}  # fmt: skip
                rows.append(row)
                print(f"{M}x{N}x{K} {name} r{r}: " + "  ".join(
                    f"{k} {v:.2f}" for k, v in row.items() if isinstance(v, float)), flush=True)
                (out / "judge-vs-probe.json").write_text(json.dumps(rows, indent=1))
    print("\nmedians over rounds (us); kernel / lib per protocol")
    keys = ["kernel judge", "lib judge", "kernel ring", "lib ring", "kernel one", "lib one"]
    print(f"{'case':28s} " + " ".join(f"{k:>12s}" for k in keys) + "   judge   ring    one")
    for M, N, K, name, _ in CASES:
        mine = [r for r in rows if (r["M"], r["N"], r["K"], r["config"]) == (M, N, K, name)]
        med = {k: statistics.median(r[k] for r in mine) for k in keys}
        ratio = [med[f"kernel {p}"] / med[f"lib {p}"] for p in ("judge", "ring", "one")]
        print(f"{f'{M}x{N}x{K} {name}':28s} " + " ".join(f"{med[k]:12.2f}" for k in keys)
              + "".join(f" {x:7.3f}" for x in ratio))  # fmt: skip


if __name__ == "__main__":
    main()
