"""The search loop for one shape: propose → evaluate → archive → index, round after round, until a budget
or the proposers run out.

- A proposer with `prepare`/`generate` (the LLM) prepares in the loop's thread and generates in a worker
  thread, so its latency overlaps GPU work; plain proposers run inline.
- Successive halving: candidates new to this run are evaluated at stage "quick"; only the round's best few
  correct ones (by offline time, or with `quick_server` by the objective's own times) go on to stage "full".
- Every record, failures included, is archived as soon as it exists, with lineage and the run's id; the
  index syncs after each round. A crash loses at most the round in flight.
- After the search, its best few kernels are measured again in fresh evaluations (`confirm`, repetitions
  interleaved); the winner is the best by those medians, and its record is the median repetition
  (stage "confirmed"). Quick-stage times never decide it; `confirm=0` reports the best full-stage record,
  unconfirmed. With `sanitize`, only the reported kernel runs under compute-sanitizer (a failing winner
  gives way to the next fastest correct kernel, up to three).
- The run stops at the first exhausted budget or when every proposer has returned nothing new `patience`
  rounds in a row ("converged"); its archive row ends "done", "error" or "interrupted".
"""

from __future__ import annotations

import math
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from hgemm.agent.proposer import Candidate, ProposalContext, Proposer
from hgemm.agent.stores import ArchiveStore, IndexStore
from hgemm.evaluator.api import Evaluator

from hgemm.core.errors import BadInput
from hgemm.core.record import MODES, EvalRecord
from hgemm.core.shape import Shape

STOP_REASONS = ("evals", "minutes", "llm_usd", "llm_tokens", "converged")
OBJECTIVES = ("both", "offline", "server")
CONFIRM_FINALISTS = 3  # kernels measured again after the search
CONFIRM_REPETITIONS = 3  # fresh evaluations of each


def validate_objective(objective: str) -> None:
    """The commands' check of `--objective`: one line and exit code 2 when it is unknown."""
    if objective not in OBJECTIVES:
        raise BadInput(f"--objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")


def objective_score(record: EvalRecord, objective: str) -> float | None:
    """Higher is better: the record's speedup over the best baseline in the objective's mode, or the
    geometric mean of both modes' speedups for "both"; None when the record lacks a mode it needs."""
    return objective_value(record.speedup_best("offline"), record.speedup_best("server"), objective)


def objective_time(offline_us: float | None, server_us: float | None, objective: str) -> float | None:
    """A kernel's own time in the objective's mode (the geometric mean of both for "both"); None when a
    mode it needs is missing. For one shape it ranks kernels as speedups over fixed baselines would."""
    if objective == "both":
        return math.sqrt(offline_us * server_us) if offline_us and server_us else None
    return offline_us if objective == "offline" else server_us


def objective_value(offline: float | None, server: float | None, objective: str) -> float | None:
    """The objective's score from the two speedups over the best baseline (see `objective_score`)."""
    if objective == "both":
        return math.sqrt(offline * server) if offline and server else None
    return offline if objective == "offline" else server


@dataclass
class Budget:
    evals: int | None = None  # evaluations (one per source per stage)
    minutes: float | None = None  # wall-clock
    llm_usd: float | None = None
    llm_tokens: int | None = None  # prompt + completion


@dataclass
class LLMUsage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    outcomes: dict[str, int] = field(default_factory=dict)
    per_model: dict[str, dict[str, float]] = field(default_factory=dict)  # model -> calls, tokens, cost

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, call: Any) -> None:
        mine = self.per_model.setdefault(
            call.model, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
        )
        mine["calls"] += 1
        mine["prompt_tokens"] += call.prompt_tokens
        mine["completion_tokens"] += call.completion_tokens
        mine["cost_usd"] += call.cost_usd
        self.calls += 1
        self.prompt_tokens += call.prompt_tokens
        self.completion_tokens += call.completion_tokens
        self.cost_usd += call.cost_usd
        self.latency_s += call.latency_s
        self.outcomes[call.outcome] = self.outcomes.get(call.outcome, 0) + 1


