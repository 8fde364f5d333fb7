"""LLM backends behind one small interface, and the LLM proposer.

`ChatBackend.complete(system, user, n)` returns n sampled replies with token usage and latency;
`OpenAIBackend` serves any OpenAI-compatible API, `agent.llm.local.LocalBackend` a local model.

- Transient failures (rate limits, timeouts, connection errors, 5xx) are retried with exponential backoff
  and jitter; exhausted retries or a missing or refused key raise `LLMError` (one line, exit 2). Any other
  failure of one request is an "error" outcome for that call, never a crash.
- `LLMProposer.prepare(ctx)` runs on the main thread only (it reads the archive and index);
  `generate(prepared, n)` may run on any thread (no shared state beyond the backend).
- Every request becomes one `LLMCall` (model, tokens, cost, latency, outcome, kernel hash) for the archive.
- `LLMProposer.observe` turns this proposer's results into follow-up turns (repair, improvement) queued per
  lineage; `prepare` serves those before new prompts. Backends take an optional `history` of earlier turns.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from hgemm.agent.llm.bandit import ModelBandit
from hgemm.agent.llm.feedback import feedback
from hgemm.agent.llm.novelty import Known
from hgemm.agent.llm.prompt import Prompt, render_prompt, scored_from_record
from hgemm.agent.llm.replies import parse_reply
from hgemm.agent.proposer import Candidate, ProposalContext

from hgemm.core.errors import HgemmError
from hgemm.core.record import NOT_DEFECTS


class LLMError(HgemmError):
    """The LLM cannot be used: no key, key refused, server unreachable, retries exhausted."""


class MissingKey(LLMError):
    pass


class Unreachable(LLMError):
    pass


@dataclass
class Completion:
    """One request's result: n sampled texts and the usage the server reported."""

    texts: list[str]
    finish_reasons: list[str | None]
    prompt_tokens: int
    completion_tokens: int
    latency_s: float


class ChatBackend(Protocol):
    model: str

    def complete(self, system: str, user: str, n: int) -> Completion: ...  # optional `history=` keyword


@dataclass
class LLMCall:
    """What the archive keeps about one request (one row per sample would double-count tokens)."""

    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_s: float
    outcome: str  # agent.llm.replies.OUTCOMES; for n samples, the best outcome among them
    kernel_hash: str | None = None
    message: str = ""
    prompt: str = ""  # the system and task prompt as sent, kept beside the kernel in the archive
    reply: str = ""  # the model's answer (samples joined)


@dataclass
class Generation:
    candidates: list[Candidate]
    calls: list[LLMCall]


Prices = Callable[[str], "tuple[float, float] | None"]


def cost_usd(price: tuple[float, float] | None, prompt_tokens: int, completion_tokens: int) -> float:
    """Cost from a (prompt, completion) USD-per-million-tokens price; unknown price costs 0."""
    if price is None:
        return 0.0
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1e6


# ---------------------------------------------------------------- OpenAI-compatible servers


def _transient_errors() -> tuple[type[BaseException], ...]:
    import openai

    return (
        openai.RateLimitError,
        openai.APIConnectionError,
        openai.InternalServerError,
    )  # timeout ⊂ connection


