"""What an LLM sees: choose a parent and variants, collect recent failures, render within a token budget.

Scored kernels come from this run's history and, when present, the index (correct kernels on this
shape and its neighbours, with NCU metrics) and the archive. Kernels are ranked by offline speedup over
the best cuBLAS baseline (comparable across shapes). `render_prompt` is the entry point: the parent is
drawn with weight 1/(rank+1) from the elites of a family x tile grid and shown once (its own preprocessor
branches only, `agent.llm.compact`); variants are picked to contrast with it (another family, nearest
faster, nearest slower; `agent.llm.variants`), listed slowest to fastest and shown as their differences
from it (contrastive, after CUDA-L1); the budget (tokens by `agent.llm.tokens`) is filled task first,
then parent, failures, variants. A kernel appears at most once. All prompt text is in `prompts/`.

Invariants (what reaches a prompt from a record or a source, all of it possibly a candidate's):
- Sources shown are `agent.llm.scrub.prompt_source` forms: no comments, bounded literals.
- Failures are `agent.llm.feedback.Feedback`: fixed names, codes and numbers, never a message's text.
- Everything else is a number (times, speedups, resources, NCU metrics of a fixed set, shape), a mode or
  baseline name of a fixed set, a kernel hash of 16 hex digits, or a GPU name of plain characters; a
  record whose fields are not of that form (an imported archive can hold anything) contributes nothing.
"""

from __future__ import annotations

import dataclasses
import math
import random
import re
from dataclasses import dataclass, field
from typing import Any

from hgemm.agent.llm import tokens
from hgemm.agent.llm.compact import fold_bodies, resolve_conditionals
from hgemm.agent.llm.feedback import Feedback, feedback, number
from hgemm.agent.llm.scrub import prompt_source
from hgemm.agent.llm.variants import View, defines, family_class, pick, summary, view
from hgemm.agent.proposer import ProposalContext
from hgemm.evaluator.api import contract_text
from hgemm.evaluator.profile import NCU_METRICS

from hgemm import prompts
from hgemm.core.record import BASELINES, MODES, NOT_DEFECTS, EvalRecord, GpuInfo

NCU_KEYS_SHOWN = 12  # at most this many NCU metrics per kernel in a prompt, besides its largest stall reasons
STALLS_SHOWN = 3  # the stall reasons with most warps stalled per issued instruction
# NCU metrics a prompt may show: the evaluator's names, the raw metric names, and the launch count.
NCU_SHOWN = frozenset(NCU_METRICS) | frozenset(NCU_METRICS.values()) | {"kernels_launched"}
RESOURCES_SHOWN = ("registers", "shared_bytes", "spill_stores", "spill_loads")
_HASH = re.compile(r"[0-9a-f]{16}")
_GPU_NAME = re.compile(r"[A-Za-z0-9 ._()/+-]{1,64}")


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
    parent_source: str | None = None  # the parent exactly as shown, unfolded: the base SEARCH blocks match
    tokens: int = 0  # system + user, by `tokenizer`
    budget: int | None = None
    tokenizer: str = ""
    left_out: int = 0  # variants that did not fit the budget
    folded: int = 0  # helper bodies folded in the parent
    best_score: float | None = None  # the best offline speedup among the scored kernels it drew from
    parent_times: dict[str, float] = field(default_factory=dict)  # the parent's median us per mode

    @property
    def over_budget(self) -> bool:
        return self.budget is not None and self.tokens > self.budget


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 40 else None


