"""Synthetic attempts for tests and benchmarks: plausible `EvalRecord`s on made-up kernels.

Invariants: deterministic for a given seed; kernel "sources" are short comment-only texts (no CUDA code),
unique per (family, params, variant); records mix full and quick stages, successes and every failure
kind, and carry NCU metrics on some rows. Nothing here is a measurement.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from hgemm.core.record import BASELINES, FAILURE_KINDS, EvalRecord, ModeResult, Resources, Stats

FAMILIES = {
    "mma_sync_cpasync": ("mma.sync", "cp.async", "ldmatrix"),
    "wgmma_tma": ("wgmma", "cp.async.bulk.tensor", "mbarrier"),
    "wgmma_tma_ws": ("wgmma", "cp.async.bulk.tensor", "mbarrier", "producer consumer"),
    "simt_tiled": ("__shared__",),
}
SHAPES = [
    (m, n, k) for m in (128, 512, 1024, 4096, 8192) for n in (256, 1024, 4096) for k in (512, 2048, 8192)
]
MESSAGES = {
    "compile_error": 'kernel.cu(41): error: identifier "HG_BM" is undefined',
    "incorrect": "max relative error 3.1e-01 above bound 2.0e-03",
    "crash": "worker died: an illegal memory access was encountered",
    "timeout": "evaluation ran past 30 s",
}


@dataclass
class Attempt:
    source: str
    family: str
    params: dict
    proposer: str
    parents: list[str]
    record: EvalRecord


def kernel_source(family: str, params: dict, variant: int = 0) -> str:
    words = " ".join(FAMILIES[family])
    body = ", ".join(f"{k}={v}" for k, v in sorted(params.items()))
    return f"// synthetic {family} kernel ({body}) variant {variant}\n// uses {words}\n"


def make_record(
    rng: random.Random,
    h: str,
    M: int,
    N: int,
    K: int,
    *,
    gpu: str = "NVIDIA H100",
    failure: str | None = None,
) -> EvalRecord:
    stage = "full" if rng.random() < 0.8 else "quick"
    r = EvalRecord(h, M, N, K, gpu=gpu, cc="9.0", driver="580.00", stage=stage, compiled=True)
    r.resources = Resources(
        "sm_90a", registers=rng.choice([128, 168, 232]), shared_bytes=rng.choice([98304, 196608])
    )
    if failure:
        r.fail(failure, MESSAGES.get(failure, f"{failure} in synthetic attempt"))
        if failure == "compile_error":
            r.compiled = False
        return r
    r.correct = True
    flops = 2.0 * M * N * K
    base = flops / 600e12 * 1e6 + 3.0  # µs at 600 TFLOP/s plus launch
    for mode in ("offline",) if stage == "quick" else ("offline", "server"):
        slow = 1.0 if mode == "offline" else 1.1
        baselines = {
            b: Stats(base * slow * f, base * slow * f * 0.98, base * slow * f * 1.03, 50)
            for b, f in zip(BASELINES, (1.05, 1.08, 1.0, 0.97))
        }
        cand = base * slow * rng.uniform(0.85, 1.6)
        r.modes[mode] = ModeResult(
            mode, Stats(cand, cand * 0.98, cand * 1.04, 50), baselines, floor_us=base * 0.7
        ).finish(r.shape)
    if rng.random() < 0.03:  # NCU runs only on a few candidates
        r.ncu = {"sm_throughput_pct": rng.uniform(40, 95), "dram_throughput_pct": rng.uniform(10, 90),
                 "bank_conflicts": rng.randint(0, 5000), "achieved_occupancy": rng.uniform(0.1, 0.5)}  # fmt: skip
    return r


def attempts(
    n: int, seed: int = 0, kernels: int = 2000, gpus: tuple[str, ...] = ("NVIDIA H100",)
) -> Iterator[Attempt]:
    """`n` attempts over at most `kernels` distinct kernels and the `SHAPES` grid."""
    rng = random.Random(seed)
    pool: list[tuple[str, dict, str]] = []
    families = list(FAMILIES)
    for i in range(kernels):
        fam = families[i % len(families)]
        params = {
            "bm": rng.choice([64, 128, 256]),
            "bn": rng.choice([64, 128, 256]),
            "stages": rng.choice([2, 3, 4]),
        }
        pool.append((fam, params, kernel_source(fam, params, i)))
    hashes: list[str] = []
    from hgemm.core.record import kernel_hash

    # the kinds an archive of this shape was drawn with: a kind added later must not change a seed's archive
    failure_kinds = [
        k for k in FAILURE_KINDS if k not in ("suspicious_speed", "timing_disturbed", "object_audit")
    ]
    for _ in range(n):
        fam, params, src = rng.choice(pool)
        h = kernel_hash(src)
        parents = [rng.choice(hashes)] if hashes and rng.random() < 0.3 else []
        hashes.append(h)
        M, N, K = rng.choice(SHAPES)
        failure = rng.choice(failure_kinds) if rng.random() < 0.25 else None
        rec = make_record(rng, h, M, N, K, gpu=rng.choice(gpus), failure=failure)
        proposer = "template" if rng.random() < 0.7 else "llm:test-model"
        yield Attempt(src, fam, params, proposer, [p for p in parents if p != h], rec)