class OpenAIBackend:
    """The OpenAI API, or any OpenAI-compatible `base_url`, through langchain-openai."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float = 0.7,
        max_tokens: int = 8192,
        timeout_s: float = 180.0,
        retries: int = 4,
        backoff_s: float = 2.0,
    ):
        key = api_key or os.environ.get(api_key_env)
        if not key:
            if not base_url:
                raise MissingKey(f"no API key: set {api_key_env} for the OpenAI API, or give --llm-base-url")
            key = "not-needed"  # local OpenAI-compatible servers accept any key
        self.model = model
        self.base_url = base_url or None
        self.retries = retries
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self._options: dict[str, Any] = dict(
            model=model,
            api_key=key,
            base_url=self.base_url,
            temperature=temperature,
            max_tokens=max_tokens,
            timeout=timeout_s,
            max_retries=0,  # tenacity retries, so every wait is visible and bounded
        )
        self._clients: dict[int, Any] = {}

    def _client(self, n: int) -> Any:
        if n not in self._clients:
            from langchain_openai import ChatOpenAI

            self._clients[n] = ChatOpenAI(n=n, **self._options)
        return self._clients[n]

    def complete(self, system: str, user: str, n: int, history: list[tuple[str, str]] = ()) -> Completion:
        """n replies to `user` after `system` and the earlier turns in `history` ((role, text) pairs)."""
        import openai
        from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
        from tenacity import (
            Retrying,
            retry_if_exception_type,
            stop_after_attempt,
            wait_exponential,
            wait_random,
        )

        client = self._client(n)
        earlier = [
            AIMessage(content=t) if role == "assistant" else HumanMessage(content=t) for role, t in history
        ]
        messages = [SystemMessage(content=system), *earlier, HumanMessage(content=user)]
        start = time.perf_counter()
        where = self.base_url or "the OpenAI API"
        try:
            for attempt in Retrying(
                stop=stop_after_attempt(self.retries + 1),
                wait=wait_exponential(multiplier=self.backoff_s, max=60.0) + wait_random(0, self.backoff_s),
                retry=retry_if_exception_type(_transient_errors()),
                reraise=True,
            ):
                with attempt:
                    result = client.generate([messages])
        except openai.AuthenticationError as e:
            raise MissingKey(f"{where} refused the API key ({e.status_code})") from e
        except openai.RateLimitError as e:
            raise LLMError(f"{where} kept rate-limiting after {self.retries + 1} attempts") from e
        except openai.APITimeoutError as e:
            raise Unreachable(
                f"{where} did not answer within {self.timeout_s:g} s, {self.retries + 1} attempts"
            ) from e
        except openai.APIConnectionError as e:
            raise Unreachable(f"cannot reach {where}: {e}") from e
        except openai.InternalServerError as e:
            raise Unreachable(f"{where} kept failing with HTTP {e.status_code}") from e
        except openai.NotFoundError as e:
            raise LLMError(f"{where} does not know model {self.model!r} or the path is wrong") from e
        latency = time.perf_counter() - start
        generations = result.generations[0]
        usage = (result.llm_output or {}).get("token_usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        completion_tokens = int(usage.get("completion_tokens") or 0)
        return Completion(
            texts=[g.text for g in generations],
            finish_reasons=[(g.generation_info or {}).get("finish_reason") for g in generations],
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_s=latency,
        )


# ---------------------------------------------------------------- the proposer

_OUTCOME_ORDER = (
    "kernel",
    "static_check",
    "duplicate",
    "edit_failed",
    "oversized",
    "refused",
    "no_code",
    "error",
)
NOTE_CHARS = 20_000  # of an applied diff kept in the kernel's archive note

Message = tuple[str, str]  # (role, text): "user" or "assistant"


@dataclass
class Prepared:
    prompt: Prompt
    parents: list[str] = field(default_factory=list)
    base: str | None = None  # the source SEARCH/REPLACE blocks apply to
    history: list[Message] = field(default_factory=list)  # earlier turns of this lineage's conversation
    model: str = ""
    best_score: float | None = None  # best offline speedup known when the prompt was made
    kind: str = "new"  # "new", "repair" or "improve"
    turn: int = 0  # follow-up number within the lineage (0 for a new prompt)
    repairs: int = 0  # repair turns the lineage has used
    improves: int = 0
    parent_times: dict[str, float] = field(
        default_factory=dict
    )  # the parent's medians, for improvement turns


@dataclass
class _Lineage:
    """What a candidate's follow-up needs: its conversation so far and how many turns it has used."""

    model: str
    history: list[Message]
    base: str | None
    best_score: float | None
    repairs: int
    improves: int
    parent_times: dict[str, float]


def _score(record: Any) -> float | None:
    try:
        return record.speedup_best("offline") if record.ok else None
    except AttributeError:
        return None