def scored_from_record(source: str, record: EvalRecord) -> Scored | None:
    """A Scored view of a correct record with an offline time, else None (also when a field that would
    reach the prompt is not a number, a known name or a kernel hash)."""
    if not record.ok or not isinstance(source, str) or not isinstance(record.kernel_hash, str):
        return None
    if not _HASH.fullmatch(record.kernel_hash):
        return None
    shape = [_count(record.M), _count(record.N), _count(record.K)]
    if None in shape or not isinstance(record.modes, dict):
        return None
    times: dict[str, float] = {}
    speedup: dict[str, float] = {}
    for m in MODES:
        try:
            t, sp = _finite(record.median_us(m)), _finite(record.speedup_best(m))
        except AttributeError:
            return None
        if t is not None and t > 0:
            times[m] = t
        if sp is not None and sp > 0:
            speedup[m] = sp
    if "offline" not in times:
        return None
    score = speedup.get("offline") or (1.0 / times["offline"])
    resources = {}
    if record.resources:
        for key in RESOURCES_SHOWN:
            value = _count(getattr(record.resources, key, None))
            if value is not None:
                resources[key] = value
    ncu_items = (record.ncu or {}).items() if isinstance(record.ncu, dict) else ()
    ncu = {k: number(v) for k, v in ncu_items if k in NCU_SHOWN and number(v) is not None}
    stalls = sorted((k for k in ncu if k.startswith("stall_")), key=lambda k: -float(ncu[k]))[:STALLS_SHOWN]
    ncu = dict([(k, v) for k, v in ncu.items() if not k.startswith("stall_")][:NCU_KEYS_SHOWN]) | {
        k: ncu[k] for k in stalls
    }
    return Scored(
        hash=record.kernel_hash,
        source=source,
        M=shape[0],
        N=shape[1],
        K=shape[2],
        score=float(score),
        times={m: round(t, 3) for m, t in times.items()},
        speedup={m: round(x, 3) for m, x in speedup.items()},
        resources=resources,
        ncu=ncu,
        stage=record.stage if record.stage in ("quick", "full") else "quick",
    )


def _prefer(a: Scored, b: Scored, shape: tuple[int, int, int]) -> Scored:
    """Of two views of one kernel: this shape first, then the full stage, then the newer (b)."""

    def key(s: Scored) -> tuple[bool, bool]:
        return ((s.M, s.N, s.K) == shape, s.stage == "full")

    return a if key(a) > key(b) else b


def gather(
    ctx: ProposalContext, limit: int = 32, failures: int | None = None
) -> tuple[list[Scored], list[Feedback], EvalRecord | None]:
    """Scored kernels (best first, one per hash), the safe form of the newest `failures` failures on this
    shape (newest first, one per hash; all when None), and the newest timed record on this shape (for its
    baselines and floors)."""
    shape = (ctx.M, ctx.N, ctx.K)
    pairs: list[tuple[str, EvalRecord]] = []
    from hgemm.agent.llm import sources as llm_sources

    pairs.extend(llm_sources.from_store(ctx, limit))
    pairs.extend((c.source, r) for c, r in ctx.history)
    best: dict[str, Scored] = {}
    failed: dict[str, tuple[str, EvalRecord]] = {}
    latest: EvalRecord | None = None
    for source, record in pairs:
        if (record.M, record.N, record.K) == shape:
            if record.modes and (latest is None or str(record.created) >= str(latest.created)):
                latest = record
            defect = record.failure_kind not in (None, *NOT_DEFECTS)
            if defect and not record.ok and isinstance(record.kernel_hash, str):
                failed.pop(record.kernel_hash, None)
                failed[record.kernel_hash] = (source, record)
        scored = scored_from_record(source, record)
        if scored:
            best[scored.hash] = _prefer(best[scored.hash], scored, shape) if scored.hash in best else scored
    ranked = sorted(best.values(), key=lambda s: (-s.score, s.hash))
    notes: list[Feedback] = []
    for source, record in reversed(failed.values()):
        if failures is not None and len(notes) >= failures:
            break
        note = feedback(record, source)
        if note is not None:
            notes.append(note)
    return ranked, notes, latest


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
    """What a prompt says about the GPU; the name only when it is a plain product name (`hgemm prompt`
    takes it from the archive, which an import can fill)."""
    return {
        "name": gpu.name if isinstance(gpu.name, str) and _GPU_NAME.fullmatch(gpu.name) else None,
        "cc": gpu.cc,
        "sm_count": gpu.sm_count,
        "smem_kib": gpu.smem_per_block_optin // 1024,
        "l2_mib": round(gpu.l2_bytes / (1 << 20), 1),
    }


