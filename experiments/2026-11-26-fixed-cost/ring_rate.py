"""Eleventh probe: what sets the ring's rate per k-block? At 512x512 (64x32 tiles, one consumer), the kernel, its
ring alone and the ring with no loads (as in `ring_loads.py`), each also:
- "spin": barrier waits poll with mbarrier.test_wait (never suspend) instead of try_wait;
- "wg": one arrive per consumer warpgroup frees a slot (lane 0 of warp 0, after the warpgroup's wgmma wait)
  instead of one per warp;
- the ring with 4 and 8 stages (is it latency bound?).
Kernels of the "wg" edit are checked against torch.matmul (largest absolute difference printed). Every source is
compiled first, in parallel. Times offline at K = 512 and 4096; the slope is per 1000 K.

Usage (one GPU): python ring_rate.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from fixed_cost import BASE, load
from hgemm.evaluator.compile import compile_sources
from hgemm.evaluator.kernels import get_family
from k_group import check
from ring_loads import NO_LOADS
from ring_only import MATH, edit, time_at
from structures import ONE

M = N = 512
KS = (512, 4096)
CFG = {**ONE, "bm": 64, "bn": 32, "stages": 16}
TRY = "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;"
SPIN = [(TRY, TRY.replace("try_wait", "test_wait"))]
FREE = "if (prev >= 0 && (wg_thread % 32) == 0) free_slot(empty_bar + 8 * prev);"


def one_per_warpgroup(source: str) -> str:
    assert source.count(FREE) == 2, "the template changed"
    source = source.replace(FREE, FREE.replace("(wg_thread % 32) == 0", "wg_thread == 0"))
    return edit(source, [("mbar_init(empty_bar + 8 * s, SLOT_READERS);", "mbar_init(empty_bar + 8 * s, SLOT_READERS / 4);")])


def sources() -> dict[str, str]:
    family = get_family("wgmma")
    render = lambda **kw: family.render(family.repair({**BASE, **CFG, **kw}))  # noqa: E731
    base = render()
    out = {}
    for label, src in {"": base, " spin": edit(base, SPIN), " wg": one_per_warpgroup(base)}.items():
        out[f"kernel{label}"] = src
        out[f"ring{label}"] = edit(src, [(MATH, "")])
        out[f"ring no loads{label}"] = edit(src, [(MATH, ""), *NO_LOADS])
    for stages in (4, 8):
        out[f"ring s{stages}"] = edit(render(stages=stages), [(MATH, "")])
    return out


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    srcs = sources()
    compile_sources(list(srcs.values()))  # parallel; load() below hits the cache
    runs = {name: load(src) for name, src in srcs.items()}
    for K in (64, 1000, 4096):
        print(f"{M}x{N}x{K}: max |diff| kernel {check(runs['kernel'], M, N, K):.3g}, "
              f"kernel wg {check(runs['kernel wg'], M, N, K):.3g}, kernel spin {check(runs['kernel spin'], M, N, K):.3g}")
    stream = torch.cuda.Stream()
    ws = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    rows = []
    for K in KS:
        rows += [{"M": M, "N": N, "K": K, "config": n, "offline_us": t}
                 for n, t in time_at(M, N, K, runs, stream, ws).items()]  # fmt: skip
    (out / "ring-rate.json").write_text(json.dumps(rows, indent=1))
    print(f"{M}x{N}: offline us at K = {KS}, and per 1000 K")
    for n in ["lib", *runs]:
        t = [r["offline_us"] for r in rows if r["config"] == n]
        print(f"  {n:22s} " + " ".join(f"{x:7.2f}" for x in t) + f"   {1000 * (t[-1] - t[0]) / (KS[-1] - KS[0]):6.3f}")


if __name__ == "__main__":
    main()
