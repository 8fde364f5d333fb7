"""Analytic pre-ranking of kernel-family configurations: `predict_us(family, params, shape, gpu)` is a rough
time in microseconds for one call, from a roofline over tensor-core compute (with wave and tile
quantisation, clusters placed whole in a GPC), L2 → SM traffic, DRAM traffic and, for cp.async pipelines,
load latency, plus per-tile (epilogue, DSMEM reduction) and launch costs.

- It only has to rank configurations of one shape, not predict exact times.
- Pure: no I/O, no randomness.
- A configuration that cannot launch (shared memory over the opt-in limit, more than 1024 threads,
  accumulators that must spill) gets `math.inf`.
- A `Family` object's own `time_factor(params, gpu_name)`, when it has one, corrects for what the model
  cannot see (ping-pong consumers, say).
- Parameter names are read case-insensitively, with common aliases (BM/BLOCK_M, SPLIT_K/SPLITK, ...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from hgemm.core.gpc import resident_clusters
from hgemm.core.record import GpuInfo
from hgemm.core.shape import Shape

KERNEL_LAUNCH_US = 2.0  # one kernel in a graph, end to end, with nothing to do
EXTRA_KERNEL_US = 1.2  # each further kernel (split-K reduction)
TILE_OVERHEAD_US = 0.6  # pipeline fill + epilogue of one CTA tile, not hidden at occupancy 1
SMEM_RESERVED_PER_CTA = 1024  # the driver keeps 1 KiB per resident CTA
MAX_CTAS_PER_SM = 32
MAX_ACC_REGS = 192  # fp32 accumulators per thread beyond which a kernel spills
MAX_THREADS_PER_SM = 2048
REGS_PER_SM = 65536
# The constants below were set from the H100 archive of 2026-11-25 (grid100 and shapes-real runs); the
# numbers they rest on are in experiments/2026-11-26-model-error/README.md.
#
# A wgmma kernel without the TMA-store epilogue writes fp16 C from its accumulator fragments with 4-byte
# stores that fill half of each sector: ~11 GB/s per SM. Configurations that differ only in `epilogue`
# differ by 92 us per MB of C an SM writes (74 on the H200): a cost per tile, which long K hides and short
# K does not.
DIRECT_STORE_BPS = 11e9
# A cp.async (mma.sync) pipeline keeps `stages - 1` k-blocks of loads in flight per CTA, so with few CTAs
# per SM (small M, long K) a k-block takes the load latency over that. Set so that the mma_ms times of the
# shapes with K/(M*N) >= 1e-2 come out right (median measured / predicted 1.72 without this bound, 1.00
# with it).
MEMORY_LATENCY_US = 0.7
# A DSMEM split-K tile parks its slices' partials and sums them between two release/acquire cluster barriers
# (0.69 us each in the cluster probe of 2026-11-22): the median excess of single-wave DSMEM splits over the
# model without this term.
DSMEM_REDUCE_US = 0.9
# A `small` (direct) warp keeps one chunk of loads ahead, so each of its K chunks waits out a load's latency: from
# DRAM the full MEMORY_LATENCY_US (H100, M = 16 layers: 64, 32 and 16 chunks per warp took 45.8, 27.8 and 22.2 us at
# 16x6144x4096), from the L2 about half of it. On the H100 grid100 archive and the decode shapes' records, this
# took the rank correlation of the family's configurations per shape from 0.54 to 0.80 (median over 53 shapes),
# with the all-family ranking unchanged (experiments/2026-11-27-small-deep, NOTES item 81).
DIRECT_L2_LATENCY_SHARE = 0.5


@dataclass(frozen=True)
class GpuPeaks:
    """Achievable (not datasheet) rates used by the model."""

    sm_tflops: float  # dense fp16 tensor-core TFLOP/s per SM with the best instruction (wgmma on Hopper)
    hbm_bps: float  # DRAM bytes/s
    l2_bps: float  # L2 -> SM bytes/s, whole GPU


def gpu_peaks(gpu: GpuInfo) -> GpuPeaks:
    """Rates for `gpu`, from its name where known, else from its compute capability."""
    name = gpu.name.upper()
    major = int(float(gpu.cc)) if gpu.cc else 8
    if major >= 9:
        # H100 SXM: ~990 TFLOP/s datasheet, ~750 achieved by the best wgmma kernels, on 132 SMs.
        sm_tflops = 750.0 / 132
        hbm = 4.8e12 if "H200" in name else (2.0e12 if "PCIE" in name else 3.35e12)
        l2 = 11.0e12  # what the best kernels imply; microbenchmarks quote 7-12 TB/s
    elif major == 8 and gpu.cc in ("8.0", "8.7"):
        sm_tflops = 280.0 / 108  # A100: 312 datasheet
        hbm = 2.0e12 if "80GB" in name else 1.55e12
        l2 = 5.0e12
    else:  # consumer Ampere/Ada and anything unknown: modest rates
        sm_tflops = 1.4
        hbm = 0.9e12
        l2 = 3.0e12
    return GpuPeaks(sm_tflops=sm_tflops, hbm_bps=hbm, l2_bps=l2)


# Share of the GPU's best tensor-core rate a family's main loop reaches, by name prefix.
# mma.sync kernels on Hopper top out well below what wgmma reaches.
FAMILY_EFFICIENCY_HOPPER = {"wgmma": 0.92, "mma": 0.64, "splitk": 0.62, "split": 0.62, "small": 0.35}
FAMILY_EFFICIENCY_AMPERE = {"wgmma": 0.0, "mma": 0.88, "splitk": 0.85, "split": 0.85, "small": 0.45}
DEFAULT_EFFICIENCY = 0.5


def family_efficiency(name: str, gpu: GpuInfo) -> float:
    table = FAMILY_EFFICIENCY_HOPPER if float(gpu.cc or 8.0) >= 9.0 else FAMILY_EFFICIENCY_AMPERE
    for prefix in sorted(table, key=len, reverse=True):
        if name.lower().startswith(prefix):
            return table[prefix]
    return DEFAULT_EFFICIENCY


_ALIASES = {
    "bm": ("bm", "block_m", "tile_m", "blk_m"),
    "bn": ("bn", "block_n", "tile_n", "blk_n"),
    "bk": ("bk", "block_k", "tile_k", "blk_k"),
    "warps_m": ("warps_m", "wm"),
    "warps_n": ("warps_n", "wn"),
    "warps_k": ("warps_k", "wk"),
    "raster": ("raster", "group_m", "swizzle"),
    "cluster_m": ("cluster_m", "cluster"),
    "threads": ("threads", "num_threads", "block_threads"),
    "stages": ("stages", "num_stages", "pipeline"),
    "split_k": ("split_k", "splitk", "splits", "slices"),
    "consumers": ("consumers", "warpgroups", "consumer_wgs", "wg"),
}


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def param(params: dict[str, Any], key: str, default: Any = None) -> Any:
    """A parameter by canonical name, accepting any case and the aliases above."""
    lowered = {str(k).lower(): v for k, v in params.items()}
    for alias in _ALIASES.get(key, (key,)):
        if alias in lowered:
            return lowered[alias]
    return default


@dataclass(frozen=True)
class Tile:
    bm: int
    bn: int
    bk: int
    threads: int
    stages: int
    split_k: int
    warp_m: int  # rows of C one warp (or warpgroup) owns
    warp_n: int
    smem_bytes: int
    regs_per_thread: int
    acc_regs: int  # fp32 accumulators per accumulating thread
    wgmma: bool
    direct: bool  # operands loaded straight from global memory into fragments (no smem reuse)
    warps_m: int
    warps_n: int
    persistent: bool
    cluster_m: int


def tile_of(family_name: str, params: dict[str, Any], family: Any = None) -> Tile:
    """The launch geometry a configuration implies (estimates where the family does not say)."""
    lname = family_name.lower()
    wgmma = lname.startswith("wgmma")
    direct = lname.startswith("small")
    bm = int(param(params, "bm", 128 if wgmma else 64))
    bn = int(param(params, "bn", 256 if wgmma else 64))
    stages = int(param(params, "stages", 2))
    split_k = max(1, int(param(params, "split_k", 1)))
    wm, wn = param(params, "warps_m"), param(params, "warps_n")
    warps_k = int(param(params, "warps_k", 1))
    persistent = bool(param(params, "persistent", 0))
    cluster_m = int(param(params, "cluster_m", 1))
    smem = None
    if wgmma:
        bk = int(param(params, "stage_k", param(params, "bk", 64)))  # K per ring stage (wgmma: stage_k)
        consumers = int(param(params, "consumers", max(1, bm // 64)))
        threads = int(param(params, "threads", 128 * (consumers + 1)))
        wm, wn = consumers, 1
        warp_m, warp_n = max(1, bm // consumers), bn
        acc_threads = 128 * consumers
        epilogue = bm * bn * 2 if int(param(params, "epilogue", 0)) else 0
        smem = stages * (bm * bk + bk * bn) * 2 + epilogue + 1024
    else:
        if wm is None or wn is None:
            threads = int(param(params, "threads", 128))
            wm, wn = _split_warps(threads // 32, bm, bn)
        wm, wn = int(wm), int(wn)
        threads = 32 * wm * wn * warps_k
        warp_m, warp_n = max(1, bm // wm), max(1, bn // wn)
        acc_threads = threads // warps_k
        if direct:  # each warp walks its own 32-wide K chunks; warps along K are summed in smem
            bk = 32 * warps_k
            stages = max(stages, 2)
            smem = (warps_k - 1) * bm * bn * 4
        else:
            bk = int(param(params, "bk", 32))
    if family is not None and callable(getattr(family, "smem_bytes", None)):
        try:
            smem = int(family.smem_bytes(params))
        except Exception:  # a family's own estimate is optional; fall back to the generic one
            pass
    if smem is None:
        smem = stages * (bm * bk + bk * bn) * 2
        if split_k == 1:  # the C tile is staged through the same shared memory
            smem = max(smem, bm * (bn + 8) * 2)
    acc_regs = bm * bn // max(1, acc_threads)  # fp32 accumulators per thread
    regs = min(255, acc_regs + (24 if wgmma else 40 + acc_regs // 4))
    return Tile(
        bm,
        bn,
        bk,
        threads,
        stages,
        split_k,
        warp_m,
        warp_n,
        smem,
        regs,
        acc_regs,
        wgmma,
        direct,
        wm,
        wn,
        persistent,
        cluster_m,
    )


def _split_warps(warps: int, bm: int, bn: int) -> tuple[int, int]:
    wm = 1
    while wm * 2 <= warps and bm // (wm * 2) >= bn // (warps // (wm * 2)):
        wm *= 2
    return wm, max(1, warps // wm)


def ctas_per_sm(tile: Tile, gpu: GpuInfo) -> int:
    """Resident CTAs per SM from shared memory, threads and registers (0: cannot launch)."""
    if tile.threads > 1024 or tile.threads <= 0 or tile.smem_bytes > gpu.smem_per_block_optin:
        return 0
    if tile.acc_regs > MAX_ACC_REGS:
        return 0
    smem_sm = gpu.smem_per_block_optin + SMEM_RESERVED_PER_CTA
    by_smem = smem_sm // (tile.smem_bytes + SMEM_RESERVED_PER_CTA)
    by_threads = MAX_THREADS_PER_SM // tile.threads
    regs = -(-tile.regs_per_thread // 8) * 8
    by_regs = REGS_PER_SM // (regs * tile.threads)
    return int(max(0, min(by_smem, by_threads, by_regs, MAX_CTAS_PER_SM)))


@dataclass(frozen=True)
class Prediction:
    us: float
    tiles: int
    ctas_per_sm: int
    waves: float  # tiles / (SMs x resident CTAs)
    busiest_sm_tiles: float  # whole tiles, or tile-equivalents of k-blocks with stream-K
    padded_fraction: float  # useful / padded work
    compute_us: float
    l2_us: float
    dram_us: float
    fixed_us: float
    latency_us: float = 0.0  # load latency over the k-blocks in flight (cp.async families)


# The gemv family (CUDA cores, no tiles): the share of the HBM rate its stream of Bt reaches (2.75-2.92 TB/s of
# 3.35 on the H100's M = 1 shapes of 58-136 MB, experiments/2026-11-27-small-m-gemv), the thread instructions
# one SM issues per second (4 schedulers x 32 lanes x ~1.7 GHz) and the share of that a loop of loads,
# conversions and FMAs keeps (0.6 when the count had both operands converted at each product; scaled to the
# count of the kernel that converts each once, 21.5 instead of 17.5 per 8 values at M = 1 with two rows, so
# that M = 1 predictions stay where they were). One loop step (UNROLL chunks of loads in flight) takes at least
# MEMORY_LATENCY_US.
GEMV_HBM_SHARE = 0.87
SM_THREAD_OPS = 128 * 1.7e9
GEMV_ISSUE_SHARE = 0.74


def _predict_gemv(family: Any, params: dict[str, Any], shape: Shape, gpu: GpuInfo) -> Prediction:
    """The gemv family: the slowest of reading B at the HBM rate, the busiest SM's share of the L2's rate, its
    instruction issue (loads, fp16 -> fp32 conversions, FMAs) and its loop steps, each at least a load's
    latency; plus the launch."""
    M, N, K = shape
    peaks = gpu_peaks(gpu)
    sms = max(1, gpu.sm_count)
    rows, warps = int(param(params, "rows", 1)), int(param(params, "warps", 8))
    ksplit, unroll = int(param(params, "ksplit", 1)), int(param(params, "unroll", 1))
    kvec = int(param(params, "kvec", 8))
    threads = 32 * warps
    groups_per_cta = max(1, warps // ksplit)
    regs = int(family.register_estimate(params)) if callable(getattr(family, "register_estimate", None)) else 64
    by_regs = REGS_PER_SM // (-(-regs // 8) * 8 * threads)
    occ = int(max(0, min(MAX_THREADS_PER_SM // threads, by_regs, MAX_CTAS_PER_SM)))
    if threads > 1024 or occ == 0:
        return Prediction(math.inf, 0, occ, math.inf, 0, 0.0, math.inf, math.inf, math.inf, math.inf)
    cta_groups = cdiv(cdiv(N, rows), groups_per_cta)
    grid = min(cta_groups, sms * occ)
    iters = cdiv(cta_groups, grid)  # groups the busiest CTA works through, one after another
    busiest = cdiv(grid, sms) * iters  # CTA-groups on the busiest SM
    sm_bytes = busiest * groups_per_cta * rows * K * 2.0
    loads = {8: 1, 2: 4}.get(kvec, 8)  # load instructions per 8 halfs of a row
    # per 8 K values of one row of Bt: its loads and 8 conversions; for each row of A, 8 FMAs, and A's loads and
    # 8 conversions shared by the warp's ROWS rows
    per_8 = loads + 8 + M * 8 + M * (loads + 8) / rows
    issue_us = busiest * groups_per_cta * rows * cdiv(K, 8) * per_8 / (SM_THREAD_OPS * GEMV_ISSUE_SHARE) * 1e6
    steps = cdiv(cdiv(cdiv(K, 256), ksplit), unroll)
    latency_us = iters * steps * MEMORY_LATENCY_US
    l2_us = sm_bytes / (peaks.l2_bps / sms) * 1e6
    dram = (N * K + M * K + M * N) * 2.0
    dram_us = dram / (peaks.hbm_bps * GEMV_HBM_SHARE) * 1e6
    p = 3.0
    body = (issue_us**p + l2_us**p + dram_us**p + latency_us**p) ** (1.0 / p)
    return Prediction(
        us=body + KERNEL_LAUNCH_US,
        tiles=cta_groups,
        ctas_per_sm=occ,
        waves=cta_groups / (sms * occ),
        busiest_sm_tiles=busiest,
        padded_fraction=cta_groups / (grid * iters),
        compute_us=issue_us,
        l2_us=l2_us,
        dram_us=dram_us,
        fixed_us=0.0,
        latency_us=latency_us,
    )


def _predict_padded(family: Any, params: dict[str, Any], shape: Shape, gpu: GpuInfo) -> Prediction:
    """wgmma's `pad_rows`: a first kernel copies A and Bt with 16-byte rows (read and written once more; A once per
    column of blocks where C goes in blocks), then the GEMM, block by block where the copies of the whole do not fit
    the workspace: each block as a GEMM of its own."""
    from hgemm.evaluator.kernels import rules

    M, N, K = shape
    bm, bn = rules.pad_block(shape)
    col_blocks, row_blocks = -(-N // bn), -(-M // bm)
    gemm = predict(family, {**params, "pad_rows": 0}, Shape(bm, bn, -(-K // 8) * 8), gpu)
    copied = (M * K * (col_blocks if bm < M else 1) + N * K) * 2.0
    copy_us = 2.0 * copied / gpu_peaks(gpu).hbm_bps * 1e6
    blocks = row_blocks * col_blocks
    us = blocks * gemm.us + copy_us + blocks * EXTRA_KERNEL_US
    return replace(gemm, us=us, tiles=blocks * gemm.tiles, dram_us=blocks * gemm.dram_us + copy_us)


def predict(family: Any, params: dict[str, Any], shape: Shape, gpu: GpuInfo) -> Prediction:
    """The model's estimate with its parts, for explanation and tests."""
    M, N, K = shape
    name = family if isinstance(family, str) else family.name
    fam = None if isinstance(family, str) else family
    if name.lower().startswith("gemv"):
        return _predict_gemv(fam, params, shape, gpu)
    if param(params, "pad_rows", 0):
        return _predict_padded(family, params, shape, gpu)
    if int(param(params, "swap_ab", 0)):  # the kernel computes C transposed: its M is C's N
        M, N = N, M
    peaks = gpu_peaks(gpu)
    eff = family_efficiency(name, gpu)
    tile = tile_of(name, params, fam)
    occ = ctas_per_sm(tile, gpu)
    sms = max(1, gpu.sm_count)
    if occ == 0 or eff <= 0:
        return Prediction(math.inf, 0, occ, math.inf, 0, 0.0, math.inf, math.inf, math.inf, math.inf)

    # a 2x1 cluster launches both of its CTAs along M, the second one past M too when M ends in the first
    tm, tn = cdiv(M, tile.bm * tile.cluster_m) * tile.cluster_m, cdiv(N, tile.bn)
    split = min(tile.split_k, -(-K // tile.bk))  # slices beyond the K extent do nothing
    dsmem = split > 1 and bool(param(params, "split_dsmem", 0))
    k_iters = cdiv(cdiv(K, split), tile.bk)
    tiles = tm * tn * split
    busiest: float = -(-tiles // sms)
    cluster = split if dsmem else tile.cluster_m  # a DSMEM split runs a tile's slices as one cluster
    if cluster > 1:
        slots = resident_clusters(cluster, occ, sms) * cluster
        # clusters that do not fit wait for the next wave; each full wave puts occ CTAs on an SM
        if tiles > slots:
            busiest = max(busiest, (cdiv(tiles, slots) - 1) * occ + 1)
    fixup_bytes = 0.0  # stream-K partials the busiest SM writes and reads
    if param(params, "stream_k", 0) and tile.persistent and split == 1 and tiles % sms:
        # The last partial wave plus one full wave is cut into equal k-block ranges, one per SM; a
        # tile's finishing CTA reads the partials of the ~sms/sk_tiles CTAs that share it.
        sk_tiles = tiles % sms + (sms if tiles > sms else 0)
        busiest = (tiles - sk_tiles) // sms + sk_tiles / sms
        fixup_bytes = (1 + cdiv(sms, sk_tiles)) * tile.bm * tile.bn * 4.0
    padded = tm * tile.bm * tn * tile.bn * split * k_iters * tile.bk
    useful_fraction = M * N * K / padded

    # Main-loop rate of one SM: family efficiency, de-rated for shallow pipelines,
    # little latency hiding and small per-warp tiles (operand reuse in registers).
    depth = tile.stages * tile.bk // 64 if tile.wgmma else tile.stages  # 64-deep k-blocks the ring holds
    stage_factor = {1: 0.5, 2: 0.78, 3: 0.93}.get(depth, 1.0)
    if k_iters < tile.stages:  # a pipeline deeper than the loop only fills
        stage_factor *= 0.9
    warps_resident = min(occ, busiest) * tile.threads // 32  # what actually shares the busiest SM
    occ_factor = 1.0 if tile.wgmma else min(1.0, 0.4 + 0.1 * warps_resident)
    reuse = tile.warp_m * tile.warp_n / (tile.warp_m + tile.warp_n)
    reuse_factor = min(1.0, (reuse / 32.0) ** 0.5)
    sm_rate = peaks.sm_tflops * 1e12 * eff * stage_factor * occ_factor * reuse_factor

    tile_flops = 2.0 * tile.bm * tile.bn * k_iters * tile.bk
    compute_us = busiest * tile_flops / sm_rate * 1e6
    rounds = math.ceil(busiest / occ)  # CTA generations on the busiest SM
    if tile.persistent:  # the next tile's loads overlap this tile's epilogue
        fixed_us = TILE_OVERHEAD_US * (1 + 0.25 * (busiest - 1))
    else:
        fixed_us = rounds * TILE_OVERHEAD_US
    if tile.wgmma and split == 1 and not param(params, "epilogue", 0):  # C stored from the fragments
        fixed_us += busiest * tile.bm * tile.bn * 2.0 / DIRECT_STORE_BPS * 1e6
    if dsmem:
        fixed_us += rounds * DSMEM_REDUCE_US

    if tile.direct:  # every warp loads its own rows of A and columns of B
        per_k = tile.warps_n * tile.bm + tile.warps_m * tile.bn
    else:
        per_k = tile.bm + tile.bn / max(1, tile.cluster_m)  # a cluster multicasts the B tile
    tile_bytes = per_k * k_iters * tile.bk * 2.0
    l2_bytes = tiles * tile_bytes
    # each SM gets its share of L2 bandwidth
    l2_us = (busiest * tile_bytes + fixup_bytes) / (peaks.l2_bps / sms) * 1e6

    operands = (M * K + K * N) * 2.0
    dram = operands + M * N * 2.0
    if operands > gpu.l2_bytes * 0.5:  # operands overflow L2: part of the tile traffic misses
        miss = 0.05 if param(params, "raster", 0) else 0.12
        dram += max(0.0, l2_bytes - operands) * miss
    kernels = 1
    if split > 1 and not dsmem:
        dram += split * M * N * 4.0 * 2  # fp32 partials written, then read by the reduction
        kernels = 2
    dram_us = dram / peaks.hbm_bps * 1e6

    latency_us = 0.0  # a TMA producer keeps the whole ring in flight
    if not tile.wgmma:  # cp.async stages, or a direct warp's one chunk ahead: a k-block waits out the load latency
        latency_us = rounds * k_iters * MEMORY_LATENCY_US / max(1, tile.stages - 1)
        if tile.direct and operands <= gpu.l2_bytes * 0.5:
            latency_us *= DIRECT_L2_LATENCY_SHARE
    p = 3.0
    body = ((compute_us + fixed_us) ** p + l2_us**p + dram_us**p + latency_us**p) ** (1.0 / p)
    us = body + KERNEL_LAUNCH_US + (kernels - 1) * EXTRA_KERNEL_US
    if fam is not None and callable(getattr(fam, "time_factor", None)):
        us *= fam.time_factor(params, gpu.name)  # what the family measured that this model cannot see
    return Prediction(
        us=us,
        tiles=tiles,
        ctas_per_sm=occ,
        waves=tiles / (sms * occ),
        busiest_sm_tiles=busiest,
        padded_fraction=useful_fraction,
        compute_us=compute_us,
        l2_us=l2_us,
        dram_us=dram_us,
        fixed_us=fixed_us,
        latency_us=latency_us,
    )


def predict_us(family: Any, params: dict[str, Any], shape: Shape, gpu: GpuInfo) -> float:
    """Estimated microseconds for one call; `family` is a Family or a family name. Lower ranks first."""
    return predict(family, params, shape, gpu).us


def spearman(a: list[float], b: list[float]) -> float | None:
    """Spearman rank correlation of two equally long lists (ties share their mean rank); None when either
    list is constant. How the model's ranking of a shape's configurations is judged against measurements."""

    def ranks(xs: list[float]) -> list[float]:
        order = sorted(range(len(xs)), key=lambda i: xs[i])
        out = [0.0] * len(xs)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2
            i = j + 1
        return out

    ra, rb = ranks(a), ranks(b)
    mean = (len(a) - 1) / 2
    cov = sum((x - mean) * (y - mean) for x, y in zip(ra, rb, strict=True))
    var = math.sqrt(sum((x - mean) ** 2 for x in ra) * sum((y - mean) ** 2 for y in rb))
    return cov / var if var else None
