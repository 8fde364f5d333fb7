"""Family "wgmma": Hopper (sm_90a) TMA + wgmma warp-specialised HGEMM kernels (template wgmma_ws.cu).

- The family's rules and resource formulas (which parameter sets and shapes are valid, rows per consumer,
  C panels, shared memory, shape rules) are written once, in wgmma_rules.cuh: the kernel includes it, and
  `check`, `shared_bytes` and friends read it through its host build (evaluator/kernels/rules.py).
- `render` returns one self-contained `.cu` with every parameter defined (parameters added after a
  configuration was archived take the values in OPTIONAL) and the included headers inlined.
- This module holds what only the search needs: the declared space, the default choice per shape, the
  companion moves of `repair`, and the analytic model's fitted time factors.
"""

from __future__ import annotations

import math
import re

from hgemm.evaluator.kernels import rules
from hgemm.evaluator.kernels.family import Family, Params, kernel_file

from hgemm.core.gpc import resident_clusters
from hgemm.core.record import GpuInfo
from hgemm.core.shape import Shape

BOX_K = rules.box_k()  # k per TMA box, from the rules header: the unit of the defaults' k-block counts
HOPPER_SMEM_OPTIN = 232448  # 227 KiB: H100/H200 opt-in shared memory per block
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.MULTILINE)

SPACE: dict[str, tuple] = {
    "bm": (64, 128, 192, 256),
    # any multiple of 16: widths between the powers of two fit a shape's columns to whole waves (cuBLAS on the
    # H100 runs 256x144, 256x112, 64x80 and 128x88 tiles on shapes of shapes-real; experiments/2026-11-27-widths)
    "bn": tuple(range(16, 257, 16)),
    "stages": (2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16),
    "consumers": (1, 2, 3),
    "group_m": (1, 2, 4, 8, 16),
    "persistent": (0, 1),
    "epilogue": (0, 1),
    # CTAs stacked along M sharing each Bt tile, each loading 1/cluster_m of it (experiments/2026-11-28-cluster4)
    "cluster_m": (1, 2, 4),
    "pingpong": (0, 1),
    "split_k": (1, 2, 3, 4, 6, 8, 16, 32, 64),
    "split_dsmem": (0, 1),
    "epi_panels": (0, 2),
    "stream_k": (0, 1),
    # Ct = Bt A^T (A and Bt trade places, C stored transposed; experiments/2026-11-26-swap-ab)
    "swap_ab": (0, 1),
    # the producer's loop in its whole warp, an elected lane issuing (experiments/2026-11-26-fixed-cost)
    "warp_producer": (0, 1),
    # K per ring stage: one TMA box per operand, or two behind one barrier (experiments/2026-11-27-deep-stage)
    "stage_k": (64, 128),
    # K not a multiple of 8: A and Bt copied first into the workspace with 16-byte rows, which TMA can read
    "pad_rows": (0, 1),
}
OPTIONAL = {"split_k": 1, "split_dsmem": 0, "epi_panels": 0, "stream_k": 0, "swap_ab": 0, "warp_producer": 0,
            "stage_k": 64, "pad_rows": 0}  # parameters added later: absent means this value
# Tile classes default_params chooses from (bm, bn, consumers) and their measured throughput per SM
# relative to 128x256 with a 2x1 cluster (H200, experiments/NOTES.md).
TILE_CLASSES = ((128, 256, 2), (128, 128, 2), (64, 128, 1), (64, 64, 1))
TILE_EFFICIENCY = {(128, 256): 1.0, (128, 128): 0.8, (64, 128): 0.55, (64, 64): 0.43}
# Where the 128-row tiles come in pairs (an even count), each pair a 2x1 cluster sharing its Bt tile: the
# 128-row classes then, by width: ping-pong or not, and efficiency on the same measure (H100, six shapes with
# M = 1000 and 4096, 21 tiles each, experiments/2026-11-27-m1000-tiles: 128x192 and 128x160 ping-pong at
# 0.95-1.02 and 0.92-1.01 of 128x256's rate, 128x128 ping-pong 0.85-0.93; unclustered, the 128-row tiles lost a
# median 15-24% wherever there was more than one wave). 128x192 first and at 128x256's rate: where it needs no
# more columns of waves, it is the one (H100: 3-7% faster on five of six large shapes).
# 128x224, cooperative (C in 32-column panels), only where K has at least 64 boxes: there it
# runs at 0.95 of 128x256's rate per element and fits the columns to fewer waves (H100, against the default:
# 1000x3584x14336 146.7 -> 135.5 us, 1000x14336x4096 168.8 -> 163.2, 200x13824x5120 60.8 -> 59.8; at 2560^3, K of
# 40 boxes, 128x208 without the TMA store lost, 52.4 -> 57.1; experiments/2026-11-27-widths).
# 128x96 ping-pong at 0.78: at 1000x1408x2048 its 120 tiles ran at 0.87 of the rate per element of 128x128's 88
# (H200, 2x1 clusters, 11.59 against 13.28 us; experiments/2026-11-28-cluster4), which is what it is chosen for
# there; at 0.85 it would also take 1024^3, where it lost (7.05 against the default's 5.94 us).
# bn -> (pingpong, efficiency, the fewest k-blocks it is chosen for)
PAIRED_TILES = {192: (1, 1.0, 0), 256: (0, 1.0, 0), 224: (0, 0.95, 64), 160: (1, 0.96, 0), 128: (1, 0.90, 0),
                96: (1, 0.78, 0)}
