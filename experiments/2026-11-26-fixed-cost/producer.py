"""Fourteenth probe: the producer warp. PC sampling (`ncu_stalls.py`) put most of the producer's samples in its own
issue path, not on the empty-slot wait, while the consumers waited on the full slots (30% of all samples): the
producer sets the ring's rate. Its loop ran in one thread (`if (wg_thread == 0)`), so the compiler moved every TMA
operand into uniform registers through a loop of its own (ELECT, R2UR, BRA.U.ANY) around each load, about 35
instructions per k-block; the library's producer loop is about 10. The loop now runs in the whole producer warp,
one elected lane arriving and issuing: the family's parameter `warp_producer` 1 ("new") against 0 ("old", the
former loop), checked against torch.matmul and timed offline at K = 512 .. 4096. (When it ran, the warp loop was
the template's only one and "old" restored the former loop by string edits; the parameter selects the same two
loops.)

Usage (one GPU): python producer.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

from fixed_cost import BASE, load
from hgemm.evaluator.compile import compile_sources
from hgemm.evaluator.kernels import get_family
from k_group import check
from ring_only import sweep
from structures import ONE

PP = {"consumers": 2, "pingpong": 1, "epilogue": 1}
CASES = {
    (512, 512): {"64x32": {**ONE, "bm": 64, "bn": 32, "stages": 16}, "64x64": {**ONE, "bm": 64, "bn": 64, "stages": 12}},
    (1024, 1024): {"64x128 c2": {**ONE, "bm": 64, "bn": 128, "stages": 8, "cluster_m": 2}},
    (64, 4096): {"64x32": {**ONE, "bm": 64, "bn": 32, "stages": 16}},
    (12288, 256): {"128x64 pp": {**PP, "bm": 128, "bn": 64, "stages": 8}},
    (4096, 4096): {"128x256 c2": {"consumers": 2, "pingpong": 0, "epilogue": 1, "bm": 128, "bn": 256, "stages": 4,
                                  "epi_panels": 2, "cluster_m": 2}},
}


def main() -> None:
    out = Path(sys.argv[1])
    family = get_family("wgmma")
    srcs = {}
    for (M, N), configs in CASES.items():
        for name, cfg in configs.items():
            for label, producer in (("new", 1), ("old", 0)):
                srcs[(M, N, f"{name} {label}")] = family.render(family.repair({**BASE, **cfg, "warp_producer": producer}))
    compile_sources(list(srcs.values()))  # in parallel; load() below hits the cache
    rows: list[dict] = []
    for M, N in CASES:
        runs = {name: load(src) for (m, n, name), src in srcs.items() if (m, n) == (M, N)}
        for name, run in runs.items():
            print(f"{M}x{N} {name}: max |diff| at K=1000 {check(run, M, N, 1000):.3g}", flush=True)
        sweep(out, M, N, runs, rows, "producer.json")


if __name__ == "__main__":
    main()
