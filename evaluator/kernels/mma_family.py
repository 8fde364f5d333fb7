"""The mma.sync multistage families: `mma_ms` (one pass over K) and `mma_splitk` (K split across CTAs, fp32
partials in the workspace, then a reduction kernel); both render `mma_ms.cu`.

- Their rules and resource formulas (warp tiles, accumulators, threads, the register estimate, shared memory,
  K alignment, the workspace split-K needs) are written once, in mma_rules.cuh: the template includes it and
  `check` reads it through its host build (evaluator/kernels/rules.py).
- `render` defines every parameter (SPLIT_K=1 for `mma_ms`), but REALIGN 0 (see `render`).
- `default_params` is a heuristic: the largest tile that still fills about one wave of SMs without padding
  more than a quarter of the output, and for split-K the smallest split that fills a wave while every split
  keeps a useful share of K. Where K is odd, mma_ms takes an eight-warp tile with staged, realigned rows
  (`STAGED_TILES`, `realign_default`) if it gives half a wave.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hgemm.evaluator.kernels import rules
from hgemm.evaluator.kernels.family import Params
from hgemm.evaluator.kernels.inline import InliningFamily
from hgemm.evaluator.kernels.limits import WORKSPACE_BYTES, cdiv, sm_count, smem_limit

from hgemm.core.record import GpuInfo
from hgemm.core.shape import Shape

MMA_SPACE: dict[str, tuple] = {
    "BM": (32, 64, 128, 256),
    "BN": (32, 64, 128, 256),
    "BK": (32, 64),
    "WARPS_M": (1, 2, 4),
    "WARPS_N": (1, 2, 4),
    "STAGES": (2, 3, 4, 5, 6),
    "RASTER": (1, 4, 8, 16),
    "KVEC": (1, 2, 8),  # halfs per global load along K: the widest K allows (mma_rules::widest_kvec)
    # KVEC < 8: narrow loads (0), or the aligned 16-byte blocks that hold the rows staged with cp.async and shifted
    # into place in shared memory (1)
    "REALIGN": (0, 1),
}
SPLIT_K_VALUES = (2, 3, 4, 6, 8, 16)

# (BM, BN, WARPS_M, WARPS_N), largest first: the heuristics' candidate tiles.
TILES = (
    (128, 256, 2, 4),
    (256, 128, 4, 2),
    (128, 128, 2, 2),
    (128, 64, 2, 2),
    (64, 128, 2, 2),
    (64, 64, 2, 2),
    (64, 32, 2, 1),
    (32, 64, 1, 2),
    (32, 32, 1, 1),
)


def _full(p: Params) -> Params:
    """Parameters added later take the value older archived kernels were built with."""
    return {**p, "SPLIT_K": p.get("SPLIT_K", 1), "KVEC": p.get("KVEC", 8), "REALIGN": p.get("REALIGN", 0)}


def widest_kvec(K: int) -> int:
    """The widest global load along K that K's row alignment allows (the rules header says the same)."""
    return next(v for v in reversed(MMA_SPACE["KVEC"]) if rules.shape_violation(_kvec_probe(v), Shape(1, 1, K), "mma") is None)


def realign_default(kvec: int, warps: int) -> int:
    """Staged, realigned blocks where K is odd and the tile has eight warps (the shift pass takes a row a thread);
    two-byte loads otherwise. On an H100, with 256x128 and 128x256 tiles, 44-67% faster than two-byte loads (8191^3
    1.23x of the best library against 0.75x); with 128x128 (four warps, two rows a thread) 18-25% slower; where K is
    even (four-byte loads), 2-10% slower with eight warps (experiments/2026-11-27-realign)."""
    return int(kvec == 1 and warps >= 8)


# (BM, BN, WARPS_M, WARPS_N) the default takes where K is odd, fastest first (H100, experiments/2026-11-27-realign)
STAGED_TILES = ((256, 128, 4, 2), (128, 256, 2, 4))


def _staged_tile(M: int, N: int, sms: int) -> tuple[int, int, int, int] | None:
    """The first STAGED_TILES tile with at least half a wave of CTAs and >= 75% useful output, or None."""
    return next((t for t in STAGED_TILES if tile_efficiency(M, N, t[0], t[1]) >= 0.75
                 and cdiv(M, t[0]) * cdiv(N, t[1]) * 2 >= sms), None)  # fmt: skip


def _kvec_probe(kvec: int) -> Params:
    return {"BM": 64, "BN": 64, "BK": 32, "WARPS_M": 2, "WARPS_N": 2, "STAGES": 2, "RASTER": 1, "SPLIT_K": 1,
            "KVEC": kvec, "REALIGN": 0}  # fmt: skip


def smem_bytes(p: Params) -> int:
    """Dynamic shared memory of one CTA: the pipeline, or the C staging tile if larger."""
    return rules.smem_bytes(_full(p), "mma")


def tile_efficiency(M: int, N: int, bm: int, bn: int) -> float:
    """Useful fraction of the padded output that the tiles cover."""
    return (M * N) / (cdiv(M, bm) * bm * cdiv(N, bn) * bn)