# Except 128x128 where C is at most 256 wide or K at most 512: there the cluster and the ping-pong consumers lost
# to the unclustered 128x128 tile (H100, the old default against the new on the 107 shapes the rule changed,
# experiments/2026-11-27-m1000-tiles/README.md: on those 51 shapes the paired tile ran at 0.983x the unclustered
# one's speed in both modes, geometric mean, down to 0.90x; on the other 38 shapes of 128x128, 1.12x and 1.08x).
PAIRED_128_MAX_N, PAIRED_128_MAX_K = 256, 512
# Outputs of SWAP_NARROW_MIN_M to SWAP_NARROW_MAX_M rows take the transposed product with C's rows as the
# kernel's 16-48 columns (`_narrow_swapped`; measured at M = 7-33). M <= 4 is the gemv family's, ahead of the
# libraries there; the tensor-core default for it keeps the other rules.
SWAP_NARROW_MIN_M, SWAP_NARROW_MAX_M = 5, 48
# 64-row tiles of the tile classes, in an even count of tile rows, that fill at least this share of the SMs in one
# wave of an output at least as wide as tall, with K of at least this many boxes, take the 2x1 cluster
# (`default_params`).
ONE_WAVE_CLUSTER, ONE_WAVE_CLUSTER_MIN_K_BLOCKS = 0.9, 16
MID_SWAPPED_MIN_K_BLOCKS = 64  # `_mid_swapped`


def four_cluster_slots(sms: int) -> int:
    """CTAs in clusters of four that can be resident at once, one per SM. Each cluster is placed whole inside a GPC:
    a 132-SM Hopper part holds 30 (120 CTAs; `hgemm.core.gpc`), so a grid of more waits for a second round (the
    transposed product at 64x4096x16384 in 128 CTAs: 44 -> 87 us in clusters of four;
    experiments/2026-11-28-smem-fill/gpu-h200)."""
    return 4 * resident_clusters(4, 1, sms)


# What the analytic model (agent/model.py) cannot see in this kernel, as multiplicative time factors per
# feature, fitted by bench/fit_wgmma_factors.py: TIME_FACTORS to every measured H200 time we have (variant
# sweeps plus the grid100 archives), the default for any GPU; TIME_FACTORS_BY_GPU where a GPU's own
# measurements rank better with their own fit (held out by shape). See experiments/NOTES.md for what they buy.
# Both refitted after the model learnt the direct-store epilogue, the DSMEM reduction and cluster waves
# (experiments/2026-11-26-model-error: the fit with the family's shared-memory sizes in the bare model),
# which took over most of the old TMA-store factor (x0.73 on the H100, x0.77 on the H200). The H200 factors
# come from the variant sweeps of experiments/2026-11-22-h200-wgmma and the H200 quick-stage times of the
# archive of 2026-11-25: 2321 times, 84 shapes.
TIME_FEATURES = ("tma_store_epilogue", "pingpong", "dsmem_split_doublings", "workspace_split", "cluster", "stream_k")
TIME_FACTORS = {
    "tma_store_epilogue": 1.008,
    "pingpong": 0.969,
    "dsmem_split_doublings": 1.182,
    "workspace_split": 1.298,
    "cluster": 1.06,
    "stream_k": 1.303,
}
TIME_FACTORS_BY_GPU = {
    # 3581 times on the H100: the quick-stage records of the full-grid archive of 2026-11-26 whose source the
    # family still renders byte for byte (after the arena fix), and the offline times of the few-tile, tall and
    # K-heavy experiments of that day (experiments/2026-11-26-small-tiles, -k-heavy); 155 shapes with at least 4
    # configurations, `--l2-mib 50`. Each shape left out in turn: median Spearman 0.74 (0.55 with the factors
    # fitted on 2026-11-25, 0.71 with none), first choice 1.045x the best measured time (1.065x, 1.063x).
    "NVIDIA H100 80GB HBM3": {
        "tma_store_epilogue": 1.025,
        "pingpong": 0.993,
        "dsmem_split_doublings": 1.2,
        "workspace_split": 1.209,
        "cluster": 1.024,
        "stream_k": 1.696,
    },
}


def default_producer(params: Params, shape: Shape | None = None) -> int:
    """The producer loop the defaults take: in its whole warp without a cluster (H100: 64x4096x4096, 64x32 tiles,
    12.07 -> 10.11 us; 512x512 within 3% either way), in one thread with the 2x1 cluster's multicast (1024x1024,
    64x128 tiles, 3.5% slower per k-block in the warp; experiments/2026-11-26-fixed-cost)."""
    return int(params.get("cluster_m", 1) == 1)


