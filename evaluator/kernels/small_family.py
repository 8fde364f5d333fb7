"""The `small` family: one short launch for small shapes (about 64^3 to 256x256x512).

Renders `small.cu`: mma.sync fragments loaded straight from global memory (no operand staging,
no workspace, no memset), K chunks optionally spread over WARPS_K warps of a CTA and summed
through shared memory. Invariants enforced by `check`: warp tiles of 16..64 rows (multiples of
16) by 8..64 columns (multiples of 8), at most 64 accumulators per thread, at most 1024 threads,
the reduction buffer fits shared memory, K is a multiple of 8. `default_params` picks the
largest tile that still gives about one CTA per SM, then enough K warps that each warp walks
at most four 32-wide K chunks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hgemm.evaluator.kernels.family import Params
from hgemm.evaluator.kernels.inline import InliningFamily
from hgemm.evaluator.kernels.limits import MAX_THREADS, cdiv, sm_count, smem_limit

from hgemm.core.record import GpuInfo

SMALL_SPACE: dict[str, tuple] = {
    "BM": (16, 32, 64, 128),
    "BN": (16, 32, 64, 128),
    "WARPS_M": (1, 2, 4),
    "WARPS_N": (1, 2, 4),
    "WARPS_K": (1, 2, 4, 8),
}
MAX_ACCUMULATORS = 64

# (BM, BN, WARPS_M, WARPS_N), largest first.
TILES = (
    (64, 64, 2, 2),
    (32, 64, 1, 2),
    (64, 32, 2, 1),
    (32, 32, 1, 2),
    (16, 32, 1, 2),
    (32, 16, 1, 1),
    (16, 16, 1, 1),
)


def warp_tile(p: Params) -> tuple[int, int]:
    return p["BM"] // p["WARPS_M"], p["BN"] // p["WARPS_N"]


def threads(p: Params) -> int:
    return 32 * p["WARPS_M"] * p["WARPS_N"] * p["WARPS_K"]


def register_estimate(p: Params) -> int:
    """Rough registers per thread: accumulators, two chunks of fragments, ~30 for addressing."""
    wm, wn = warp_tile(p)
    mi, ni = wm // 16, wn // 8
    return mi * ni * 4 + 2 * (mi * 8 + ni * 4) + 30


def register_budget(n_threads: int) -> int:
    return min(255, 65536 // n_threads)


def smem_bytes(p: Params) -> int:
    """The K-warp reduction buffer: every non-first K warp parks its accumulators."""
    wm, wn = warp_tile(p)
    return (p["WARPS_K"] - 1) * p["WARPS_M"] * p["WARPS_N"] * wm * wn * 4


@dataclass
class SmallFamily(InliningFamily):
    name: str = "small"
    template: str = "small.cu"
    space: dict[str, tuple] = field(default_factory=lambda: dict(SMALL_SPACE))
    description: str = (
        "small shapes: mma.sync fragments loaded straight from global memory, K chunks spread over "
        "warps and summed in smem; one launch, no workspace; any M, N; K % 8 == 0"
    )

    def check(self, params: Params, M: int, N: int, K: int, gpu: GpuInfo | None = None) -> str | None:
        reason = super().check(params, M, N, K, gpu)
        if reason:
            return reason
        p = params
        if p["BM"] % p["WARPS_M"] or p["BN"] % p["WARPS_N"]:
            return f"warps {p['WARPS_M']}x{p['WARPS_N']} do not divide the tile {p['BM']}x{p['BN']}"
        wm, wn = warp_tile(p)
        if wm % 16 or wn % 8 or wm > 64 or wn > 64:
            return f"warp tile {wm}x{wn} must be 16..64 rows (x16) by 8..64 columns (x8)"
        if wm * wn // 32 > MAX_ACCUMULATORS:
            return (
                f"warp tile {wm}x{wn} needs {wm * wn // 32} accumulators per thread (max {MAX_ACCUMULATORS})"
            )
        if threads(p) > MAX_THREADS:
            return f"{threads(p)} threads per block (max {MAX_THREADS})"
        if register_estimate(p) > register_budget(threads(p)):
            return f"about {register_estimate(p)} registers per thread; {threads(p)} threads allow {register_budget(threads(p))}"
        if smem_bytes(p) > smem_limit(gpu):
            return f"reduction buffer {smem_bytes(p)} B exceeds {smem_limit(gpu)} B"
        if K % 8:
            return f"K={K} is not a multiple of 8 (rows must be 16-byte aligned)"
        return None

    def default_params(self, M: int, N: int, K: int, gpu: GpuInfo | None = None) -> Params:
        target = sm_count(gpu)
        bm, bn, wm, wn = next(
            (t for t in TILES if cdiv(M, t[0]) * cdiv(N, t[1]) >= target // 2),
            TILES[-1],
        )
        chunks_per_warp = cdiv(cdiv(K, 32), 4)
        warps_k = next((w for w in SMALL_SPACE["WARPS_K"] if w >= chunks_per_warp), 8)
        params = {"BM": bm, "BN": bn, "WARPS_M": wm, "WARPS_N": wn, "WARPS_K": warps_k}
        while params["WARPS_K"] > 1 and (
            threads(params) > MAX_THREADS or register_estimate(params) > register_budget(threads(params))
        ):
            params["WARPS_K"] //= 2
        return params