def timing_facts(record: EvalRecord | None) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Floors and baseline medians per mode from one record (empty when none); known names only."""
    floors: dict[str, float] = {}
    baselines: dict[str, dict[str, float]] = {}
    modes = record.modes if record and isinstance(record.modes, dict) else {}
    for mode, result in modes.items():
        if mode not in MODES:
            continue
        floor = _finite(getattr(result, "floor_us", None))
        if floor:
            floors[mode] = floor
        table = getattr(result, "baselines", None) or {}
        times = {
            b: _finite(getattr(s, "median_us", None)) for b, s in sorted(table.items()) if b in BASELINES
        }
        if any(t is not None for t in times.values()):
            baselines[mode] = {b: t for b, t in times.items() if t is not None}
    return floors, baselines


def shown(kernel: Scored) -> Scored:
    """The kernel as a prompt shows it: its source scrubbed of comments and long literals."""
    return dataclasses.replace(kernel, source=prompt_source(kernel.source))


DEFAULT_BUDGET = 12_000  # tokens of system + user prompt
# helper-body sizes (lines) folded in turn while the parent does not fit; negative: host helpers folded too
FOLD_LEVELS = (0, 12, 40, 120, -120)
VARIANT_SHARE = 0.15  # of the budget the parent leaves to variants and failures, when folding can


def tile_class(source: str) -> str:
    """The CTA tile a kernel's own settings name (`HG_BM`/`BM` x `HG_BN`/`BN`), or "?"."""
    d = defines(source)
    bm = d.get("HG_BM") or d.get("BM")
    bn = d.get("HG_BN") or d.get("BN")
    return f"{bm}x{bn}" if bm and bn else "?"


def parents_by_cell(ranked: list[Scored]) -> list[Scored]:
    """The elites of a MAP-Elites grid over instruction family x tile class (the best kernel of each
    cell), best first."""
    elites: dict[tuple[str, str], Scored] = {}
    for s in ranked:  # best first: the first of each cell is its elite
        elites.setdefault((family_class(s.source), tile_class(s.source)), s)
    return sorted(elites.values(), key=lambda s: (-s.score, s.hash))


def choose_parent(ranked: list[Scored], rng: random.Random) -> Scored | None:
    """A parent drawn from the grid's elites with weight 1/(rank+1), so several lineages stay alive."""
    pool = parents_by_cell(ranked)
    return rank_weighted_sample(pool, 1, rng)[0] if pool else None


