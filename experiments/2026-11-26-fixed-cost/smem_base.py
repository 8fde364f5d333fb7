"""Thirteenth probe: the ring's base address. Nsight Compute's PC sampling (`ncu_stalls.py`) showed the consumer
loop re-deriving the shared base from the generic pointer (two S2UR reads, SR_CgaCtaId and SR_SWINHI, and about
20 dependent uniform instructions) in every k-block, ahead of the full-barrier wait. The template now aligns the
shared address itself, computed once. Here the template as it is ("new") and with the former two lines put back
("old"), checked against torch.matmul and timed offline | server at K = 512 .. 4096 on shapes of each regime.

Usage (one GPU): python smem_base.py OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

from fixed_cost import BASE, load
from hgemm.evaluator.compile import compile_sources
from hgemm.evaluator.kernels import get_family
from k_group import check
from ring_only import edit, sweep
from structures import ONE

NEW = """  const uint32_t raw_base = smem_u32(smem_raw);
  const uint32_t sA = (raw_base + 1023u) & ~1023u;
  uint8_t* smem = smem_raw + (sA - raw_base);"""
OLD = """  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const uint32_t sA = smem_u32(smem);"""
PP = {"consumers": 2, "pingpong": 1, "epilogue": 1}
CASES = {
    (512, 512): {"64x32": {**ONE, "bm": 64, "bn": 32, "stages": 16}, "64x64": {**ONE, "bm": 64, "bn": 64, "stages": 12}},
    (1024, 1024): {"64x128 c2": {**ONE, "bm": 64, "bn": 128, "stages": 8, "cluster_m": 2}},
    (12288, 256): {"128x64 pp": {**PP, "bm": 128, "bn": 64, "stages": 8}},
    (4096, 4096): {"128x256 c2": {"consumers": 2, "pingpong": 0, "epilogue": 1, "bm": 128, "bn": 256, "stages": 4,
                                  "epi_panels": 2, "cluster_m": 2}},
}


def main() -> None:
    family = get_family("wgmma")
    srcs = {}
    for (M, N), configs in CASES.items():
        for name, cfg in configs.items():
            new = family.render(family.repair({**BASE, **cfg}))
            srcs[(M, N, f"{name} new")] = new
            srcs[(M, N, f"{name} old")] = edit(new, [(NEW, OLD)])
    compare(Path(sys.argv[1]), srcs, "smem-base.json")


def compare(out: Path, srcs: dict[tuple[int, int, str], str], report: str) -> None:
    """Each (M, N, name) source built (in parallel), checked at K = 1000 and swept over K per output shape."""
    compile_sources(list(srcs.values()))  # load() below hits the cache
    rows: list[dict] = []
    for M, N in dict.fromkeys((m, n) for m, n, _ in srcs):
        runs = {name: load(src) for (m, n, name), src in srcs.items() if (m, n) == (M, N)}
        for name, run in runs.items():
            print(f"{M}x{N} {name}: max |diff| at K=1000 {check(run, M, N, 1000):.3g}", flush=True)
        sweep(out, M, N, runs, rows, report)


if __name__ == "__main__":
    main()