def default_stage_k(params: Params, shape: Shape | None = None) -> int:
    """K per ring stage the defaults take: 128 (two boxes per operand behind one barrier, half the handshakes per
    k) for tiles at most 64 wide without a cluster and, for a `shape` given, for the 2x1 cluster's 64-row tiles
    at most 80 wide on short, wide outputs (the CLUSTER_DEEP_STAGE_* bounds), else 64; and 64 for a `shape` of
    fewer than DEEP_STAGE_MIN_K_BLOCKS boxes of K (where given). H100, us per 1000 of K with the same ring bytes
    (experiments/2026-11-27-deep-stage): 64x4096, 64x32 tiles 1.80 -> 1.67 (warp producer; one thread 2.34 ->
    1.73); 12288x256, 128x64 ping-pong 16.3 -> 15.9; 512x512, 64x32 and 64x64, unchanged; 1024x1024, 64x128 with
    the 2x1 cluster 3.62 -> 3.93 (worse). Wider tiles without a cluster were not measured."""
    if shape is not None and -(-tuple(shape)[2] // BOX_K) < DEEP_STAGE_MIN_K_BLOCKS:
        return 64  # a stage of 128 would mostly be zero fill
    if params.get("cluster_m", 1) == 1:
        return 128 if params.get("bn", 0) <= 64 else 64
    # In the 2x1 cluster: 64-row tiles at most 80 wide on short outputs and moderate K (H100, the same ring
    # bytes, experiments/2026-11-27-worst-neighbours: 128x4096x4096 12.71 -> 10.92 us, 256x2048x2048 7.30 ->
    # 6.52, 128x4608x3584 (64x80) and 128x1408x2048 8% faster; 512x1024x4096 5% slower, K of 11008 and more
    # 0.5-1.2% slower, 64x128 tiles 1-7% slower everywhere).
    if shape is None or params.get("bm") != 64 or params.get("bn", 0) > 80:
        return 64
    M, N, K = tuple(shape)
    short_wide = M <= CLUSTER_DEEP_STAGE_MAX_M and N >= CLUSTER_DEEP_STAGE_MIN_N
    return 128 if short_wide and -(-K // BOX_K) <= CLUSTER_DEEP_STAGE_MAX_K_BLOCKS else 64


# Shapes with fewer 64-deep k-blocks than this keep one box per stage in the defaults (128-deep stages were measured
# from K = 512 up; below, the last stage's zero fill is a large share of the work).
DEEP_STAGE_MIN_K_BLOCKS = 8
# The 2x1 cluster's 64-row tiles take 128-deep stages on outputs of at most this many rows, at least this many
# columns, and K of at most this many boxes (`default_stage_k`; measured at N = 1408-4608, K = 2048-8192).
CLUSTER_DEEP_STAGE_MAX_M, CLUSTER_DEEP_STAGE_MIN_N, CLUSTER_DEEP_STAGE_MAX_K_BLOCKS = 256, 1024, 128

# The tuning parameters the defaults set from the rest of a configuration and the shape
# (`WgmmaFamily.default_tuning`).
DEFAULT_TUNING = {"warp_producer": default_producer, "stage_k": default_stage_k}


def factors_for(gpu_name: str | None) -> dict[str, float]:
    """The time factors measured on `gpu_name`, else the default (H200) ones."""
    return TIME_FACTORS_BY_GPU.get(gpu_name or "", TIME_FACTORS)


def time_features(params: Params) -> list[float]:
    """The feature values of `params`, in TIME_FEATURES order (a factor applies as factor ** value)."""
    split = params.get("split_k", 1)
    dsmem = params.get("split_dsmem", 0) and split > 1
    return [
        float(params["epilogue"] and split == 1),
        float(params["pingpong"]),
        math.log2(split) if dsmem else 0.0,
        float(split > 1 and not dsmem),
        float(params["cluster_m"] == 2),
        float(params.get("stream_k", 0)),
    ]


def c_panel(params: Params) -> int:
    """Columns per C panel, one TMA store box."""
    return rules.c_panel({**OPTIONAL, **params})


def shared_bytes(params: Params) -> int:
    """Dynamic shared memory the kernel requests for `params`."""
    return rules.smem_bytes({**OPTIONAL, **params})


def wg_rows(params: Params) -> int:
    """Tile rows one consumer warpgroup computes: all of them in ping-pong, a share otherwise."""
    return rules.wg_rows({**OPTIONAL, **params})


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
    def check(self, params: Params, shape: Shape, gpu: GpuInfo | None = None) -> str | None:
        params = {**OPTIONAL, **params}
        reason = super().check(params, shape, gpu)
        if reason:
            return reason
        why = rules.violation(params, "wgmma")
        if why:
            return f"{self.name}: {why}"
        why = rules.shape_violation(params, shape, "wgmma")
        if why:
            tile = f"{params['bm'] * params['cluster_m']}x{params['bn']}"
            return f"{self.name}: {shape}, tile {tile}, split_k {params['split_k']}: {why}"
        limit = (
            gpu.smem_per_block_optin if gpu is not None and gpu.smem_per_block_optin else HOPPER_SMEM_OPTIN
        )
        need = shared_bytes(params)
        if need > limit:
            return f"{self.name}: needs {need} bytes of shared memory, limit {limit}"
        if gpu is not None and not str(gpu.cc).startswith("9."):
            return f"{self.name}: wgmma needs compute capability 9.x (sm_90a), GPU has {gpu.cc}"
        return None

    def smem_bytes(self, params: Params) -> int:
        """Shared memory the kernel requests (the analytic model's occupancy input)."""
        return shared_bytes({**OPTIONAL, **params})

    def time_factor(self, params: Params, gpu_name: str | None = None) -> float:
        """Correction to the analytic model's time for `params` on `gpu_name` (see `factors_for`)."""
        values = time_features({**OPTIONAL, **params})
        factors = factors_for(gpu_name)
        return math.prod(factors[name] ** v for name, v in zip(TIME_FEATURES, values, strict=True))

    def repair(self, params: Params) -> Params:
        """Fill parameters added later, then make the switches agree: swap_ab stores C from the registers
        or the workspace (epilogue=0, no DSMEM split, no stream-K, no ping-pong), split-K writes no TMA-staged
        C (epilogue=0), split_dsmem only with a split (and then one CTA per unit, no multicast, no
        ping-pong), stream-K instead of split-K and only with persistent cooperative consumers, ping-pong
        with two consumers, three consumers exactly for 192-row tiles (64 rows each, at most 192 columns: a
        move from 128x256 lands on 192x128), C from the registers where the width is not whole 32-column
        panels, and the deepest ring <= `stages` that fits."""
        p = {**OPTIONAL, **params}
        if p["swap_ab"]:  # C stored transposed from the registers or the workspace
            p.update(epilogue=0, split_dsmem=0, stream_k=0, pingpong=0)
        if p["stream_k"]:
            p.update(split_k=1, persistent=1, pingpong=0, pad_rows=0)
        if p["split_k"] == 1:
            p["split_dsmem"] = 0
        else:
            p["epilogue"] = 0
        if p["bn"] % 32:  # C panels of the TMA store are 32 or 64 columns
            p["epilogue"] = 0
        if not p["epilogue"]:
            p["epi_panels"] = 0
        if p["split_dsmem"]:
            p.update(persistent=0, cluster_m=1, pingpong=0)
        if p["pingpong"]:
            p["consumers"] = 2
        if p["bm"] == 192:
            p.update(consumers=3, pingpong=0, split_dsmem=0, stream_k=0)
            if p["bn"] > 192:  # three consumers hold at most 64 x 192: 128 columns keep the tile's area nearest
                p["bn"] = 128
        elif p["consumers"] == 3:
            p["consumers"] = 2 if p["bm"] >= 128 else 1
        stages = [s for s in SPACE["stages"] if s <= p.get("stages", 0)]
        while len(stages) > 1 and shared_bytes({**p, "stages": stages[-1]}) > HOPPER_SMEM_OPTIN:
            stages.pop()
        if stages:
            p["stages"] = stages[-1]
        return p

    def render(self, params: Params) -> str:
        return inline_includes(super().render({**OPTIONAL, **params}))

    def default_tuning(self, params: Params, only_absent: bool = False, shape: Shape | None = None) -> Params:
        """`params` with each parameter of DEFAULT_TUNING (`warp_producer`, `stage_k`) as the defaults set it for
        the rest (for `shape`, where given: one box per stage below DEEP_STAGE_MIN_K_BLOCKS k-blocks); with
        `only_absent`, only those `params` does not name and whose default differs from the value an absent one
        means: a configuration archived before a parameter existed ran as OPTIONAL says, and a search that
        retrieves it proposes it in both forms."""
        out = dict(params)
        for name, rule in DEFAULT_TUNING.items():
            value = rule(params, shape)
            if not only_absent or (name not in params and value != OPTIONAL[name]):
                out[name] = value
        return out

    def default_params(self, shape: Shape, gpu: GpuInfo | None = None) -> Params | None:
        """The measured-best configuration class for the shape (H200 sweeps, experiments/NOTES.md), or None
        where none fits (K not a multiple of 8 with padded copies of A and Bt beyond the workspace). Tiles may
        overhang M and N: a partial tile costs as much as a whole one, which the estimate below counts.

        - The tile with the least estimated time: waves (ceil(tiles / #SMs)) x per-tile cost, cost = tile
          area / measured relative efficiency. Where the 128-row tiles come in pairs (an even count), the
          128-row classes are PAIRED_TILES, each pair a 2x1 cluster with multicast Bt and C through the
          two-panel ring: 128x192 ping-pong where it needs no more columns of waves than 128x256 (H100: 3-7%
          faster on five of six large shapes), 128x256 (0.97-0.98x cuBLAS at 4096^3 and 8192x8192x4096),
          128x224 where K has 64 boxes, 128x160 and 128x128 ping-pong
          (experiments/2026-11-27-m1000-tiles, -widths), except a 128x128 pick where C is at most
          PAIRED_128_MAX_N wide or K at most PAIRED_128_MAX_K. Otherwise TILE_CLASSES,
          unclustered (128x256: 1.0, 128x128: 0.8, 64x128: 0.55, 64x64: 0.43, from 4096^3 and
          8192x8192x4096); 128-row tiles use two consumers, 64-row one. 64-row tiles in an even count of
          tile rows that make one nearly whole wave of an output at least as wide as tall, K of 16 boxes or
          more, take the 2x1 cluster (ONE_WAVE_CLUSTER; H100: 1024^3 7.45 -> 6.48 us).
        - Short K (at most 4 k-blocks) with at least two waves of 128x128 tiles: 128x128 ping-pong.
        - C of SWAP_NARROW_MIN_M to SWAP_NARROW_MAX_M rows: the transposed product 16-48 wide
          (`_narrow_swapped`).
        - One row of 64-row tiles (M <= 64), N 1024-8192, K 512-4096: `_one_row`.
        - Too few tiles for the SMs and a long K: split 128x128 pairs (`_long_k_split`), else `_few_tiles`;
          taller outputs 256 or more wide, the transposed product (`_tall_swapped`).
        - Rows TMA cannot take (`fit`): K not a multiple of 8 pads A's and Bt's rows first, N not a
          multiple of 8 stores C from the registers, unsplit.
        """
        M, N, K = shape
        if K % 8:  # the tiles are chosen for the blocks of C whose rows of A and Bt the workspace's copies hold
            M, N = rules.pad_block(shape)
        sms = gpu.sm_count if gpu is not None and gpu.sm_count else 132
        k_blocks = -(-K // BOX_K)
        base = {"group_m": 8, "persistent": 1, "epilogue": 1, "cluster_m": 1, "pingpong": 0, "split_k": 1,
                "split_dsmem": 0, "epi_panels": 0}  # fmt: skip
        def choose(paired: bool) -> tuple[int, int, int, int]:
            fits = [(bm, bn, c, -(-M // bm) * -(-N // bn)) for bm, bn, c in TILE_CLASSES]
            fits = [f for f in fits if not (paired and f[0] == 128)]
            fits += [(128, bn, 2, -(-M // 128) * -(-N // bn)) for bn in PAIRED_TILES
                     if paired and bn <= 64 * -(-N // 64)  # a tile wider than C multiplies zero fill
                     and k_blocks >= PAIRED_TILES[bn][2]]  # fmt: skip

            def est(fit: tuple[int, int, int, int]) -> float:
                bm, bn, _, tiles = fit
                efficiency = PAIRED_TILES[bn][1] if paired and bm == 128 else TILE_EFFICIENCY[(bm, bn)]
                return -(-tiles // sms) * (bm * bn) / efficiency

            return min(fits, key=est)

        paired = -(-M // 128) % 2 == 0
        bm, bn, consumers, tiles = choose(paired)
        if paired and (bm, bn) == (128, 128) and (N <= PAIRED_128_MAX_N or K <= PAIRED_128_MAX_K):
            paired = False  # C one or two tiles wide, or a short K: the unclustered choice (the note at PAIRED_TILES)
            bm, bn, consumers, tiles = choose(paired)
        params = {**base, "bm": bm, "bn": bn, "consumers": consumers}
        if paired and bm == 128:
            # The pair of tiles one 2x1 cluster (H100: 1000x4608x3584 77.7 -> 50.8 us with 128x160 ping-pong
            # tiles, 4096x1408x2048 44.7 -> 36.3 us with 128x192, both timed with the warp producer, which the
            # default leaves out in a cluster; 128x192 tiles each consumer's own, as on
            # 12288x4096x512 86.4 -> 80.8 us, 16384x16384x1024 761 -> 741 us; experiments/NOTES.md).
            # C through the two-panel ring leaves room for a deeper ring (4 with 128x256 tiles, 3 with the
            # whole tile staged); H100: 12288x256x16384 191 -> 181 us, 512x8192x2048 29.9 -> 27.8 us.
            params.update(cluster_m=2, pingpong=PAIRED_TILES[bn][0], epi_panels=2)
            slots = four_cluster_slots(sms)
            if -(-M // 128) % 4 == 0 and ONE_WAVE_CLUSTER * slots <= tiles <= slots:
                # One nearly whole wave of clusters of four, each quarter of the Bt tile loaded once and multicast
                # to all four (H200, experiments/2026-11-28-cluster4: 1000x1408x2048, 120 tiles of 128x96, 11.59 ->
                # 11.05 us; 12288x256xK, 96 tiles of 128x256, within 2% either way; more than one wave,
                # 1000x4608x3584, no change).
                params["cluster_m"] = 4
        elif (bm, bn) == (128, 256):
            params["epi_panels"] = 2
        elif (bm == 64 and N >= M and k_blocks >= ONE_WAVE_CLUSTER_MIN_K_BLOCKS and -(-M // 64) % 2 == 0
              and ONE_WAVE_CLUSTER * sms <= tiles <= sms):  # fmt: skip
            # 64-row tiles in pairs that make one nearly whole wave of an output at least as wide as tall: the
            # 2x1 cluster, each pair's Bt tile multicast (H100, experiments/2026-11-27-worst-neighbours: 1024^3
            # 7.45 -> 6.48 us, 128x8192x1024 7.65 -> 5.84, 512x1024x1024 5.56 -> 4.94, 128x4096x1024 5.07 ->
            # 4.86; with a half wave or less it lost: 128x1024x1024 3.78 -> 4.51, 256x1024x1024 4.16 -> 4.69,
            # 128x2048x1408 4.92 -> 5.58). Shorter K and taller outputs were not measured.
            params["cluster_m"] = 2
        if k_blocks <= 4 and -(-M // 128) * -(-N // 128) >= 2 * sms:
            # Short K, many tiles: the epilogue costs as much as the main loop, and ping-pong consumers
            # overlap one tile's stores with the next tile's MMAs (H200: 12288x12288x256 0.81 -> 0.86x).
            params = {**base, "bm": 128, "bn": 128, "consumers": 2, "pingpong": 1}
        def deepest(params: Params, rings: tuple[int, ...]) -> Params | None:
            tuned = self.fit(self.default_tuning(params, shape=shape), shape)
            fitting = ({**tuned, "stages": s} for s in rings)
            return next((c for c in fitting if self.check(c, shape, gpu) is None), None)

        rings = (8, 7, 6, 5, 4, 3, 2)
        if SWAP_NARROW_MIN_M <= M <= SWAP_NARROW_MAX_M:
            return deepest({**base, **self._narrow_swapped(M, N, k_blocks, sms)}, rings)
        mid = self._mid_swapped(M, N, k_blocks, sms)
        if mid is not None:
            return deepest({**base, **mid}, (16, 14, 12, 10, *rings))
        one_row = self._one_row(M, N, k_blocks, sms)
        if one_row is not None:
            return deepest({**base, **one_row}, (16, 14, 12, 10, *rings))
        if (tiles * 2 <= sms and k_blocks >= 24) or (tiles <= sms and k_blocks >= 32):
            swapped = self._tall_swapped(M, N, k_blocks, sms) if 256 <= N < M else None
            chosen = swapped and deepest({**base, **swapped}, (16, 14, 12, 10, 8))
            if chosen:
                return chosen
            few = self._long_k_split(M, N, k_blocks, sms) or self._few_tiles(M, N, k_blocks, sms)
            if few is not None:
                params = {**base, **few}
                rings = (16, 14, 12, 10, *rings)  # few CTAs per SM: the deepest ring that fits
        return deepest(params, rings)

    def fit(self, params: Params, shape: Shape) -> Params:
        """`params` for the rows of `shape`'s A, Bt and C, which TMA reads and writes only where they start 16-byte
        aligned: K not a multiple of 8 copies A and Bt first into the workspace with padded rows (`pad_rows`;
        experiments/2026-11-28-pad-rows), a multiple of 8 reads them in place; N not a multiple of 8 stores C from
        the registers (epilogue=0), unsplit (the split-K sum reads whole float4s)."""
        M, N, K = shape
        out = {**params, "pad_rows": 1 if K % 8 else 0}
        if K % 8:
            out["stream_k"] = 0
        if N % 8:
            out.update(epilogue=0, epi_panels=0, split_k=1, split_dsmem=0)
        return out

    def _narrow_swapped(self, M: int, N: int, k_blocks: int, sms: int) -> Params:
        """For C of SWAP_NARROW_MIN_M to SWAP_NARROW_MAX_M rows: the transposed product in 64 x (M rounded up to
        16) tiles (the kernel's rows along C's columns), the most slices with one CTA per SM at most and 8
        k-blocks a slice, summed through the workspace. H100 against the defaults before it (offline us; experiments/
        2026-11-27-widths): 16x1408x2048 6.45 -> 4.17 (split 4), 16x4608x3584 13.46 -> 9.81, 16x6144x4096 21.91
        -> 19.58, 16x8192x3584 22.68 -> 21.99, 16x4096x14336 44.25 -> 42.41 (split 2; unsplit 41.37),
        7x14336x4096 42.47 -> 41.05; 33x11008x4096 (48 columns) 34.17 against 34.33. Outputs of 49-64 rows keep
        the other rules (measured on one shape only: 64x4096x16384, 64x64 swapped 0.98x against 0.92x)."""
        tiles = -(-N // 64)
        split = max(s for s in self.space["split_k"] if s == 1 or (tiles * s <= sms and k_blocks // s >= 8))
        return {"bm": 64, "bn": 16 * -(-M // 16), "consumers": 1, "split_k": split, "epilogue": 0, "swap_ab": 1}

    @staticmethod
    def _mid_swapped(M: int, N: int, k_blocks: int, sms: int) -> Params | None:
        """For C of 65 to 96 rows, wide enough for half the SMs to one wave of clusters of four in 64-column tiles,
        K of MID_SWAPPED_MIN_K_BLOCKS boxes or more: the transposed product in 64 x (M rounded up to 32) tiles,
        unsplit, in clusters of four sharing each A tile; else None. Two 64-row tiles would compute up to 128
        rows. H200 against the 64x128 tiles in 2x1 clusters of `_few_tiles` (experiments/2026-11-28-cluster4, us
        offline / server): 77x5120x5120 21.07 / 27.01 -> 18.99 / 26.02, 80x4608x4096 16.04 / 22.21 -> 14.42 / 21.54,
        72x4608x8192 32.23 / 37.20 -> 26.55 / 34.43; with K of 16 and 32 boxes faster offline and slower in server
        mode (90x6144x1024 10.40 -> 10.94 us, 96x7168x2048 15.52 -> 16.40), where the other rules stay."""
        tiles = -(-N // 64)
        if not 64 < M <= 96 or k_blocks < MID_SWAPPED_MIN_K_BLOCKS or not sms // 2 <= tiles <= four_cluster_slots(sms):
            return None
        return {"bm": 64, "bn": 32 * -(-M // 32), "consumers": 1, "split_k": 1, "epilogue": 0, "swap_ab": 1,
                "cluster_m": 4}  # fmt: skip

    def _long_k_split(self, M: int, N: int, k_blocks: int, sms: int) -> Params | None:
        """For a few-tile output in an even count of 128-row tiles and a long K: 128x128 ping-pong pairs, the most
        slices (at least two) with one CTA per SM at most and 64 k-blocks a slice, if they fill half the SMs;
        else None. H100 (experiments/2026-11-27-widths): 1024x1024x16384 69.2 -> 54.1 us (split 2; the library
        53.6), 512x1024x16384 44.7 -> 33.0 (split 4), against 64x128 and 64x64 pairs unsplit."""
        rows = -(-M // 128)
        if rows % 2 or N < 256:
            return None
        tiles = rows * -(-N // 128)
        splits = [s for s in self.space["split_k"] if s > 1 and tiles * s <= sms and k_blocks // s >= 64]
        if not splits or tiles * max(splits) * 2 < sms:
            return None
        return {"bm": 128, "bn": 128, "consumers": 2, "pingpong": 1, "cluster_m": 2, "split_k": max(splits),
                "epilogue": 0}  # fmt: skip

    @staticmethod
    def _one_row(M: int, N: int, k_blocks: int, sms: int) -> Params | None:
        """For one row of 64-row tiles (M <= 64), the tile and split, or None (then the other rules apply).
        Measured at M = 64, N 1024-8192, K 512-4096 (H200, experiments/2026-11-27-one-row, four layouts each with
        128-deep stages and the warp producer), where it picks the fastest or one within 2% of it; outside that
        range it gives None.

        - 64x32 tiles where they make one wave: unsplit (64x4096x2048: 5.72 us against the former default's
          DSMEM split of 64x64 tiles, 6.29; the library 5.70), or split in two in the cluster's shared memory
          where that still makes one wave and each slice keeps 16 k-blocks (64x2048x4096: 6.40 us against
          8.30 unsplit, the former default 8.24, the library 8.75).
        - Else 64x64 tiles, unsplit, where they fill at least 90% of the SMs (64x8192x2048: 7.45 us against
          the 64x32 tiles' two waves, 9.14; the library 9.03).
        """
        if M > 64 or not 1024 <= N <= 8192 or not 8 <= k_blocks <= 64:
            return None
        tiles = -(-N // 32)
        if tiles <= sms:
            split = 2 if 2 * tiles <= sms and k_blocks // 2 >= 16 else 1
            out = {"bm": 64, "bn": 32, "consumers": 1, "split_k": split}
            return {**out, "split_dsmem": 1, "persistent": 0, "epilogue": 0} if split > 1 else out
        tiles = -(-N // 64)
        if 0.9 * sms <= tiles <= sms:
            return {"bm": 64, "bn": 64, "consumers": 1, "split_k": 1}
        return None

    def _few_tiles(self, M: int, N: int, k_blocks: int, sms: int) -> Params | None:
        """The tile and split-K for a shape with too few output tiles to fill the GPU, or None (then the tile
        class stays): the most CTAs (tiles x slices) up to one per SM, each slice at least 12 k-blocks.
        Fitted to 13 few-tile shapes on the H100 (experiments/2026-11-26-small-tiles, 41 configurations
        each), where it picks the fastest measured or one within 7% of it; the former rule (below, for
        taller outputs) was 1.3x slower there on 9 of them.

        - Tiles of 64 rows (one consumer) and 64 or 128 columns, no wider than N allows, the deepest ring.
        - Equal CTA counts: an unsplit tile (no reduction) first; else, where each slice of the wider tile
          still has 32 k-blocks, the wider one (half the L2 reads per FLOP: 512x512x12288, 64x128 split 4
          0.89x against 64x64 split 2 0.76x); else the fewer slices (64x4096x4096: 64x64 split 2 0.89x,
          64x128 split 4 0.61x).
        - Outputs at least as wide as tall that one wave of 64x128 tiles covers, and 64x64 tiles do not:
          unsplit 128x64 or 64x128 tiles (below).
        - Outputs at least as wide as tall, of more than one 64-row tile: the 2x1 cluster multicasts the B
          tile (B is the larger operand there) and the slices sum through the workspace (128x2048x2048:
          64x64 split 2 0.85x, in the cluster's shared memory 0.82x, the former default 0.68x). One row of
          tiles: no cluster; up to 3 slices sum in the cluster's shared memory (64x4096x4096: 0.89x against
          0.77x through the workspace), more through the workspace.
        - Taller outputs, and shapes no 64-row tile fits: the H200 rule, 64x128 before 64x64 before 128x128,
          the deepest split, up to 4 slices in DSMEM (2048x256x4096: 0.79 -> 0.94x).
        """
        wide = N >= M and M > 64
        if wide and -(-M // 64) * -(-N // 64) > sms >= -(-M // 64) * -(-N // 128):
            # One wave of 8192-element tiles, unsplit, the 2x1 cluster, C through the TMA store: outputs
            # twice as wide as tall or more in 128x64 tiles (H100: 512x2048x4096 0.79 -> 1.07x, 256x4096x4096
            # 0.80 -> 1.13x), else 64x128 (1024x1024x2048 0.69 -> 0.88x, 1024x1024x4096 0.73 -> 0.83x,
            # 128x8192x4096 0.88 -> 0.98x; experiments/2026-11-26-square).
            if M >= 256 and N >= 2 * M:
                return {"bm": 128, "bn": 64, "consumers": 2, "split_k": 1, "epilogue": 1, "cluster_m": 2}
            return {"bm": 64, "bn": 128, "consumers": 1, "split_k": 1, "epilogue": 1, "cluster_m": 2}
        options = []
        for bm, bn in ((64, 64), (64, 128)):
            if bn > 64 * -(-N // 64):
                continue  # a tile wider than the output only multiplies zero fill
            tiles = -(-M // bm) * -(-N // bn)
            for split in self.space["split_k"]:
                if tiles * split <= sms and (split == 1 or k_blocks // split >= 12):
                    if split > 1 or (bn == 64 and (wide or M <= 64)):
                        options.append((tiles * split, split, bm, bn))
        if not options or not wide and M > 64:
            # The H200 rule: 64x128 before 64x64 before 128x128, the deepest split
            for bm, bn in ((64, 128), (64, 64), (128, 128)):
                if bn > 64 * -(-N // 64):
                    continue
                tiles = -(-M // bm) * -(-N // bn)
                splits = [s for s in self.space["split_k"] if tiles * s <= sms and k_blocks // s >= 12]
                if splits and max(splits) > 1:
                    split = max(splits)
                    return {"bm": bm, "bn": bn, "consumers": 1 if bm == 64 else 2, "epilogue": 0, "split_k": split,
                            **({"split_dsmem": 1, "persistent": 0} if split <= 4 else {})}  # fmt: skip
            return None
        most = max(o[0] for o in options)
        ties = sorted((o for o in options if o[0] == most), key=lambda o: o[1])  # fewest slices first
        _, split, bm, bn = ties[-1] if ties[0][1] > 1 and k_blocks // ties[-1][1] >= 32 else ties[0]
        out = {"bm": bm, "bn": bn, "consumers": 1 if bm == 64 else 2, "split_k": split}
        if split > 1:
            out["epilogue"] = 0
        if wide:
            out["cluster_m"] = 2
        elif 1 < split <= 3:
            out.update(split_dsmem=1, persistent=0)
        return out

    def _tall_swapped(self, M: int, N: int, k_blocks: int, sms: int) -> Params | None:
        """For a few-tile output taller than wide, the transposed product's tile and split, or None: the
        kernel's M is C's N, so the 2x1 cluster multicasts A, the larger operand. Measured on the H100
        (experiments/2026-11-26-swap-ab, 61 configurations each), where it picks the fastest one:
        2048x512x4096 0.73 -> 0.87x, 2048x256x8192 0.82 -> 0.88x, 2048x256x4096 0.80 -> 0.86x,
        1024x512x4096 0.67 -> 0.79x offline. Measured on outputs 256 and 512 wide only: narrower ones keep
        the rule of `_few_tiles`.

        - Kernel tiles 64x64, 128x64 or 64x128 (kernel rows along C's columns), two tile rows at least
          (the cluster's pair), split K through the workspace; the most CTAs up to one per SM, each slice
          at least 12 k-blocks.
        - Equal CTA counts: 128x64 where each slice keeps 64 k-blocks (2048x256x8192: 128x64 split 2 0.88x
          against 64x64 unsplit 0.83x), else the fewest slices (2048x256x4096: 64x64 unsplit 0.86x, 128x64
          split 2 0.84x).
        """
        options = []
        for bm, bn in ((128, 64), (64, 64), (64, 128)):
            rows = -(-N // bm)
            if rows < 2 or bn > 64 * -(-M // 64):
                continue
            tiles = rows * -(-M // bn)
            for split in self.space["split_k"]:
                if tiles * split <= sms and (split == 1 or k_blocks // split >= 12):
                    options.append((tiles * split, split, bm, bn))
        if not options:
            return None
        most = max(o[0] for o in options)
        ties = [o for o in options if o[0] == most]
        wide_rows = [o for o in ties if o[2] == 128 and k_blocks // o[1] >= 64]
        _, split, bm, bn = wide_rows[0] if wide_rows else min(ties, key=lambda o: (o[1], o[3]))
        return {"bm": bm, "bn": bn, "consumers": 1 if bm == 64 else 2, "split_k": split, "epilogue": 0,
                "cluster_m": 2, "swap_ab": 1}  # fmt: skip


FAMILIES: dict[str, Family] = {
    "wgmma": WgmmaFamily(
        name="wgmma",
        template="wgmma_ws.cu",
        space=SPACE,
        description="Hopper TMA + wgmma warp-specialised kernel: producer warpgroup, 1-2 consumer "
        "warpgroups (3 for 192-row tiles), mbarrier ring, setmaxnreg, optional persistence, TMA-store epilogue, "
        "multicast clusters of 2 or 4 along M, split-K with a reduction kernel or DSMEM, stream-K, rows of A and Bt "
        "copied with 16-byte padding where K is not a multiple of 8",
        min_cc=9.0,
        tuning=("group_m", "persistent", "epi_panels", "stages", "warp_producer", "stage_k"),
    ),
}
