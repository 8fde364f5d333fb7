"""The `gemv` family: C = A * B for M <= 4 as a matrix-vector product on the CUDA cores, one launch (template
`gemv.cu`): warps stream rows of Bt with wide loads, several chunks in flight, and multiply every row of A with
them in fp32; K ranges are split over KSPLIT warps and summed in shared memory.

- Decode shapes (M = 1, large N and K) are bound by reading B once. On an H100, searched at 8 evaluations per shape,
  it won all ten M = 1 shapes of bench/shapes-real.txt in both modes (1.19x offline, 1.06x server against the
  best library), where the tensor-core families, which pad M to a 64- or 16-row tile, had reached 1.03x / 0.95x
  (experiments/2026-11-27-small-m-gemv, experiments/2026-11-27-gemv-family).
- At M = 2-4 each row of Bt and of A is converted to fp32 once per chunk (the first kernel converted both at each
  product, and was issue-bound there). On an H200 that made the kernel 1.4-3.2x faster at M = 2-4: 2x4096x4096
  1.45x / 1.13x of the best library, 2x8192x3584 1.02x / 1.00x, M = 3-4 0.76-0.91x offline
  (experiments/2026-11-27-gemv-mid-m).
- Its rules and resource formulas are written once, in gemv_rules.cuh: the template includes it and `check`
  reads it through its host build (evaluator/kernels/rules.py).
- `default_params` is the probes' most frequent winner: at M = 1 two rows of Bt per warp, eight warps, K in two
  ranges (one where K is long), four chunks in flight (fewer where narrow loads need the registers); from M = 2
  four rows of Bt per warp, K in two ranges, one chunk in flight (the best geomean of six variants over five
  M = 2-4 shapes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hgemm.evaluator.kernels import rules
from hgemm.evaluator.kernels.family import Params
from hgemm.evaluator.kernels.inline import InliningFamily
from hgemm.evaluator.kernels.mma_family import widest_kvec

from hgemm.core.record import GpuInfo
from hgemm.core.shape import Shape

GEMV_SPACE: dict[str, tuple] = {
    "MAXM": (1, 2, 4),  # rows of A the kernel is built for: the smallest that holds M
    "ROWS": (1, 2, 4, 8),  # rows of Bt (columns of C) per warp
    "WARPS": (4, 8, 16),
    "KSPLIT": (1, 2, 4),  # warps sharing one group's K range
    "UNROLL": (1, 2, 4, 8),  # 256-wide K chunks in flight per row
    "KVEC": (1, 2, 8),  # halfs per global load along K: the widest K allows (mma_rules::widest_kvec)
}
LONG_K = 12288  # from here one K range per group was faster in the probe


@dataclass
class GemvFamily(InliningFamily):
    name: str = "gemv"
    template: str = "gemv.cu"
    space: dict[str, tuple] = field(default_factory=lambda: dict(GEMV_SPACE))
    description: str = (
        "M <= 4 (decode): a matrix-vector product on the CUDA cores in one launch; warps stream rows of Bt with "
        "wide loads and fp32 FMAs, K ranges summed in smem; any N and K"
    )
    tuning: tuple[str, ...] = ("UNROLL",)

    def check(self, params: Params, shape: Shape, gpu: GpuInfo | None = None) -> str | None:
        reason = super().check(params, shape, gpu)
        if reason:
            return reason
        return rules.violation(params, "gemv") or rules.shape_violation(params, shape, "gemv")

    def register_estimate(self, params: Params) -> int:
        """The header's rough registers per thread (the analytic model's occupancy)."""
        return rules.register_estimate(params, "gemv")

    def default_params(self, shape: Shape, gpu: GpuInfo | None = None) -> Params | None:
        M, K = shape.M, shape.K
        if M == 1:
            base = {"ROWS": 2, "WARPS": 8, "KSPLIT": 1 if K >= LONG_K else 2, "UNROLL": 4, "KVEC": widest_kvec(K)}
        else:  # several rows of A: four rows of Bt per warp share each of A's loads and conversions
            base = {"ROWS": 4, "WARPS": 8, "KSPLIT": 2, "UNROLL": 1, "KVEC": widest_kvec(K)}
        # MAXM: the first the header's shape rule accepts (the smallest that holds M); none from M = 5
        maxm = [v for v in GEMV_SPACE["MAXM"] if rules.shape_violation({**base, "MAXM": v}, shape, "gemv") is None]
        if not maxm:
            return None
        params = {"MAXM": maxm[0], **base}
        while params["UNROLL"] > 1 and rules.violation(params, "gemv") is not None:  # narrow loads take more registers
            params["UNROLL"] //= 2
        return params