class LLMProposer:
    """A Proposer that asks one or more LLMs for kernels; Candidate.proposer is "llm:<model>".

    - A new prompt is `render_prompt` within `prompt_tokens`; the reply edits the parent (SEARCH/REPLACE) or
      gives a whole file; the applied diff goes into the candidate's archive note.
    - Feedback loops: a candidate that fails gets up to `repair_turns` follow-ups in its own conversation
      showing its failure (kind, lines of its own source, error magnitudes); a correct one gets up to
      `improve_turns` follow-ups with its times and NCU metrics. Follow-ups go before new prompts.
    - No waste: candidates already tried on the shape in any run, or equal to one but for comments and
      layout, are dropped before they reach the evaluator (outcome "duplicate").
    - With several backends, a `ModelBandit` picks the model of each new prompt by improvement per dollar;
      follow-ups stay with their lineage's model.
    """

    name = "llm"

    def __init__(
        self,
        backend: ChatBackend | list[ChatBackend],
        *,
        prices: Prices | None = None,
        samples: int = 1,
        exemplars: int = 4,
        failures: int = 4,
        seed: int = 0,
        prompt_tokens: int | None = 12_000,
        repair_turns: int = 2,
        improve_turns: int = 1,
        near_duplicates: str = "code",
    ):
        backends = backend if isinstance(backend, list) else [backend]
        self.backends = {b.model: b for b in backends}
        self.backend = backends[0]
        self.prices = prices or (lambda model: None)
        self.samples = max(1, samples)
        self.exemplars = exemplars
        self.failures = failures
        self.prompt_tokens = prompt_tokens or None
        self.repair_turns = max(0, repair_turns)
        self.improve_turns = max(0, improve_turns)
        self.rng = random.Random(seed)
        self.bandit = ModelBandit(list(self.backends), seed=seed)
        self.known = Known(near_duplicates)
        self.calls: list[LLMCall] = []  # filled by `propose`; the loop reads `generate`'s calls instead
        self.log: list[
            dict[str, Any]
        ] = []  # one row per request: model, kind, turn, outcome, candidate hashes
        self._lock = threading.Lock()
        self._followups: deque[Prepared] = deque()
        self._lineage: dict[str, _Lineage] = {}  # candidate hash -> its conversation, until measured
        self._known_hashes: set[str] = set()

    @property
    def model(self) -> str:
        return self.backend.model

    # ---- prompts ---------------------------------------------------------------------------------

    def prepare(self, ctx: ProposalContext) -> Prepared:
        self.known.load_shape(ctx.archive, (ctx.M, ctx.N, ctx.K))
        for cand, _ in ctx.history:
            if cand.hash not in self._known_hashes:
                self._known_hashes.add(cand.hash)
                self.known.add(cand.source)
        with self._lock:
            if self._followups:
                return self._followups.popleft()
        model = self.bandit.choose()
        prompt = render_prompt(ctx, budget_tokens=self.prompt_tokens, rng=self.rng, variants=self.exemplars,
                               failures=self.failures)  # fmt: skip
        return Prepared(
            prompt=prompt,
            parents=[prompt.parent_hash] if prompt.parent_hash else [],
            base=prompt.parent_source,
            model=model,
            best_score=prompt.best_score,
            parent_times=dict(prompt.parent_times),
        )

    def _followup(self, lineage: _Lineage, parent: str, user: str, kind: str, base: str | None) -> None:
        turn = lineage.repairs + lineage.improves + 1
        prompt = Prompt(self._system(), user, parent_hash=parent, parent_source=base, tokenizer="")
        with self._lock:
            self._followups.append(
                Prepared(prompt=prompt, parents=[parent] if parent else [], base=base, history=list(lineage.history), model=lineage.model,
                         best_score=lineage.best_score, kind=kind, turn=turn,
                         repairs=lineage.repairs + (kind == "repair"), improves=lineage.improves + (kind == "improve"),
                         parent_times=dict(lineage.parent_times))
            )  # fmt: skip

    def _system(self) -> str:
        from hgemm.evaluator.api import contract_text

        from hgemm import prompts

        return prompts.render("system.j2", contract=contract_text().strip())

    def _followup_text(self, turn: int, **values: Any) -> str:
        from hgemm import prompts

        wording = prompts.wording("feedback.toml")
        base = dict(failure=None, edit_failure=None, hash="", times={}, speedup={}, parent_times={}, ncu={})
        base.update(values)
        return prompts.render("followup.j2", **base, wording=wording, edit_wording=wording["edit"], turn=turn,
                              turns=self.repair_turns + self.improve_turns)  # fmt: skip

    # ---- requests --------------------------------------------------------------------------------

    def generate(self, prepared: Prepared, n: int) -> Generation:
        n = max(1, min(n, self.samples))
        model = prepared.model or self.backend.model
        backend = self.backends.get(model, self.backend)
        try:
            if prepared.history:
                completion = backend.complete(prepared.prompt.system, prepared.prompt.user, n,
                                              history=prepared.history)  # fmt: skip
            else:
                completion = backend.complete(prepared.prompt.system, prepared.prompt.user, n)
        except LLMError:
            raise
        except Exception as e:  # one bad response (malformed JSON, say) is recorded, not fatal
            call = LLMCall(model, 0, 0, 0.0, 0.0, "error", message=f"{type(e).__name__}: {e}"[:500])
            self.bandit.spend(model, 0.0)
            return Generation([], [call])
        candidates: list[Candidate] = []
        outcomes: list[str] = []
        messages: list[str] = []
        for text, finish in zip(completion.texts, completion.finish_reasons, strict=False):
            reply = parse_reply(text, base=prepared.base)
            if finish == "content_filter" and reply.source is None:
                reply.outcome = "refused"
            conversation = [*prepared.history, ("user", prepared.prompt.user), ("assistant", text)]
            if reply.source is not None and self.known.kind(reply.source):
                reply.outcome, reply.problems = "duplicate", [self.known.kind(reply.source) or "duplicate"]
                reply.source = None
            outcomes.append(reply.outcome)
            if reply.problems:
                messages.append(reply.message)
            lineage = _Lineage(model, conversation, prepared.base, prepared.best_score, prepared.repairs,
                               prepared.improves, prepared.parent_times)  # fmt: skip
            if reply.outcome == "edit_failed" and lineage.repairs < self.repair_turns:
                user = self._followup_text(lineage.repairs + lineage.improves + 1, edit_failure=reply.edit)
                self._followup(
                    lineage, prepared.parents[0] if prepared.parents else "", user, "repair", prepared.base
                )
            if reply.source is None:
                continue
            self.known.add(reply.source)
            note = "static check: " + reply.message if reply.outcome == "static_check" else ""
            if reply.edit is not None and reply.edit.ok:
                parent = prepared.parents[0] if prepared.parents else "the parent"
                note = (note + "\n" if note else "") + f"edit of {parent}:\n" + reply.edit.diff[:NOTE_CHARS]
            candidate = Candidate(source=reply.source, proposer=f"llm:{model}", parents=list(prepared.parents),
                                  note=note)  # fmt: skip
            candidates.append(candidate)
            with self._lock:
                self._lineage[candidate.hash] = lineage
        outcome = min(outcomes or ["no_code"], key=_OUTCOME_ORDER.index)
        price = self.prices(model)
        cost = cost_usd(price, completion.prompt_tokens, completion.completion_tokens)
        self.bandit.spend(
            model, cost, completion.prompt_tokens, completion.completion_tokens, len(candidates)
        )
        call = LLMCall(
            model=model,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            cost_usd=cost,
            latency_s=completion.latency_s,
            outcome=outcome,
            kernel_hash=candidates[0].hash if candidates else None,
            message="; ".join(messages)[:500],
            prompt=prepared.prompt.system + "\n\n" + prepared.prompt.user,
            reply="\n\n----- next sample -----\n\n".join(completion.texts),
        )
        with self._lock:
            self.log.append({"request": len(self.log) + 1, "model": model, "kind": prepared.kind,
                             "turn": prepared.turn, "outcome": outcome,
                             "candidates": [c.hash for c in candidates]})  # fmt: skip
        return Generation(candidates, [call])

    def propose(self, ctx: ProposalContext, n: int) -> list[Candidate]:
        generation = self.generate(self.prepare(ctx), n)
        self.calls.extend(generation.calls)
        return generation.candidates

    # ---- feedback --------------------------------------------------------------------------------

    def observe(self, results: list[tuple[Candidate, Any]]) -> None:
        """Credit each candidate's model with its improvement, and queue its follow-up: a repair turn for a
        defect, an improvement turn for a correct kernel (each bounded per lineage). A candidate's records of
        one round arrive together (quick, then full for finalists); the improvement turn shows the latest,
        which carries the NCU metrics when they were collected."""
        grouped: dict[str, tuple[Candidate, list[Any]]] = {}
        for cand, record in results:
            grouped.setdefault(cand.hash, (cand, []))[1].append(record)
        for cand, records in grouped.values():
            with self._lock:
                lineage = self._lineage.pop(cand.hash, None)
            if lineage is None:
                continue
            first, latest = records[0], records[-1]
            record = latest if latest.ok else first
            score = _score(record)
            best = lineage.best_score
            gain = 0.0 if score is None else (score / best - 1.0 if best else 1.0)
            if lineage.model in self.bandit.arms:
                self.bandit.credit(lineage.model, gain, bool(record.ok))
            turn = lineage.repairs + lineage.improves + 1
            defect = first.failure_kind not in (None, *NOT_DEFECTS)
            if defect and not first.ok and lineage.repairs < self.repair_turns:
                note = feedback(first, cand.source)
                if note is not None:
                    user = self._followup_text(turn, failure=note, hash=cand.hash)
                    self._followup(lineage, cand.hash, user, "repair", cand.source)
            elif record.ok and lineage.improves < self.improve_turns:
                fields = scored_from_record(cand.source, record)
                if fields is not None:
                    user = self._followup_text(turn, hash=cand.hash, times=fields.times, speedup=fields.speedup,
                                               ncu=fields.ncu, parent_times=lineage.parent_times)  # fmt: skip
                    lineage.best_score = max(best or 0.0, score or 0.0) or None
                    lineage.parent_times = dict(fields.times)  # the next turn's parent is this kernel
                    self._followup(lineage, cand.hash, user, "improve", cand.source)
