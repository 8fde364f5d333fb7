"""The `small` family: one short launch for small shapes (template `small.cu`): mma.sync fragments loaded
straight from global memory (no operand staging, no workspace, no memset), K chunks optionally spread over
WARPS_K warps of a CTA and summed through shared memory.

- Its rules and resource formulas (warp tiles, accumulators, threads, the register estimate, the reduction
  buffer, K alignment) are written once, in small_rules.cuh: the template includes it and `check` reads it
  through its host build (evaluator/kernels/rules.py).
- `default_params` picks the largest tile no taller than M needs that still gives about one CTA per SM, then
  enough K warps that each warp walks at most four 32-wide K chunks. (At M = 16 the 64-row tiles it took before ran
  at 0.41-0.98x of the library on shapes-real's M = 16 layers, 16x32 tiles with eight K warps at 0.72-1.10x: H100,
  experiments/2026-11-27-small-deep.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hgemm.evaluator.kernels import rules
from hgemm.evaluator.kernels.family import Params
from hgemm.evaluator.kernels.inline import InliningFamily
from hgemm.evaluator.kernels.limits import cdiv, sm_count, smem_limit
from hgemm.evaluator.kernels.mma_family import widest_kvec

from hgemm.core.record import GpuInfo
from hgemm.core.shape import Shape

SMALL_SPACE: dict[str, tuple] = {
    "BM": (16, 32, 64, 128),
    "BN": (16, 32, 64, 128),
    "WARPS_M": (1, 2, 4),
    "WARPS_N": (1, 2, 4),
    "WARPS_K": (1, 2, 4, 8),
    "KVEC": (1, 2, 8),  # halfs per global load along K: the widest K allows (mma_rules::widest_kvec)
}
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


def _full(p: Params) -> Params:
    """KVEC came later: older archived kernels were built with 16-byte loads."""
    return {**p, "KVEC": p.get("KVEC", 8)}


def smem_bytes(p: Params) -> int:
    """The K-warp reduction buffer: every non-first K warp parks its accumulators."""
    return rules.smem_bytes(_full(p), "small")


@dataclass
class SmallFamily(InliningFamily):
    name: str = "small"
    template: str = "small.cu"
    space: dict[str, tuple] = field(default_factory=lambda: dict(SMALL_SPACE))
    description: str = (
        "small shapes: mma.sync fragments loaded straight from global memory, K chunks spread over "
        "warps and summed in smem; one launch, no workspace; any M, N, K"
    )

    def check(self, params: Params, shape: Shape, gpu: GpuInfo | None = None) -> str | None:
        params = _full(params)
        reason = super().check(params, shape, gpu)
        if reason:
            return reason
        why = rules.violation(params, "small") or rules.shape_violation(params, shape, "small")
        if why:
            return why
        if smem_bytes(params) > smem_limit(gpu):
            return f"reduction buffer {smem_bytes(params)} B exceeds {smem_limit(gpu)} B"
        return None

    def render(self, params: Params) -> str:
        return super().render(_full(params))

    def default_params(self, shape: Shape, gpu: GpuInfo | None = None) -> Params:
        M, N, K = shape
        target = sm_count(gpu)
        tall = max(16, cdiv(M, 16) * 16)  # no taller than M needs: rows past M cost fragments and mma work
        tiles = [t for t in TILES if t[0] <= tall]
        bm, bn, wm, wn = next((t for t in tiles if cdiv(M, t[0]) * cdiv(N, t[1]) >= target // 2), tiles[-1])
        chunks_per_warp = cdiv(cdiv(K, 32), 4)
        warps_k = next((w for w in SMALL_SPACE["WARPS_K"] if w >= chunks_per_warp), 8)
        params = {"BM": bm, "BN": bn, "WARPS_M": wm, "WARPS_N": wn, "WARPS_K": warps_k, "KVEC": widest_kvec(K)}
        while params["WARPS_K"] > 1 and rules.violation(params, "small") is not None:
            params["WARPS_K"] //= 2
        return params
