"""Shape features: a fixed-length, scaled vector describing a GEMM shape on a GPU.

Invariants: `shape_features` is deterministic, float32, length `SHAPE_DIM`, every entry of order 1 for
shapes up to the validated maximum, so that L2 distance weighs size, aspect, intensity and wave
quantisation comparably. Identical shapes on GPUs with the same SM count map to identical vectors.
"""

from __future__ import annotations

import math

import numpy as np

from hgemm.core.shape import Shape

DEFAULT_SM_COUNT = 132  # H100 SXM
TILES = ((128, 128), (128, 256), (64, 128))  # common CTA tiles for the wave features

FEATURE_NAMES = (
    "log2_M",
    "log2_N",
    "log2_K",
    "log2_M_over_N",
    "log2_M_over_K",
    "log2_N_over_K",
    "log2_intensity",
    *[f"log2_tiles_{bm}x{bn}" for bm, bn in TILES],
    *[f"log2_waves_{bm}x{bn}" for bm, bn in TILES],
    *[f"wave_efficiency_{bm}x{bn}" for bm, bn in TILES],
    "log2_k_iters",
)
SHAPE_DIM = len(FEATURE_NAMES)


def shape_features(shape: Shape, sm_count: int = DEFAULT_SM_COUNT) -> np.ndarray:
    """The scaled feature vector of a shape on a GPU with `sm_count` SMs."""
    M, N, K = shape
    sm = max(1, int(sm_count or DEFAULT_SM_COUNT))
    lm, ln, lk = math.log2(M), math.log2(N), math.log2(K)
    intensity = (M * N * K) / (M * K + K * N + M * N)  # flops per fp16 byte moved, halved: 2MNK / 2(...)
    f = [lm / 4, ln / 4, lk / 4, (lm - ln) / 4, (lm - lk) / 4, (ln - lk) / 4, math.log2(intensity) / 3]
    tiles = [math.ceil(M / bm) * math.ceil(N / bn) for bm, bn in TILES]
    f += [math.log2(t) / 4 for t in tiles]
    f += [math.log2(t / sm) / 4 for t in tiles]
    f += [t / (math.ceil(t / sm) * sm) for t in tiles]  # 1.0 = the last wave is full
    f.append(math.log2(max(1.0, K / 64)) / 4)
    return np.asarray(f, dtype=np.float32)


def shapes_matrix(shapes: list[Shape], sm_count: int = DEFAULT_SM_COUNT) -> np.ndarray:
    if not shapes:
        return np.zeros((0, SHAPE_DIM), dtype=np.float32)
    return np.stack([shape_features(shape, sm_count) for shape in shapes])
