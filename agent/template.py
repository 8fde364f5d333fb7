"""The template proposer ("template"): a parameter search over our own kernel families, no LLM.

Seeds come from the nearest archived shapes' winners and each family's defaults; the pool grows by neighbour
moves, crossover and random samples, ranked by `agent.model.predict_us` scaled by measured/predicted ratios
(the model ranks locally, measurements anchor it).

- Deterministic for a given seed and sequence of calls. Proposes only configurations the family's `check`
  accepts; never the same (family, params) twice in a run, nor a kernel the archive already holds for this
  shape and GPU. Each candidate names its `parents`.
- A search's first batch leads with the nearest shape's winner; an `explore` share of every batch is random,
  so the model's blind spots still get measured.
- A family measured `FAMILY_GIVE_UP` times slower than the shape's best gets no further options (its
  configurations stop being parents, and its favourites and random samples stay out of the pool); one that lost
  by `NEARBY_BEHIND` on each of the `NEARBY_EVIDENCE` nearest shapes this GPU has measured is not tried at all, unless
  it is measured on this shape or no other family can run it.
- The model's own favourites join the pool: every structure of a family (its non-`tuning` parameters, repaired)
  is predicted once per shape, and the `model_seeds` fastest of each family enter as options, so a search can
  reach a configuration that is several single-parameter moves from every seed.
- A configuration whose family now renders a different source is stale and comes back only with its new
  source: the `refresh` fastest within `refresh_within` of the shape's best are re-measured, so a template
  improvement reaches the shapes it helps.
- `exhausted` turns True when no new valid configuration is left, or when the best time has not improved
  for `patience` observed batches and the model expects nothing better in the pool.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from hgemm.agent.model import predict_us
from hgemm.agent.proposer import Candidate, ProposalContext
from hgemm.agent.stores import ArchiveStore

from hgemm.core.record import NOT_DEFECTS, EvalRecord, GpuInfo, kernel_hash
from hgemm.core.shape import Shape

Key = tuple[str, tuple[tuple[str, Any], ...]]


def config_key(family: str, params: dict[str, Any]) -> Key:
    return family, tuple(sorted(params.items()))


# On shapes the model expects to take at least REACH_FLOOR_US, the first batch tries a family's
# default or best option only when the model puts it within FAMILY_REACH of the best option: there a
# hopeless family costs the most GPU time and would take a slot of a small budget. Below the floor
# every family gets its try (launch and setup costs the model knows least about decide there).
FAMILY_REACH = 3.0
REACH_FLOOR_US = 20.0
# A family measured this many times slower than the shape's best (its fastest configuration against the fastest
# of all) gets no more options in this search: moving one or two parameters does not win back a factor of two, and
# at a small budget every evaluation it takes is one the leading family loses (H100, the 50 shapes of the full
# grid searched at 8 evaluations on 2026-11-26: mma_ms measured 2.1-3.4x slower than wgmma on every one, and
# still took 2 of each shape's 8 evaluations).
FAMILY_GIVE_UP = 2.0
# A family that lost by NEARBY_BEHIND on each of this many nearest shapes this GPU has measured is not tried on
# the shape at all (unless it is measured there, or no other family can run the shape): on large shapes its
# default alone would take one evaluation in eight. On the H100's full-grid archive of 2026-11-26 (846 shapes,
# 7328 search evaluations, the retriever's own shape distance), 1.25 rules out 862 (shape, family) pairs that took
# 1130 evaluations, and never the family that was fastest on the shape; 2.0 ruled out 117 pairs, 146 evaluations
# (experiments/2026-11-26-nearby-evidence).
NEARBY_EVIDENCE = 3
NEARBY_BEHIND = 1.25
# A template change moves a configuration's time by a few percent: only configurations measured within
# this factor of the shape's best are worth measuring again as they render now.
REFRESH_WITHIN = 1.10
# Structures enumerated per family for the model's favourites: beyond this many combinations, a fixed sample.
STRUCTURE_LIMIT = 40_000
_STRUCTURES: dict[tuple, list[dict[str, Any]]] = {}  # by family type, name, space and tuning


def default_params(fam: Any, shape: Shape, gpu: GpuInfo | None) -> dict[str, Any] | None:
    """The family's default configuration for the shape (a family whose default ignores the GPU is asked
    without it)."""
    try:
        params = fam.default_params(shape, gpu)
    except TypeError:
        params = fam.default_params(shape)
    return dict(params) if params else None


def family_structures(fam: Any) -> list[dict[str, Any]]:
    """Every structure of `fam` as a repaired configuration, deduplicated, cached per family object.

    Structure parameters (all but `fam.tuning`) take each value of the space; tuning parameters keep the
    values of the family's default for a large square shape, with the deepest ring (`repair` keeps the
    deepest one that fits)."""
    space = fam.space
    key = (type(fam), fam.name, repr(sorted(space.items())), tuple(getattr(fam, "tuning", ())))
    if key in _STRUCTURES:
        return _STRUCTURES[key]
    base = default_params(fam, Shape(4096, 4096, 4096), None) or {}
    base = {k: base.get(k, values[0]) for k, values in space.items()}
    if "stages" in space:
        base["stages"] = max(space["stages"])
    names = sorted(k for k in space if k not in getattr(fam, "tuning", ()))
    combos: Iterable[tuple] = itertools.product(*(space[k] for k in names))
    if math.prod(len(space[k]) for k in names) > STRUCTURE_LIMIT:
        rng = random.Random(0)
        combos = [tuple(rng.choice(space[k]) for k in names) for _ in range(STRUCTURE_LIMIT)]
    repair = getattr(fam, "repair", None)
    out: dict[Key, dict[str, Any]] = {}
    for combo in combos:
        params = {**base, **dict(zip(names, combo))}
        if callable(repair):
            params = repair(params)
        if _in_space(space, params):
            out.setdefault(config_key(fam.name, params), params)
    _STRUCTURES[key] = list(out.values())
    return _STRUCTURES[key]


@dataclass
class _Option:
    family: str
    params: dict[str, Any]
    parents: list[str] = field(default_factory=list)
    origin: str = ""  # "default", "retrieved", "model", "neighbour", "crossover", "random", "refresh"
    nearness: float = 0  # a retrieved option's place in retrieval order, nearest shape first
    score: float = math.inf


def _load_families(families: Any) -> dict[str, Any]:
    if families is None:
        from hgemm.evaluator import kernels

        families = kernels.all_families() if hasattr(kernels, "all_families") else kernels.FAMILIES
    if isinstance(families, dict):
        return dict(families)
    return {f.name: f for f in families}


def _record_time(rec: EvalRecord) -> float | None:
    if not rec.ok:
        return None
    t = rec.median_us("offline")
    return t if t is not None else rec.median_us("server")


def _far_behind(fastest: dict[str, float], factor: float = FAMILY_GIVE_UP) -> set[str]:
    """The families whose fastest time (`fastest`: family -> us) is `factor` times the fastest of all."""
    top = min(fastest.values(), default=math.inf)
    return {family for family, t in fastest.items() if t >= factor * top}


def _in_space(space: dict[str, tuple], params: dict[str, Any]) -> bool:
    return set(space) == set(params) and all(params[k] in space[k] for k in space)


def _hash_of(row: dict[str, Any]) -> str | None:
    return row.get("kernel_hash") or row.get("hash") or row.get("kernel")


def _row_key(row: dict[str, Any]) -> Key | None:
    fam, params = row.get("family"), row.get("params")
    return config_key(fam, params) if isinstance(fam, str) and isinstance(params, dict) else None


def archive_attempts(archive: ArchiveStore | None, shape: Shape, gpu: GpuInfo) -> list[dict[str, Any]]:
    """The archive's records of this shape on this GPU (`Archive.attempts`), as dicts with at least
    kernel, family, params, correct, failure_kind and offline_us; empty without an archive."""
    if archive is None:
        return []
    return list(archive.attempts(shape, gpu=gpu.name))


class TemplateProposer:
    """Parameter search over kernel families, ranked by the analytic model."""

    name = "template"

    def __init__(
        self,
        families: Any = None,
        *,
        seed: int = 0,
        explore: float = 0.25,
        patience: int = 3,
        elites: int = 4,
        random_samples: int = 48,
        model_seeds: int = 4,
        retrieve_k: int = 5,
        refresh: int = 2,
        refresh_within: float = REFRESH_WITHIN,
        other_gpus: bool = True,
        model: Callable[..., float] = predict_us,
        measured_after: str | None = None,
    ) -> None:
        self._families_arg = families
        self._families: dict[str, Any] | None = None
        self.seed = seed
        self.explore = explore
        self.patience = patience
        self.elites = elites
        self.random_samples = random_samples
        self.model_seeds = model_seeds
        self.retrieve_k = retrieve_k
        if refresh_within < 1.0:
            raise ValueError(f"refresh_within is a factor of the best time, at least 1.0; not {refresh_within}")
        self.refresh = refresh
        self.refresh_within = refresh_within
        self.other_gpus = other_gpus
        self.model = model
        # Archived attempts of the shape from before this time (a record time, as `--measured-after` gives it)
        # are neither skipped nor counted: the fastest of them are measured again first (`remeasure`).
        self.measured_after = measured_after
        self._shape: tuple[int, int, int, str] | None = None
        self.reset()

    # -- state -----------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget everything about the current shape (a new run starts fresh)."""
        self.rng = random.Random(self.seed)
        self.exhausted = False
        self.proposed: set[Key] = set()
        self.proposed_hashes: set[str] = set()
        self.measured: dict[Key, float] = {}  # ok configurations -> best time (us)
        self.failed: set[Key] = set()
        self.key_hash: dict[Key, str] = {}
        self.hash_key: dict[str, Key] = {}
        self.predicted: dict[Key, float] = {}  # raw model time, for calibration
        self.family_fails: dict[str, int] = {}
        self.seeds: list[_Option] = []
        self.ruled_out: set[str] = set()  # families the nearest measured shapes rule out (`_ruled_out_nearby`)
        self.favourites: list[_Option] = []  # the model's fastest structures of each family (`_favourites`)
        self.skip_hashes: set[str] = set()
        self.outdated: dict[Key, str] = {}  # archived configurations whose source changed -> old kernel hash
        self.remeasure: dict[Key, tuple[float, str]] = {}  # measured before `measured_after` -> (time, hash)
        self._seen_results: set[tuple[str, str]] = set()  # (hash, created) already ingested
        self.best_us = math.inf
        self.stale = 0
        self.batches = 0

    @property
    def families(self) -> dict[str, Any]:
        if self._families is None:
            self._families = _load_families(self._families_arg)
        return self._families

    def _start(self, ctx: ProposalContext) -> None:
        shape = (ctx.M, ctx.N, ctx.K, ctx.gpu.name)
        if shape == self._shape:
            return
        self._shape = shape
        self.reset()
        rows = archive_attempts(ctx.archive, ctx.shape, ctx.gpu)
        if self.measured_after:
            before = [r for r in rows if (r.get("created") or "") <= self.measured_after]
            rows = [r for r in rows if (r.get("created") or "") > self.measured_after]
            self._note_before(before)
        self.skip_hashes = {h for h in map(_hash_of, rows) if h}
        current = {k: self._current_hash(k) for k in {_row_key(r) for r in rows} - {None}}
        fresh = {k for r in rows if (k := _row_key(r)) and current.get(k) == _hash_of(r)}
        for row in rows:
            key = _row_key(row)
            if key in fresh and current[key] != _hash_of(row):
                self.proposed.add(key)  # an older source of a configuration measured as it renders now
                continue
            self._ingest_row(row)
            if key in self.measured and key not in fresh and current.get(key):
                self.outdated[key] = _hash_of(row) or ""
        hits = self._retrieve(ctx)
        self.seeds = self._seed_options(ctx, hits)
        self.ruled_out = self._ruled_out_nearby(ctx, hits)
        self.favourites = self._favourites(ctx)

    def _favourites(self, ctx: ProposalContext) -> list[_Option]:
        """Each family's `model_seeds` structures with the least predicted time on this shape."""
        out: list[_Option] = []
        if self.model_seeds <= 0:
            return out
        for name, fam in sorted(self.families.items()):
            timed = [(t, params) for params in family_structures(fam)
                     if (t := self._raw(ctx, name, params)) is not None]  # fmt: skip
            timed.sort(key=lambda tp: (tp[0], repr(sorted(tp[1].items()))))
            out += [_Option(name, dict(params), [], "model") for _t, params in timed[: self.model_seeds]]
        return out

    def _current_hash(self, key: Key) -> str | None:
        """Hash of the source the family renders now for an archived configuration (None if it cannot)."""
        fam = self.families.get(key[0])
        params = dict(key[1])
        if fam is None or not _in_space(fam.space, params):
            return None
        try:
            return kernel_hash(fam.render(params))
        except (KeyError, ValueError, TypeError):
            return None

    def _seed_options(self, ctx: ProposalContext, hits: list[dict[str, Any]]) -> list[_Option]:
        seeds: list[_Option] = []
        for i, hit in enumerate(hits):
            fam, params = hit.get("family"), hit.get("params")
            if fam in self.families and isinstance(params, dict):
                parent = [p] if (p := _hash_of(hit)) else []
                # A winner archived before some of its family's parameters existed: first as the defaults set
                # those now, then as it ran (the model may not tell the two apart). Either with what this shape
                # requires of it (`fit`: rows that need padding, say).
                family = self.families[fam]
                tuned = getattr(family, "default_tuning", None)
                newer = tuned(params, only_absent=True, shape=ctx.shape) if callable(tuned) else params
                fit = getattr(family, "fit", None)
                if callable(fit):
                    newer, params = fit(newer, ctx.shape), fit(params, ctx.shape)
                predates = newer != params
                if predates:
                    seeds.append(_Option(fam, dict(newer), list(parent), "retrieved", nearness=i))
                seeds.append(_Option(fam, dict(params), parent, "retrieved", nearness=i + 0.5 * predates))
        for name, fam in sorted(self.families.items()):
            params = default_params(fam, ctx.shape, ctx.gpu)
            if params:
                seeds.append(_Option(name, params, [], "default"))
        return seeds

    def _ruled_out_nearby(self, ctx: ProposalContext, hits: list[dict[str, Any]]) -> set[str]:
        """Families that lost by `NEARBY_BEHIND` on each of the `NEARBY_EVIDENCE` nearest shapes this GPU has
        measured (`hits` are nearest first); none where fewer shapes are near, or where a family that won
        there cannot run this shape (the evidence is of a race this shape does not hold)."""
        near = [h for h in hits if h.get("gpu") == ctx.gpu.name][:NEARBY_EVIDENCE]
        if ctx.archive is None or len(near) < NEARBY_EVIDENCE:
            return set()
        runnable = {name for name, fam in self.families.items() if default_params(fam, ctx.shape, ctx.gpu)}
        verdicts = []
        for hit in near:
            fastest: dict[str, float] = {}
            for row in archive_attempts(ctx.archive, Shape(hit["M"], hit["N"], hit["K"]), ctx.gpu):
                fam, t = row.get("family"), row.get("offline_us")
                if fam in self.families and t is not None and row.get("correct"):
                    fastest[fam] = min(float(t), fastest.get(fam, math.inf))
            if not fastest or min(fastest, key=lambda fam: (fastest[fam], fam)) not in runnable:
                return set()
            verdicts.append(_far_behind(fastest, NEARBY_BEHIND))
        return set.intersection(*verdicts)

    def _retrieve(self, ctx: ProposalContext) -> list[dict[str, Any]]:
        """The nearest shapes' winners on this GPU and (`other_gpus`) on every other GPU in the
        archive, nearest first, this GPU's first among equals: a new GPU starts from what others
        learnt. Those configurations are re-measured here; a family's check drops what cannot run."""
        r = ctx.retriever
        if r is None:
            return []
        try:
            hits = list(r.similar_shapes(ctx.shape, gpu=ctx.gpu.name, k=self.retrieve_k) or [])
        except TypeError:  # a retriever without per-GPU history
            return list(r.similar_shapes(ctx.shape, k=self.retrieve_k) or [])
        if self.other_gpus and callable(getattr(r, "gpus", None)):
            for gpu in r.gpus():
                if gpu != ctx.gpu.name:
                    hits += r.similar_shapes(ctx.shape, gpu=gpu, k=self.retrieve_k) or []
        return sorted(hits, key=lambda h: h["distance"])[: self.retrieve_k]

    def _note_before(self, rows: list[dict[str, Any]]) -> None:
        """Attempts measured before `measured_after`: each correct configuration's fastest time there, to measure
        the fastest again first (their figures no longer count, so their kernels are not skipped either)."""
        for row in rows:
            key, t = _row_key(row), row.get("offline_us")
            if key is None or key[0] not in self.families or t is None or not row.get("correct"):
                continue
            if t < self.remeasure.get(key, (math.inf, ""))[0]:
                self.remeasure[key] = (float(t), _hash_of(row) or "")

    def _ingest_row(self, row: dict[str, Any]) -> None:
        """An archived attempt of this shape: its configuration counts as tried, its time as measured."""
        fam, params = row.get("family"), row.get("params")
        if fam not in self.families or not isinstance(params, dict):
            return
        key = config_key(fam, params)
        h = _hash_of(row)
        if h:
            self.key_hash[key], self.hash_key[h] = h, key
        self.proposed.add(key)
        t = row.get("offline_us")
        if row.get("failure_kind") not in (None, *NOT_DEFECTS):
            self.failed.add(key)
        elif t is not None and row.get("correct"):
            self._measure(key, float(t))
            self.best_us = min(self.best_us, float(t))

    def _measure(self, key: Key, t: float) -> None:
        self.measured[key] = min(t, self.measured.get(key, math.inf))

    # -- feedback --------------------------------------------------------------------------

    def observe(self, results: list[tuple[Candidate, EvalRecord]]) -> None:
        improved = False
        seen_any = False
        for cand, rec in results:
            tag = (cand.hash, rec.created + rec.stage)
            if tag in self._seen_results or cand.family not in self.families or cand.params is None:
                continue
            self._seen_results.add(tag)
            seen_any = True
            key = config_key(cand.family, cand.params)
            self.key_hash[key], self.hash_key[cand.hash] = cand.hash, key
            self.proposed.add(key)
            t = _record_time(rec)
            if key in self.outdated and cand.hash != self.outdated[key]:
                del self.outdated[key]  # re-measured as it renders now: that time replaces the old one
                self.measured.pop(key, None)
            if t is None:
                if rec.failure_kind not in NOT_DEFECTS:
                    self.failed.add(key)
                    self.family_fails[cand.family] = self.family_fails.get(cand.family, 0) + 1
                continue
            self._measure(key, t)
            if t < self.best_us * 0.995:
                self.best_us, improved = t, True
        if seen_any:
            self.stale = 0 if improved else self.stale + 1

    # -- proposal --------------------------------------------------------------------------

    def propose(self, ctx: ProposalContext, n: int) -> list[Candidate]:
        self._start(ctx)
        if ctx.history:
            self.observe(ctx.history)
        if n <= 0 or self.exhausted:
            return []
        first = self.batches == 0  # this search's first batch, even when the archive already holds attempts
        out: list[Candidate] = []
        if first:  # the fastest configurations measured with an older source, as they render now
            times = {k: self.measured[k] for k in self.outdated}
            for key in self._fastest_again(times, self.best_us, n):
                cand = self._candidate(_Option(key[0], dict(key[1]), [self.outdated[key]], "refresh"))
                if cand is not None:
                    out.append(replace(cand, note=f"refresh; {self.measured[key]:.1f} us with the older source"))
            # then those measured before `measured_after`
            times = {k: t for k, (t, _) in self.remeasure.items()}
            for key in self._fastest_again(times, min(times.values(), default=math.inf), n - len(out)):
                t, old = self.remeasure[key]
                cand = self._candidate(_Option(key[0], dict(key[1]), [old], "remeasure"))
                if cand is not None:
                    out.append(replace(cand, note=f"remeasure; {t:.1f} us before {self.measured_after}"))
        pool = self._pool(ctx)
        if not pool:
            self.exhausted = not out
            self.batches += 1
            return out
        ranked = sorted(pool.values(), key=lambda o: (o.score, o.family, repr(sorted(o.params.items()))))
        if self.stale >= self.patience and ranked[0].score >= self.best_us and not out:
            self.exhausted = True
            return []
        self.batches += 1
        while len(out) < n and ranked:
            chosen = self._choose(ranked, n - len(out), first=first)
            first = False
            taken = {config_key(o.family, o.params) for o in chosen}
            ranked = [o for o in ranked if config_key(o.family, o.params) not in taken]
            for opt in chosen:
                cand = self._candidate(opt)
                if cand is not None:
                    out.append(cand)
        return out

    def _fastest_again(self, times: dict[Key, float], best: float, n: int) -> list[Key]:
        """Of configurations to measure again (`times`: their older figures), those within `refresh_within` of
        `best`, fastest first and one of each structure before the rest, at most `refresh` and `n`."""
        near = [k for k, t in times.items() if t <= best * self.refresh_within]
        ordered = self._diverse(sorted(near, key=lambda k: (times[k], k[0], repr(k[1]))))
        return ordered[: max(0, min(self.refresh, n))]

    def _diverse(self, keys: list[Key]) -> list[Key]:
        """`keys` reordered: the first of each structure, in order, then the rest, in order."""
        seen: set[tuple] = set()
        first, rest = [], []
        for key in keys:
            structure = (key[0], self.families[key[0]].structure(dict(key[1])))
            (rest if structure in seen else first).append(key)
            seen.add(structure)
        return first + rest

    def _candidate(self, opt: _Option) -> Candidate | None:
        """Render an option; None when its source was already proposed or archived for this shape."""
        key = config_key(opt.family, opt.params)
        self.proposed.add(key)
        source = self.families[opt.family].render(opt.params)
        cand = Candidate(
            source=source,
            proposer=self.name,
            family=opt.family,
            params=dict(opt.params),
            parents=[p for p in opt.parents if p],
            note=f"{opt.origin}; model {self.predicted.get(key, math.inf):.1f} us",
        )
        if cand.hash in self.proposed_hashes or cand.hash in self.skip_hashes:
            return None
        self.proposed_hashes.add(cand.hash)
        self.key_hash[key], self.hash_key[cand.hash] = cand.hash, key
        return cand

    def _choose(self, ranked: list[_Option], n: int, first: bool) -> list[_Option]:
        chosen: list[_Option] = []
        taken: set[Key] = set()

        def take(opt: _Option) -> None:
            k = config_key(opt.family, opt.params)
            if k not in taken and len(chosen) < n:
                taken.add(k)
                chosen.append(opt)

        if first:  # the first batch: the nearest shapes' winners, each family's default, its best-ranked option
            retrieved = [o for o in ranked if o.origin == "retrieved"]
            nearest = sorted(retrieved, key=lambda o: o.nearness)[:1]
            for opt in nearest + retrieved:  # the nearest shape's winner, then the model's favourites
                if len(chosen) >= max(1, n // 4):
                    break
                take(opt)
            best = ranked[0].score if ranked else 0.0
            reach = best * FAMILY_REACH if best >= REACH_FLOOR_US else math.inf
            for opt in [o for o in ranked if o.origin == "default" and o.score <= reach]:
                take(opt)
            by_family: dict[str, _Option] = {}
            for opt in ranked:
                by_family.setdefault(opt.family, opt)
            for opt in sorted(by_family.values(), key=lambda o: o.score):
                if opt.score <= reach:
                    take(opt)
        n_explore = int(n * self.explore) if len(ranked) > n else 0
        for opt in ranked:
            if len(chosen) >= n - n_explore:
                break
            take(opt)
        rest = [o for o in ranked if config_key(o.family, o.params) not in taken]
        for opt in self.rng.sample(rest, min(len(rest), n - len(chosen))):
            take(opt)
        return chosen

    def _pool(self, ctx: ProposalContext) -> dict[Key, _Option]:
        pool: dict[Key, _Option] = {}

        given_up = self._given_up()

        def add(opt: _Option, anchor: float | None = None) -> None:
            """Pool a valid, new option of a family still in the running. Its score is the model's time scaled
            by the measured/predicted ratio of the configuration it came from (`anchor`), else by its family's
            calibration."""
            if opt.family in given_up:
                return
            fam = self.families.get(opt.family)
            if fam is not None and callable(getattr(fam, "repair", None)):
                opt.params = fam.repair(opt.params)
            key = config_key(opt.family, opt.params)
            if key in self.proposed or key in self.failed or key in self.measured:
                return
            raw = self.predicted.get(key) if key in pool else self._raw(ctx, opt.family, opt.params)
            if raw is None:
                return
            opt.score = raw * (anchor if anchor is not None else self._calibration(opt.family))
            if key not in pool or opt.score < pool[key].score:
                pool[key] = opt

        for opt in self.seeds:
            add(replace(opt, params=dict(opt.params), parents=list(opt.parents)))
        elites = self._elites(given_up)
        ratio = {h: self._ratio(ctx, f, p) for f, p, h in elites}
        parents = elites or [(o.family, o.params, o.parents[0] if o.parents else "") for o in self.seeds]
        for fam, params, h in parents:
            for nb in self._neighbours(fam, params):
                add(_Option(fam, nb, [h], "neighbour"), ratio.get(h))
        for i, (fa, pa, ha) in enumerate(elites):
            for fb, pb, hb in elites[i + 1 :]:
                if fa != fb:
                    continue
                ra, rb = ratio.get(ha), ratio.get(hb)
                anchor = math.sqrt(ra * rb) if ra and rb else None
                for child in self._crossover(fa, pa, pb):
                    add(_Option(fa, child, [ha, hb], "crossover"), anchor)
        for opt in self.favourites:
            add(replace(opt, params=dict(opt.params)))
        for name in sorted(self.families):
            for params in self._random(name, self.random_samples):
                add(_Option(name, params, [], "random"))
        return pool

    def _raw(self, ctx: ProposalContext, family: str, params: dict[str, Any]) -> float | None:
        """The model's time for a valid configuration (cached), None when invalid or unlaunchable."""
        key = config_key(family, params)
        if key in self.predicted:
            return self.predicted[key]
        fam = self.families.get(family)
        if fam is None or not _in_space(fam.space, params):
            return None
        if fam.check(params, ctx.shape, ctx.gpu) is not None:
            return None
        raw = self.model(fam, params, ctx.shape, ctx.gpu)
        if not math.isfinite(raw) or raw <= 0:
            return None
        self.predicted[key] = raw
        return raw

    def _ratio(self, ctx: ProposalContext, family: str, params: dict[str, Any]) -> float | None:
        """Measured / predicted for a measured configuration."""
        raw = self._raw(ctx, family, params)
        t = self.measured.get(config_key(family, params))
        return t / raw if raw and t else None

    def _given_up(self) -> set[str]:
        """Families whose fastest measured configuration on this shape is `FAMILY_GIVE_UP` times the fastest,
        and those the nearest shapes ruled out that have no measurement here."""
        fastest: dict[str, float] = {}
        for (family, _params), t in self.measured.items():
            fastest[family] = min(t, fastest.get(family, math.inf))
        return {family for family in self.ruled_out if family not in fastest} | _far_behind(fastest)

    def _elites(self, given_up: set[str]) -> list[tuple[str, dict[str, Any], str]]:
        measured = [(key, t) for key, t in self.measured.items() if key[0] not in given_up]
        best = sorted(measured, key=lambda kv: (kv[1], kv[0][0], repr(kv[0][1])))
        out = []
        for key, _t in best[: self.elites]:
            out.append((key[0], dict(key[1]), self.key_hash.get(key, "")))
        return out

    def _calibration(self, family: str) -> float:
        """Geometric mean of measured/predicted for the family (1.0 with no data), failures penalised."""
        logs = [
            math.log(t / self.predicted[k])
            for k, t in self.measured.items()
            if k[0] == family and self.predicted.get(k, 0) > 0
        ]
        factor = math.exp(sum(logs) / len(logs)) if logs else 1.0
        if not any(k[0] == family for k in self.measured):
            factor *= 2.0 ** min(4, self.family_fails.get(family, 0))
        return factor

    def _neighbours(self, family: str, params: dict[str, Any]) -> Iterable[dict[str, Any]]:
        """One parameter to an adjacent value; where the family repairs its rings, each move also with
        the deepest ring (a move that frees shared memory otherwise needs a second move to use it)."""
        fam = self.families[family]
        space = fam.space
        deepest = max(space["stages"]) if "stages" in space and callable(getattr(fam, "repair", None)) else None
        for name in sorted(space):
            values = list(space[name])
            if name not in params or params[name] not in values:
                continue
            i = values.index(params[name])
            for j in (i - 1, i + 1):
                if 0 <= j < len(values):
                    yield {**params, name: values[j]}
                    if deepest is not None and name != "stages":
                        yield {**params, name: values[j], "stages": deepest}

    def _crossover(
        self, family: str, a: dict[str, Any], b: dict[str, Any], children: int = 3
    ) -> list[dict[str, Any]]:
        names = sorted(set(a) & set(b))
        diff = [k for k in names if a[k] != b[k]]
        if len(diff) < 2:
            return []
        out = []
        for _ in range(children):
            child = dict(a)
            for k in diff:
                if self.rng.random() < 0.5:
                    child[k] = b[k]
            out.append(child)
        return out

    def _random(self, family: str, count: int) -> list[dict[str, Any]]:
        space = self.families[family].space
        names = sorted(space)
        return [{k: self.rng.choice(list(space[k])) for k in names} for _ in range(count)]