def render_prompt(
    ctx: ProposalContext,
    *,
    budget_tokens: int | None = DEFAULT_BUDGET,
    rng: random.Random | None = None,
    variants: int = 4,
    failures: int = 4,
    parent_hash: str | None = None,
) -> Prompt:
    """The prompt for ctx's shape within `budget_tokens` (None: no cap), filled in priority order: the task
    (shape, GPU, floors, baselines), the parent in full (conditionals resolved; short helper bodies folded
    only if it would not fit otherwise), recent failures, then variants as their differences from the
    parent until the budget is reached. `parent_hash` forces the parent when it is among the scored kernels.
    The stable entry point for anything that needs a proposer prompt."""
    rng = rng or random.Random(0)
    counter = tokens.counter()
    ranked, failed, latest = gather(ctx, failures=failures)
    shown_ranked = [shown(k) for k in ranked]
    forced = next((s for s in shown_ranked if s.hash == parent_hash), None) if parent_hash else None
    first = forced or choose_parent(shown_ranked, rng)
    floors, baselines = timing_facts(latest)
    system = prompts.render("system.j2", contract=contract_text().strip())
    base = dict(M=ctx.M, N=ctx.N, K=ctx.K, gpu=gpu_facts(ctx.gpu), floors=floors, baselines=baselines,
                wording=prompts.wording("feedback.toml"))  # fmt: skip
    views: dict[str, View] = {}

    def render(
        shown_parent: dict | None, chosen: list[tuple[Scored, View]], notes: list[Feedback], left: int
    ) -> str:
        items = [
            {**dataclasses.asdict(s), "view": v}
            for s, v in sorted(chosen, key=lambda t: (t[0].score, t[0].hash))
        ]
        return prompts.render(
            "task.j2", **base, parent=shown_parent, variants=items, failures=notes, left_out=left
        )

    def size(user: str) -> int:
        return counter.count(system) + counter.count(user)

    budget = budget_tokens if budget_tokens is not None else math.inf
    # The parent leaves room for variants and failures where it can: folded until it fits within that room;
    # when even the folded drawn parent leaves none, the next elite that does is shown instead.
    room = budget * (1 - VARIANT_SHARE) if len(shown_ranked) > 1 or failed else budget
    elites = [] if forced else [s for s in parents_by_cell(shown_ranked) if s.hash != first.hash]
    parent, parent_source, shown_parent, folded = None, None, None, 0
    for candidate in [first, *elites] if first else []:
        source = resolve_conditionals(candidate.source)
        for level in FOLD_LEVELS:
            text, n = fold_bodies(source, abs(level), host=level < 0) if level else (source, 0)
            as_shown = {**dataclasses.asdict(candidate), "source": text.strip("\n"), "folded": n}
            fits = size(render(as_shown, [], [], 0)) <= room
            if fits:
                break
        if parent is None or fits:  # the drawn parent stays when no elite fits either
            parent, parent_source, shown_parent, folded = candidate, source, as_shown, n
        if fits:
            break
    picked: list[Scored] = []
    if parent is not None:

        def view_of(s: Scored) -> View:
            if s.hash not in views:
                views[s.hash] = view(parent_source, resolve_conditionals(s.source))
            return views[s.hash]

        picked = pick(parent, shown_ranked, variants, view_of)
    else:
        picked = rank_weighted_sample(shown_ranked, variants, rng)
    notes: list[Feedback] = []
    for note in failed[:failures]:
        if size(render(shown_parent, [], [*notes, note], 0)) > budget:
            break
        notes.append(note)
    chosen: list[tuple[Scored, View]] = []
    for s in picked:  # in the order of priority `pick` gave; the short form when the full one does not fit
        full = views.get(s.hash) or View("source", text=s.source, changed_lines=1)
        short = summary(full) if parent is not None else full
        for v in [full] if short is full else [full, short]:
            trial = [*chosen, (s, v)]
            if size(render(shown_parent, trial, notes, len(picked) - len(trial))) <= budget:
                chosen = trial
                break
    left = len(picked) - len(chosen)
    user = render(shown_parent, chosen, notes, left)
    return Prompt(
        system,
        user,
        parent.hash if parent else None,
        [s.hash for s, _ in sorted(chosen, key=lambda t: (t[0].score, t[0].hash))],
        parent_source=parent_source,
        tokens=size(user),
        budget=budget_tokens,
        tokenizer=counter.name,
        left_out=left,
        folded=folded,
        best_score=ranked[0].score if ranked else None,
        parent_times=dict(parent.times) if parent else {},
    )


def render_copies(ctx: ProposalContext, parent_hash: str | None, variant_hashes: list[str]) -> str:
    """The task prompt with the given parent and variants as complete sources and no cap: the layout of
    0.11.0, kept to measure what the compact prompt saves (`python -m hgemm.bench.prompt_sizes`)."""
    ranked, _, latest = gather(ctx)
    by_hash = {s.hash: shown(s) for s in ranked}
    floors, baselines = timing_facts(latest)
    parent = by_hash.get(parent_hash) if parent_hash else None
    items = [
        {**dataclasses.asdict(by_hash[h]), "view": View("source", text=by_hash[h].source)}
        for h in variant_hashes
        if h in by_hash
    ]
    return prompts.render(
        "task.j2", M=ctx.M, N=ctx.N, K=ctx.K, gpu=gpu_facts(ctx.gpu), floors=floors, baselines=baselines,
        wording=prompts.wording("feedback.toml"), failures=[], left_out=0, variants=items,
        parent={**dataclasses.asdict(parent), "folded": 0} if parent else None,
    )  # fmt: skip


def build_prompt(
    ctx: ProposalContext,
    rng: random.Random,
    *,
    exemplars: int = 4,
    failures: int = 4,
    budget_tokens: int | None = DEFAULT_BUDGET,
) -> Prompt:
    """`render_prompt` with the proposer's argument names."""
    return render_prompt(ctx, budget_tokens=budget_tokens, rng=rng, variants=exemplars, failures=failures)
