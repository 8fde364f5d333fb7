"""The text that describes one attempt, for the embedding half of its index vector.

Invariants: deterministic for the same kernel facts and record; the shape and exact timings are left out
(they live in the shape features) so attempts that differ only in those share a text, and its embedding.
Family and parameters are used when a template made the kernel, else techniques read from the source.
"""

from __future__ import annotations

import re
from typing import Any

# (name, pattern, literals): a source shows the technique when the pattern matches; one of the literals occurs
# in every match, so a source holding none of them is passed over without running the pattern (a plain
# substring test is much faster than the pattern's scan of a long source).
TECHNIQUES = (
    ("wgmma", r"\bwgmma\b|wgmma\.mma_async|warpgroup", ("wgmma", "warpgroup")),
    (
        "TMA",
        r"cp\.async\.bulk\.tensor|cuTensorMapEncode|CUtensorMap|\btma\b",
        ("cp.async.bulk.tensor", "cuTensorMapEncode", "CUtensorMap", "tma"),
    ),
    ("mma.sync", r"mma\.sync|\bmma_sync\b|\bwmma::", ("mma.sync", "mma_sync", "wmma::")),
    (
        "cp.async",
        r"cp\.async\.(ca|cg)|__pipeline_memcpy_async|cuda::memcpy_async",
        ("cp.async.c", "memcpy_async"),
    ),
    ("ldmatrix", r"ldmatrix", ("ldmatrix",)),
    ("stmatrix", r"stmatrix", ("stmatrix",)),
    ("split-K", r"split_?k|splitk|SPLIT_K", ("split", "SPLIT_K")),
    ("stream-K", r"stream_?k|STREAM_K", ("stream", "STREAM_K")),
    (
        "thread block clusters",
        r"__cluster_dims__|cluster_ctarank|cudaLaunchAttributeClusterDimension",
        ("__cluster_dims__", "cluster_ctarank", "cudaLaunchAttributeClusterDimension"),
    ),
    ("mbarrier", r"mbarrier", ("mbarrier",)),
    (
        "warp specialization",
        r"producer|consumer|warp_?special",
        ("producer", "consumer", "warp_special", "warpspecial"),
    ),
    ("swizzle", r"swizzle|SWIZZLE", ("swizzle", "SWIZZLE")),
    ("CUTLASS/CuTe", r"#include\s*<(cutlass|cute)/", ("cutlass/", "cute/")),
    ("shared memory", r"__shared__|extern\s+__shared__", ("__shared__",)),
)
_TECH = [(name, re.compile(rx), literals) for name, rx, literals in TECHNIQUES]
_NUM = re.compile(r"\b\d{3,}\b")


def source_techniques(source: str) -> list[str]:
    source = source or ""
    return [name for name, rx, lits in _TECH if any(lit in source for lit in lits) and rx.search(source)]


def kernel_digest(family: str | None, params: dict[str, Any] | None, source: str | None) -> str:
    """What the kernel is: family and parameters when known, else techniques seen in its source."""
    parts = []
    if family:
        parts.append(f"family {family}")
    if params:
        p = dict(params)
        bm, bn, bk = p.get("bm") or p.get("BM"), p.get("bn") or p.get("BN"), p.get("bk") or p.get("BK")
        if bm and bn:
            parts.append(f"tile {bm}x{bn}" + (f"x{bk}" if bk else ""))
        parts.append("params " + ", ".join(f"{k}={v}" for k, v in sorted(p.items())))
    tech = source_techniques(source or "")
    if tech:
        parts.append("techniques " + ", ".join(tech))
    return "; ".join(parts) or "kernel of unknown structure"


def ncu_summary(ncu: dict[str, Any] | None, limit: int = 8) -> str:
    if not ncu:
        return ""
    items = []
    for key, value in sorted(ncu.items()):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            items.append(f"{key} {round(float(value))}" if abs(value) >= 10 else f"{key} {value:.2g}")
        elif isinstance(value, str) and len(value) < 60:
            items.append(f"{key} {value}")
        if len(items) >= limit:
            break
    return "ncu " + ", ".join(items)


def outcome(row: dict[str, Any]) -> str:
    if row.get("failure_kind"):
        msg = (row.get("failure_message") or "").strip().splitlines()
        first = _NUM.sub("N", msg[0][:160]) if msg else ""
        return f"failed {row['failure_kind']}" + (f": {first}" if first else "")
    if not row.get("correct"):
        return "not verified"
    s = row.get("offline_speedup")
    if s is None:
        return f"correct ({row.get('stage') or 'full'} stage)"
    verdict = (
        "faster than cuBLAS" if s >= 1.02 else "on par with cuBLAS" if s >= 0.98 else "slower than cuBLAS"
    )
    if s < 0.7:
        verdict = "much slower than cuBLAS"
    return f"correct, {verdict}"


def attempt_text(row: dict[str, Any], ncu: dict[str, Any] | None = None, digest: str | None = None) -> str:
    """One attempt, in words: kernel digest (computed unless given), outcome, NCU summary."""
    if digest is None:
        digest = kernel_digest(row.get("family"), row.get("params"), row.get("source"))
    parts = [digest, outcome(row)]
    summary = ncu_summary(ncu)
    if summary:
        parts.append(summary)
    return ". ".join(parts)