@dataclass
class OptimizeResult:
    M: int
    N: int
    K: int
    best: Candidate | None  # None when no candidate passed the full stage
    best_record: EvalRecord | None  # its full-stage record
    results: list[tuple[Candidate, EvalRecord]]  # every evaluation of this run, in order
    evals: int
    quick: int
    full: int
    correct: int  # correct quick-stage records
    failed: int  # records with a failure kind
    proposed: int  # candidates received from proposers, duplicates included
    duplicates: int
    llm: LLMUsage
    stop_reason: str
    run_id: int | None
    seconds: float
    confirmation: dict[str, Any] | None = None  # how the winner's figures were measured (None: unconfirmed)

    @property
    def shape(self) -> Shape:
        return Shape(self.M, self.N, self.K)
    confirm_evals: int = 0  # evaluations the confirmation spent (outside the search's budget)
    confirm_seconds: float = 0.0  # their GPU-worker seconds


class _Reporter:
    """Progress on stderr through rich: a status line, and one line per new best."""

    def __init__(self, enabled: bool, shape: Shape):
        self.enabled = enabled
        self.shape = str(shape)
        self._status = None
        if enabled:
            from rich.console import Console

            self.console = Console(stderr=True)
            self._status = self.console.status(f"optimising {self.shape}")
            self._status.start()

    def update(self, text: str) -> None:
        if self._status:
            self._status.update(f"{self.shape}: {text}")

    def line(self, text: str) -> None:
        if self.enabled:
            self.console.print(text)

    def stop(self) -> None:
        if self._status:
            self._status.stop()


@dataclass
class Settings:
    """How one search runs (everything `optimize` takes besides the shape, proposers and stores)."""

    budget: Budget
    finalists: int = 2
    batch: int = 8
    patience: int = 3
    ncu: bool = False
    sanitize: bool = False
    objective: str = "both"
    quick_server: bool = False
    confirm: int = CONFIRM_FINALISTS
    confirm_reps: int = CONFIRM_REPETITIONS

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}, got {self.objective!r}")


