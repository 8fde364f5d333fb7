"""What an LLM sees: a parent and scored exemplars, recent failures, rendered into the prompt.

- Scored kernels come from this run's history, the index (correct kernels on this shape and its neighbours,
  with NCU metrics) and the archive, ranked by offline speedup over the best cuBLAS baseline (comparable
  across shapes).
- Parent and exemplars are drawn with weights 1/(rank+1): the best are shown most often, slower ones too.
  Exemplars are listed slowest to fastest so the prompt can ask what made the difference (contrastive,
  after CUDA-L1).
- A kernel appears at most once. All prompt text lives in `prompts/`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from hgemm.agent.llm.feedback import SafeFailure, safe_failure, strip_comments
from hgemm.agent.proposer import ProposalContext
from hgemm.evaluator.api import contract_text

from hgemm import prompts
from hgemm.core.record import MODES, NOT_DEFECTS, EvalRecord, GpuInfo

NCU_KEYS_SHOWN = 12  # at most this many NCU metrics per kernel in a prompt


@dataclass
class Scored:
    """One correct, timed kernel as a prompt shows it."""

    hash: str
    source: str
    M: int
    N: int
    K: int
    score: float  # offline speedup over the best baseline (higher is better)
    times: dict[str, float] = field(default_factory=dict)  # mode -> median us
    speedup: dict[str, float] = field(default_factory=dict)  # mode -> speedup over best baseline
    resources: dict[str, Any] = field(default_factory=dict)
    ncu: dict[str, Any] = field(default_factory=dict)
    stage: str = "full"


@dataclass
class Prompt:
    system: str
    user: str
    parent_hash: str | None = None
    exemplar_hashes: list[str] = field(default_factory=list)


def scored_from_record(source: str, record: EvalRecord) -> Scored | None:
    """A Scored view of a correct record with an offline time, else None."""
    if not record.ok or record.median_us("offline") is None:
        return None
    times = {m: record.median_us(m) for m in MODES if record.median_us(m) is not None}
    speedup = {m: record.speedup_best(m) for m in MODES if record.speedup_best(m) is not None}
    score = speedup.get("offline") or (1.0 / times["offline"])
    resources = {}
    if record.resources:
        r = record.resources
        for key in ("registers", "shared_bytes", "spill_stores", "spill_loads"):
            if getattr(r, key) is not None:
                resources[key] = getattr(r, key)
    ncu = dict(list((record.ncu or {}).items())[:NCU_KEYS_SHOWN])
    return Scored(
        hash=record.kernel_hash,
        source=strip_comments(source),
        M=record.M,
        N=record.N,
        K=record.K,
        score=float(score),
        times={m: round(t, 3) for m, t in times.items()},
        speedup={m: round(s, 3) for m, s in speedup.items()},
        resources=resources,
        ncu=ncu,
        stage=record.stage,
    )


def failure_from_record(record: EvalRecord, source: str = "") -> SafeFailure | None:
    """A failed record as a prompt may show it: its kind, numbers and the source lines it points at."""
    if record.ok or not record.failure_kind or record.failure_kind in NOT_DEFECTS:
        return None
    return safe_failure(record.kernel_hash, record.failure_kind, record.failure_message, source)


def _prefer(a: Scored, b: Scored, shape: tuple[int, int, int]) -> Scored:
    """Of two views of one kernel: this shape first, then the full stage, then the newer (b)."""

    def key(s: Scored) -> tuple[bool, bool]:
        return ((s.M, s.N, s.K) == shape, s.stage == "full")

    return a if key(a) > key(b) else b


def gather(ctx: ProposalContext, limit: int = 32) -> tuple[list[Scored], list[SafeFailure], EvalRecord | None]:
    """Scored kernels (best first, one per hash), recent failures on this shape (newest first), and the
    newest timed record on this shape (for its baselines and floors)."""
    shape = (ctx.M, ctx.N, ctx.K)
    pairs: list[tuple[str, EvalRecord]] = []
    from hgemm.agent.llm import sources as llm_sources

    pairs.extend(llm_sources.from_store(ctx, limit))
    pairs.extend((c.source, r) for c, r in ctx.history)
    best: dict[str, Scored] = {}
    failures: dict[str, SafeFailure] = {}
    latest: EvalRecord | None = None
    for source, record in pairs:
        if (record.M, record.N, record.K) == shape:
            if record.modes and (latest is None or record.created >= latest.created):
                latest = record
            failure = failure_from_record(record, source)
            if failure:
                failures.pop(failure.hash, None)
                failures[failure.hash] = failure
        scored = scored_from_record(source, record)
        if scored:
            best[scored.hash] = _prefer(best[scored.hash], scored, shape) if scored.hash in best else scored
    ranked = sorted(best.values(), key=lambda s: (-s.score, s.hash))
    return ranked, list(reversed(failures.values())), latest


def rank_weighted_sample(items: list[Any], k: int, rng: random.Random) -> list[Any]:
    """k distinct items drawn without replacement with weight 1/(rank+1) (items come best first)."""
    pool = list(enumerate(items))
    chosen = []
    while pool and len(chosen) < k:
        weights = [1.0 / (rank + 1) for rank, _ in pool]
        pick = rng.choices(range(len(pool)), weights=weights)[0]
        chosen.append(pool.pop(pick)[1])
    return chosen


def choose(ranked: list[Scored], k: int, rng: random.Random) -> tuple[Scored | None, list[Scored]]:
    """A parent (rank-weighted) and up to k exemplars besides it, listed slowest to fastest. When the
    pool allows, at least one exemplar comes from the slower half, so there is something to contrast."""
    if not ranked:
        return None, []
    parent = rank_weighted_sample(ranked, 1, rng)[0]
    rest = [s for s in ranked if s.hash != parent.hash]
    exemplars = rank_weighted_sample(rest, k, rng)
    slower = rest[len(rest) // 2 :]
    if k >= 2 and len(rest) > k and not any(s in slower for s in exemplars):
        exemplars[-1] = rng.choice(slower)
    exemplars.sort(key=lambda s: (s.score, s.hash))
    return parent, exemplars


def gpu_facts(gpu: GpuInfo) -> dict[str, Any]:
    return {
        "name": gpu.name,
        "cc": gpu.cc,
        "sm_count": gpu.sm_count,
        "smem_kib": gpu.smem_per_block_optin // 1024,
        "l2_mib": round(gpu.l2_bytes / (1 << 20), 1),
    }


def timing_facts(record: EvalRecord | None) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Floors and baseline medians per mode from one record (empty when none)."""
    floors: dict[str, float] = {}
    baselines: dict[str, dict[str, float]] = {}
    for mode, result in (record.modes if record else {}).items():
        if result.floor_us:
            floors[mode] = result.floor_us
        if result.baselines:
            baselines[mode] = {b: s.median_us for b, s in sorted(result.baselines.items())}
    return floors, baselines


def build_prompt(
    ctx: ProposalContext, rng: random.Random, *, exemplars: int = 4, failures: int = 4
) -> Prompt:
    """Choose parent and exemplars for ctx's shape and render the system and task prompts."""
    ranked, failed, latest = gather(ctx)
    parent, shown = choose(ranked, exemplars, rng)
    floors, baselines = timing_facts(latest)
    system = prompts.render("system.j2", contract=contract_text().strip())
    user = prompts.render(
        "task.j2",
        M=ctx.M,
        N=ctx.N,
        K=ctx.K,
        gpu=gpu_facts(ctx.gpu),
        floors=floors,
        baselines=baselines,
        parent=parent,
        exemplars=shown,
        failures=failed[:failures],
    )
    return Prompt(system, user, parent.hash if parent else None, [s.hash for s in shown])