def check_mma(p: Params, shape: Shape, gpu: GpuInfo | None) -> str | None:
    """The rules header's verdict on the parameters and the shape, and the GPU's shared memory."""
    full = _full(p)
    why = rules.violation(full, "mma") or rules.shape_violation(full, shape, "mma")
    if why:
        return why
    limit = smem_limit(gpu)
    if smem_bytes(full) > limit:
        return f"shared memory {smem_bytes(full)} B exceeds {limit} B"
    return None


def _pick_tile(M: int, N: int, target: int) -> tuple[int, int, int, int]:
    """Largest candidate tile with at least `target` CTAs and >= 75% useful output; else the one
    with the most CTAs among those that pad little."""
    fitting = [t for t in TILES if tile_efficiency(M, N, t[0], t[1]) >= 0.75] or [TILES[-1]]
    for t in fitting:
        if cdiv(M, t[0]) * cdiv(N, t[1]) >= target:
            return t
    return fitting[-1]


def _pipeline(K: int, bm: int, bn: int) -> tuple[int, int]:
    """(BK, STAGES): 32-wide slices, four stages, fewer where K is short."""
    bk = 32
    stages = max(2, min(4, cdiv(K, bk)))
    return bk, stages


@dataclass
class MmaFamily(InliningFamily):
    name: str = "mma_ms"
    template: str = "mma_ms.cu"
    space: dict[str, tuple] = field(default_factory=lambda: dict(MMA_SPACE))
    tuning: tuple[str, ...] = ("RASTER", "STAGES")
    description: str = (
        "mma.sync m16n8k16 + ldmatrix + cp.async multistage pipeline, swizzled smem, raster order, "
        "smem-staged 16-byte epilogue; any M, N, K"
    )

    def check(self, params: Params, shape: Shape, gpu: GpuInfo | None = None) -> str | None:
        params = {**params, "KVEC": params.get("KVEC", 8), "REALIGN": params.get("REALIGN", 0)}
        reason = super().check(params, shape, gpu)
        return reason if reason else check_mma(params, shape, gpu)

    def repair(self, params: Params) -> Params:
        """REALIGN only where rows are read narrow (KVEC < 8): with 16-byte rows it is 0."""
        p = dict(params)
        if p.get("KVEC", 8) == 8 and p.get("REALIGN"):
            p["REALIGN"] = 0
        return p

    def render(self, params: Params) -> str:
        """REALIGN 0 is left out (the template's default), so kernels archived before it render as they were."""
        full = _full(params)
        return super().render({k: v for k, v in full.items() if not (k == "REALIGN" and v == 0)})

    def default_params(self, shape: Shape, gpu: GpuInfo | None = None) -> Params:
        M, N, K = shape
        kvec = widest_kvec(K)
        staged = _staged_tile(M, N, sm_count(gpu)) if kvec == 1 else None
        bm, bn, wm, wn = staged or _pick_tile(M, N, sm_count(gpu))
        bk, stages = _pipeline(K, bm, bn)
        return {"BM": bm, "BN": bn, "BK": bk, "WARPS_M": wm, "WARPS_N": wn, "STAGES": stages, "RASTER": 8,
                "KVEC": kvec, "REALIGN": realign_default(kvec, wm * wn)}  # fmt: skip


@dataclass
class MmaSplitKFamily(MmaFamily):
    name: str = "mma_splitk"
    space: dict[str, tuple] = field(default_factory=lambda: {**MMA_SPACE, "SPLIT_K": SPLIT_K_VALUES})
    description: str = (
        "mma_ms with K split over SPLIT_K CTAs: fp32 partial tiles in the workspace, then a "
        "reduction kernel (two launches, no memset); for small M*N and long K"
    )

    def default_params(self, shape: Shape, gpu: GpuInfo | None = None) -> Params:
        M, N, K = shape
        target = sm_count(gpu)
        min_k = 256  # each split keeps at least this much of K

        def splits_for(t: tuple[int, int, int, int]) -> int | None:
            tiles = cdiv(M, t[0]) * cdiv(N, t[1])
            for s in SPLIT_K_VALUES:
                if K // s < min_k or s * M * N * 4 > WORKSPACE_BYTES:
                    break
                if tiles * s >= target:
                    return s
            return None

        fitting = [t for t in TILES[2:] if tile_efficiency(M, N, t[0], t[1]) >= 0.75] or [TILES[-1]]
        choice = next(((t, s) for t in fitting if (s := splits_for(t))), None)
        if choice is None:
            t = fitting[-1]
            usable = [s for s in SPLIT_K_VALUES if K // s >= 64 and s * M * N * 4 <= WORKSPACE_BYTES]
            choice = (t, usable[-1] if usable else 2)
        (bm, bn, wm, wn), split = choice
        bk, stages = _pipeline(cdiv(K, split), bm, bn)
        kvec = widest_kvec(K)
        return {
            "BM": bm,
            "BN": bn,
            "BK": bk,
            "WARPS_M": wm,
            "WARPS_N": wn,
            "STAGES": stages,
            "RASTER": 8,
            "SPLIT_K": split,
            "KVEC": kvec,
            "REALIGN": realign_default(kvec, wm * wn),
        }