class _Run:
    """State of one `optimize` call; methods are the loop's steps."""

    def __init__(self, shape: Shape, proposers: list[Proposer], evaluator: Evaluator, archive: ArchiveStore | None,
                 retriever: IndexStore | None, settings: Settings):  # fmt: skip
        s = settings
        self.objective = s.objective
        self.quick_modes = MODES if s.quick_server else ("offline",)
        self.shape = shape
        self.proposers: list[Proposer] = list(proposers)
        self.evaluator, self.archive, self.retriever = evaluator, archive, retriever
        self.budget, self.finalists, self.batch, self.patience = s.budget, s.finalists, s.batch, s.patience
        self.ncu, self.sanitize = s.ncu, s.sanitize
        self.confirm_finalists, self.confirm_reps = s.confirm, s.confirm_reps
        self.gpu = evaluator.gpu_info()
        self.run_id: int | None = None
        self.started = time.monotonic()
        self.results: list[tuple[Candidate, EvalRecord]] = []
        self.queue: deque[tuple[int, Candidate]] = deque()
        self.seen: set[str] = set()
        self.misses = [0] * len(self.proposers)
        self.retired: set[int] = set()
        self.inflight: dict[Future, int] = {}
        self.observations: dict[int, list[tuple[Candidate, EvalRecord]]] = {
            i: [] for i in range(len(self.proposers))
        }
        self.evals = self.quick = self.full = self.correct = self.failed = 0
        self.proposed = self.duplicates = 0
        self.best_quick_us: float | None = None
        self.best: tuple[Candidate, EvalRecord] | None = None
        self.owner: dict[str, int] = {}  # candidate hash -> index of the proposer that made it
        self.llm = LLMUsage()
        self.confirmed: dict[str, EvalRecord] = {}  # kernel hash -> its confirmed (median repetition) record
        self.confirmation: dict[str, Any] | None = None
        self.confirm_evals = 0
        self.confirm_seconds = 0.0

    # ---- budget ----------------------------------------------------------------------------------

    def evals_left(self) -> int | None:
        return None if self.budget.evals is None else self.budget.evals - self.evals

    def exhausted(self) -> str | None:
        b = self.budget
        if b.evals is not None and self.evals >= b.evals:
            return "evals"
        if b.minutes is not None and time.monotonic() - self.started >= b.minutes * 60:
            return "minutes"
        if b.llm_usd is not None and self.llm.cost_usd >= b.llm_usd:
            return "llm_usd"
        if b.llm_tokens is not None and self.llm.tokens >= b.llm_tokens:
            return "llm_tokens"
        return None

    def seconds_left(self) -> float | None:
        if self.budget.minutes is None:
            return None
        return max(0.0, self.budget.minutes * 60 - (time.monotonic() - self.started))

    # ---- propose ---------------------------------------------------------------------------------

    def context(self) -> ProposalContext:
        return ProposalContext(
            self.shape,
            self.gpu,
            archive=self.archive,
            retriever=self.retriever,
            history=list(self.results),
        )

    def launch(self, pool: ThreadPoolExecutor) -> None:
        """Ask every idle, active proposer for candidates: split ones in the pool, plain ones inline."""
        busy = set(self.inflight.values())
        for i, proposer in enumerate(self.proposers):
            if i in self.retired or i in busy:
                continue
            if self.observations[i]:
                proposer.observe(self.observations[i])
                self.observations[i] = []
            if hasattr(proposer, "prepare") and hasattr(proposer, "generate"):
                prepared = proposer.prepare(self.context())  # reads archive and index: this thread only
                self.inflight[pool.submit(proposer.generate, prepared, self.batch)] = i
            elif len(self.queue) < self.batch:
                self.accept(i, proposer.propose(self.context(), self.batch))

    def collect(self, block: bool) -> None:
        """Take finished LLM generations: record their calls, queue their candidates."""
        if not self.inflight:
            return
        timeout = self.seconds_left() if block else 0
        done, _ = wait(list(self.inflight), timeout=timeout, return_when=FIRST_COMPLETED)
        for future in done:
            i = self.inflight.pop(future)
            generation = future.result()  # an LLMError ends the run here
            for call in generation.calls:
                self.record_call(call)
            self.accept(i, generation.candidates)

    def record_call(self, call: Any) -> None:
        self.llm.add(call)
        if self.archive is not None:
            self.archive.add_llm_call(
                self.run_id,
                call.model,
                call.prompt_tokens,
                call.completion_tokens,
                call.cost_usd,
                call.latency_s,
                call.outcome,
                kernel_hash=call.kernel_hash,
                prompt=call.prompt or None,
                reply=call.reply or None,
            )

    def accept(self, i: int, candidates: list[Candidate]) -> None:
        self.proposed += len(candidates)
        new = []
        for c in candidates:
            if c.hash in self.seen:
                self.duplicates += 1
                continue
            self.seen.add(c.hash)
            new.append(c)
        if new:
            self.misses[i] = 0
            self.queue.extend((i, c) for c in new)
        else:
            self.misses[i] += 1
            if self.misses[i] >= self.patience:
                self.retired.add(i)

    # ---- evaluate, archive, index ------------------------------------------------------------------

    def evaluate(
        self, batch: list[tuple[int, Candidate]], stage: str, sanitize: bool = False
    ) -> list[tuple[Candidate, EvalRecord]]:
        sources = [c.source for _, c in batch]
        self.owner.update((c.hash, i) for i, c in batch)
        if stage == "quick":
            records = self.evaluator.evaluate(sources, self.shape, stage="quick", modes=self.quick_modes)
        else:
            records = self.evaluator.evaluate(
                sources,
                self.shape,
                stage="full",
                modes=MODES,
                ncu=self.ncu,
                sanitize=sanitize,
            )
        pairs = list(zip([c for _, c in batch], records, strict=True))
        self.evals += len(pairs)
        for (i, c), record in zip(batch, records, strict=True):
            if self.archive is not None:
                self.archive.record(c, record, run_id=self.run_id)  # archived as it comes
            self.results.append((c, record))
            self.observations[i].append((c, record))
            self.failed += record.failure_kind is not None
            if stage == "quick":
                self.quick += 1
                self.correct += record.ok
            else:
                self.full += 1
        return pairs

    def promote(self, round_results: list[tuple[int, Candidate, EvalRecord]]) -> list[tuple[int, Candidate]]:
        """The round's best correct quick results worth a full evaluation (successive halving), by
        `quick_time`."""
        timed = sorted(
            ((t, i, c) for i, c, r in round_results if r.ok and (t := self.quick_time(r)) is not None),
            key=lambda t: (t[0], t[2].hash),
        )
        if not timed:
            return []
        round_best = timed[0][0]
        cutoff = round_best if self.best_quick_us is None else min(round_best, self.best_quick_us)
        self.best_quick_us = cutoff
        chosen = [(i, c) for us, i, c in timed[: self.finalists] if us <= cutoff * PROMOTE_WITHIN]
        left = self.evals_left()
        return chosen if left is None else chosen[: max(0, left)]

    def quick_time(self, record: EvalRecord) -> float | None:
        """What ranks a quick result: its offline time, or with server mode timed too, its time in the
        objective's mode (the geometric mean of both for "both")."""
        if "server" not in self.quick_modes:
            return record.median_us("offline")
        return objective_time(record.median_us("offline"), record.median_us("server"), self.objective)

    def update_best(self, pairs: list[tuple[Candidate, EvalRecord]], report: _Reporter) -> None:
        for c, r in pairs:
            score = objective_score(r, self.objective) if r.ok else None
            if score is None or r.median_us("offline") is None:
                continue
            if self.best is None or score > objective_score(self.best[1], self.objective):
                self.best = (c, r)
                report.line(
                    f"new best {c.hash} ({c.proposer}): offline {r.median_us('offline'):.2f} us, "
                    f"{score:.3f}x best cuBLAS ({self.objective})"
                )

    def confirm(self, report: _Reporter) -> None:
        """Measure the search's best few kernels again, in fresh evaluations, and crown the best by those.

        The `confirm_finalists` best distinct kernels by their best full-stage score are evaluated together
        `confirm_reps` times (A, B, C, A, B, C: drift hits all alike; each evaluation interleaves the
        kernel with the baselines). A kernel's confirmed score is the median of its repetitions' scores, and
        its confirmed record is the repetition with that median; a kernel that fails a repetition is out.
        Repetitions are archived as stage "confirm-rep", the confirmed record as stage "confirmed" (which
        ranks, while this kernel's search rows on the shape stop ranking)."""
        best: dict[str, tuple[float, Candidate]] = {}
        for cand, rec in self.results:
            score = objective_score(rec, self.objective) if rec.ok and rec.stage == "full" else None
            if score is not None and (cand.hash not in best or score > best[cand.hash][0]):
                best[cand.hash] = (score, cand)
        finalists = [c for _, c in sorted(best.values(), key=lambda t: (-t[0], t[1].hash))][: self.confirm_finalists]
        if not finalists:
            return
        reps: dict[str, list[EvalRecord]] = {c.hash: [] for c in finalists}
        for rep in range(self.confirm_reps):
            report.update(f"confirming {len(finalists)} finalists: repetition {rep + 1} of {self.confirm_reps}")
            records = self.evaluator.evaluate([c.source for c in finalists], self.shape, stage="full", modes=MODES)
            for cand, rec in zip(finalists, records, strict=True):
                rec.stage = "confirm-rep"
                self.confirm_evals += 1
                self.confirm_seconds += rec.eval_seconds or 0.0
                if self.archive is not None:
                    self.archive.record(cand, rec, run_id=self.run_id)
                reps[cand.hash].append(rec)
        scores: dict[str, list[float]] = {}
        for cand in finalists:
            got = [(objective_score(r, self.objective), r) for r in reps[cand.hash]]
            if not got or any(s is None for s, _ in got):
                report.line(f"{cand.hash} did not hold up in its confirmation: left out")
                continue
            got.sort(key=lambda t: t[0])
            median = got[(len(got) - 1) // 2][1]
            confirmed = EvalRecord.from_dict({**median.to_dict(), "stage": "confirmed"})
            self.confirmed[cand.hash] = confirmed
            scores[cand.hash] = [s for s, _ in got]
            if self.archive is not None:
                self.archive.record(cand, confirmed, run_id=self.run_id)
                self.archive.unrank_search_rows(cand.hash, self.shape, confirmed.gpu)
        if not scores:
            self.best = None
            return
        winner = max(finalists, key=lambda c: (scores[c.hash][(len(scores[c.hash]) - 1) // 2], c.hash)
                     if c.hash in scores else (-math.inf, c.hash))
        self.best = (winner, self.confirmed[winner.hash])
        spread = scores[winner.hash]
        self.confirmation = {
            "finalists": len(finalists), "repetitions": self.confirm_reps, "objective": self.objective,
            "winner_scores": [round(s, 4) for s in spread],
            "how": f"median of {self.confirm_reps} fresh evaluations of the best {len(finalists)} kernels of the "
                   "search, repetitions interleaved, each interleaved with the baselines",
        }  # fmt: skip
        report.line(f"confirmed {winner.hash}: {spread[(len(spread) - 1) // 2]:.3f}x best cuBLAS ({self.objective}), "
                    f"repetitions {min(spread):.3f}-{max(spread):.3f}")

    def certify(self, report: _Reporter, tries: int = 3) -> None:
        """Run the winner through the full suite plus compute-sanitizer. A winner that fails (the archive
        stops ranking it on this shape) gives way to the next fastest correct kernel of this run, full or
        quick stage, up to `tries` kernels; the best is None when none passes."""
        fastest: dict[str, tuple[float, Candidate]] = {}
        for cand, rec in self.results:
            us = rec.median_us("offline") if rec.ok else None
            if us is not None and (cand.hash not in fastest or us < fastest[cand.hash][0]):
                fastest[cand.hash] = (us, cand)
        if self.best is not None:  # the full-stage winner goes first, whatever its quick time was
            fastest[self.best[0].hash] = (0.0, self.best[0])
        self.best = None
        for _, cand in sorted(fastest.values(), key=lambda t: (t[0], t[1].hash))[:tries]:
            report.update(f"sanitizer: {cand.hash}")
            ((_, rec),) = self.evaluate([(self.owner.get(cand.hash, 0), cand)], "full", sanitize=True)
            if rec.ok and objective_score(rec, self.objective) is not None:
                self.best = (cand, self.confirmed.get(cand.hash, rec))
                if cand.hash not in self.confirmed:
                    self.confirmation = None  # the fallback was not among the confirmed: its figures are not
                return
            report.line(f"{cand.hash} failed the sanitized run: {rec.failure_kind}")

    def sync_index(self) -> None:
        if self.retriever is not None:
            self.retriever.sync()


PROMOTE_WITHIN = 1.10  # a quick result slower than 1.1x the best quick time so far is not promoted


def optimize(
    shape: Shape,
    *,
    proposers: list[Proposer],
    evaluator: Evaluator,
    archive: ArchiveStore | None = None,
    retriever: IndexStore | None = None,
    budget: Budget,
    progress: bool = True,
    finalists: int = 2,
    command: str = "optimize",
    batch: int = 8,
    patience: int = 3,
    ncu: bool = False,
    sanitize: bool = False,
    objective: str = "both",
    config: dict[str, Any] | None = None,
    quick_server: bool = False,
    confirm: int = CONFIRM_FINALISTS,
    confirm_reps: int = CONFIRM_REPETITIONS,
) -> OptimizeResult:
    """Search for the fastest correct kernel for `shape` until a budget ends or the proposers run dry."""
    shape = Shape.of(shape)
    M, N, K = shape
    if not proposers:
        raise ValueError("optimize needs at least one proposer")
    settings = Settings(budget=budget, finalists=finalists, batch=batch, patience=patience, ncu=ncu, sanitize=sanitize,
                        objective=objective, quick_server=quick_server, confirm=confirm, confirm_reps=confirm_reps)
    run = _Run(shape, proposers, evaluator, archive, retriever, settings)
    if archive is not None:
        run.run_id = archive.start_run(
            command,
            {"M": M, "N": N, "K": K, "gpu": run.gpu.name, "objective": objective, "quick_server": quick_server,
             **(config or {})},  # fmt: skip
        )
    report = _Reporter(progress, shape)
    pool = ThreadPoolExecutor(max_workers=max(1, len(proposers)), thread_name_prefix="hgemm-propose")
    status, reason = "error", "error"
    try:
        while True:
            reason = run.exhausted()
            if reason:
                break
            # choose parents, retrieve context, render prompts, propose
            run.launch(pool)
            run.collect(block=not run.queue)
            reason = run.exhausted()
            if reason:
                break
            if not run.queue:
                if not run.inflight and len(run.retired) == len(run.proposers):
                    reason = "converged"
                    break
                continue
            # evaluate at the quick stage
            left = run.evals_left()
            size = (
                run.batch
                if left is None
                else max(1, min(run.batch, left - (run.finalists if run.best is None else 0)))
            )
            batch = [run.queue.popleft() for _ in range(min(size, len(run.queue)))]
            report.update(f"quick stage: {len(batch)} candidates (evals {run.evals}, best {_best_text(run)})")
            owners = {c.hash: i for i, c in batch}
            quick = run.evaluate(batch, "quick")
            # promote the round's best to the full stage
            finalists = run.promote([(owners[c.hash], c, r) for c, r in quick])
            if finalists:
                report.update(
                    f"full stage: {len(finalists)} finalists (evals {run.evals}, best {_best_text(run)})"
                )
                run.update_best(run.evaluate(finalists, "full"), report)
            run.sync_index()
        if run.confirm_finalists > 0 and run.confirm_reps > 0:
            run.confirm(report)
        else:
            report.line("figures unconfirmed: --confirm 0 reports the best of the search's own measurements")
        if run.sanitize:
            run.certify(report)
        run.sync_index()
        status = "done"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        for future, _ in list(run.inflight.items()):  # calls that finished after the stop still cost
            if future.done() and not future.cancelled() and future.exception() is None:
                for call in future.result().calls:
                    run.record_call(call)
        report.stop()
        if archive is not None and run.run_id is not None:
            archive.end_run(run.run_id, status)
    return OptimizeResult(
        M=M,
        N=N,
        K=K,
        best=run.best[0] if run.best else None,
        best_record=run.best[1] if run.best else None,
        results=run.results,
        evals=run.evals,
        quick=run.quick,
        full=run.full,
        correct=run.correct,
        failed=run.failed,
        proposed=run.proposed,
        duplicates=run.duplicates,
        llm=run.llm,
        stop_reason=reason,
        run_id=run.run_id,
        seconds=time.monotonic() - run.started,
        confirmation=run.confirmation,
        confirm_evals=run.confirm_evals,
        confirm_seconds=run.confirm_seconds,
    )


def _best_text(run: _Run) -> str:
    if run.best is None:
        return "none yet"
    return f"{run.best[1].median_us('offline'):.2f} us"
