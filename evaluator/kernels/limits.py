"""Hardware and contract limits shared by the kernel families' `check` methods.

Where no GPU is given, shared memory is bounded by Hopper's opt-in limit (227 KB): Hopper is
the target; pass a `GpuInfo` to check against the real device (an A100 allows 163 KB).
"""

from __future__ import annotations

from hgemm.core.record import GpuInfo

HOPPER_SMEM = 227 * 1024
AMPERE_SMEM = 163 * 1024
MAX_THREADS = 1024
WORKSPACE_BYTES = 64 << 20  # the contract guarantees at least this much workspace
DEFAULT_SM_COUNT = 132  # H100 SXM; used by the default-parameter heuristics without a GpuInfo


def smem_limit(gpu: GpuInfo | None) -> int:
    """Largest dynamic shared memory one block may opt into."""
    return gpu.smem_per_block_optin if gpu is not None else HOPPER_SMEM


def sm_count(gpu: GpuInfo | None) -> int:
    return gpu.sm_count if gpu is not None else DEFAULT_SM_COUNT


def cdiv(a: int, b: int) -> int:
    return -(-a // b)
