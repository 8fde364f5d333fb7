"""Family "wgmma": Hopper (sm_90a) TMA + wgmma warp-specialised HGEMM kernels.

One producer warpgroup streams A/Bt tiles with TMA into a `stages`-deep shared-memory ring
(mbarrier full/empty pairs); `consumers` warpgroups run `wgmma.mma_async` into fp32 registers;
`setmaxnreg` shifts registers to the consumers. Optional: persistent CTAs over a grouped raster
(`persistent`, `group_m`), a TMA-store epilogue through swizzled shared memory (`epilogue`), and
2x1 clusters sharing Bt tiles through TMA multicast (`cluster_m`), and ping-pong consumers that take
alternate whole tiles instead of splitting each tile's rows (`pingpong`).

Invariants: `render` returns one self-contained `.cu` (the `#define`s, then the template with
`wgmma_ptx.cuh` inlined, no local `#include "..."` left). `check` accepts only what the template
static_asserts and the device allows: M % (bm*cluster_m) == 0, N % bn == 0, K % 64 == 0,
shared memory within the GPU's opt-in limit (227 KiB on H100), compute capability 9.x.
`shared_bytes` is the exact dynamic shared memory the kernel requests.
"""

from __future__ import annotations

import re

from evaluator.kernels.family import Family, Params, kernel_file
from evaluator.record import GpuInfo

BK = 64
HOPPER_SMEM_OPTIN = 232448  # 227 KiB: H100/H200 opt-in shared memory per block
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.MULTILINE)

SPACE: dict[str, tuple] = {
    "bm": (64, 128, 256),
    "bn": (64, 128, 256),
    "stages": (2, 3, 4, 5, 6, 7, 8),
    "consumers": (1, 2),
    "group_m": (1, 2, 4, 8, 16),
    "persistent": (0, 1),
    "epilogue": (0, 1),
    "cluster_m": (1, 2),
    "pingpong": (0, 1),
}


def shared_bytes(params: Params) -> int:
    """Dynamic shared memory the kernel requests for `params` (mirrors SMEM_BYTES in the template)."""
    bm, bn, stages = params["bm"], params["bn"], params["stages"]
    ring = stages * (bm * BK * 2 + bn * BK * 2)
    c_stage = params["consumers"] * wg_rows(params) * bn * 2 if params["epilogue"] else 0
    return ring + c_stage + (2 * stages + 2) * 8 + 1024


def wg_rows(params: Params) -> int:
    """Tile rows one consumer warpgroup computes: all of them in ping-pong, a share otherwise."""
    return params["bm"] if params["pingpong"] else params["bm"] // params["consumers"]


def inline_includes(text: str, seen: set[str] | None = None) -> str:
    """Replace each `#include "x.cuh"` with the file's text (once per file), dropping `#pragma once`."""
    seen = set() if seen is None else seen

    def expand(match: re.Match) -> str:
        name = match.group(1)
        if name in seen:
            return ""
        seen.add(name)
        body = kernel_file(name).replace("#pragma once\n", "")
        return f"// ---- begin {name} ----\n{inline_includes(body, seen)}// ---- end {name} ----"

    return _INCLUDE.sub(expand, text)


class WgmmaFamily(Family):
    def check(self, params: Params, M: int, N: int, K: int, gpu: GpuInfo | None = None) -> str | None:
        reason = super().check(params, M, N, K, gpu)
        if reason:
            return reason
        bm, bn, cluster_m = params["bm"], params["bn"], params["cluster_m"]
        if params["pingpong"] and params["consumers"] != 2:
            return f"{self.name}: pingpong needs consumers=2"
        rows = wg_rows(params)
        if rows not in (64, 128):
            return f"{self.name}: {rows} tile rows per consumer warpgroup, must be 64 or 128"
        if (rows // 64) * bn // 2 > 128:
            return f"{self.name}: {(rows // 64) * bn // 2} accumulator registers per thread (max 128)"
        if M <= 0 or N <= 0 or K <= 0:
            return f"{self.name}: empty shape {M}x{N}x{K}"
        if M % (bm * cluster_m):
            return f"{self.name}: M={M} not a multiple of bm*cluster_m={bm * cluster_m}"
        if N % bn:
            return f"{self.name}: N={N} not a multiple of bn={bn}"
        if K % BK:
            return f"{self.name}: K={K} not a multiple of {BK}"
        limit = (
            gpu.smem_per_block_optin if gpu is not None and gpu.smem_per_block_optin else HOPPER_SMEM_OPTIN
        )
        need = shared_bytes(params)
        if need > limit:
            return f"{self.name}: needs {need} bytes of shared memory, limit {limit}"
        if gpu is not None and not str(gpu.cc).startswith("9."):
            return f"{self.name}: wgmma needs compute capability 9.x (sm_90a), GPU has {gpu.cc}"
        return None

    def render(self, params: Params) -> str:
        return inline_includes(super().render(params))

    def default_params(self, M: int, N: int, K: int, gpu: GpuInfo | None = None) -> Params | None:
        """A reasonable valid configuration for the shape, or None when no tile divides it."""
        sms = gpu.sm_count if gpu is not None and gpu.sm_count else 132
        candidates = []
        for bn in (256, 128, 64):
            for bm in (128,):
                if M % bm or N % bn or K % BK:
                    continue
                candidates.append((bm, bn, (M // bm) * (N // bn)))
        if not candidates:
            return None
        # Largest tile that still gives most SMs a tile; else the one with the most tiles.
        busy = [c for c in candidates if c[2] >= 0.9 * sms]
        bm, bn, _ = busy[0] if busy else max(candidates, key=lambda c: c[2])
        base = {
            "bm": bm,
            "bn": bn,
            "consumers": 2,
            "group_m": 8,
            "persistent": 1,
            "epilogue": 1,
            "cluster_m": 1,
            "pingpong": 0,
        }
        for stages in (6, 5, 4, 3, 2):
            params = {**base, "stages": stages}
            if self.check(params, M, N, K, gpu) is None:
                return params
        return None


FAMILIES: dict[str, Family] = {
    "wgmma": WgmmaFamily(
        name="wgmma",
        template="wgmma_ws.cu",
        space=SPACE,
        description="Hopper TMA + wgmma warp-specialised kernel: producer warpgroup, 1-2 consumer "
        "warpgroups, mbarrier ring, setmaxnreg, optional persistence, TMA-store epilogue, 2x1 multicast clusters",
        min_cc=9.0,
    ),
}
