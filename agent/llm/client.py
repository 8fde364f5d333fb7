"""LLM backends behind one small interface, and the LLM proposer.

`ChatBackend.complete(system, user, n)` returns n sampled replies with token usage and latency;
`OpenAIBackend` serves any OpenAI-compatible API, `agent.llm.local.LocalBackend` a local model.

- Transient failures (rate limits, timeouts, connection errors, 5xx) are retried with exponential backoff
  and jitter; exhausted retries or a missing or refused key raise `LLMError` (one line, exit 2). Any other
  failure of one request is an "error" outcome for that call, never a crash.
- `LLMProposer.prepare(ctx)` runs on the main thread only (it reads the archive and index);
  `generate(prepared, n)` may run on any thread (no shared state beyond the backend).
- Every request becomes one `LLMCall` (model, tokens, cost, latency, outcome, kernel hash) for the archive.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from hgemm.agent.llm.prompt import Prompt, build_prompt
from hgemm.agent.llm.replies import parse_reply
from hgemm.agent.proposer import Candidate, ProposalContext

from hgemm.core.errors import HgemmError


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

    def complete(self, system: str, user: str, n: int) -> Completion: ...


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

    def complete(self, system: str, user: str, n: int) -> Completion:
        import openai
        from langchain_core.messages import HumanMessage, SystemMessage
        from tenacity import (
            Retrying,
            retry_if_exception_type,
            stop_after_attempt,
            wait_exponential,
            wait_random,
        )

        client = self._client(n)
        messages = [SystemMessage(content=system), HumanMessage(content=user)]
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

_OUTCOME_ORDER = ("kernel", "static_check", "oversized", "refused", "no_code", "error")


@dataclass
class Prepared:
    prompt: Prompt
    parents: list[str] = field(default_factory=list)


class LLMProposer:
    """A Proposer that asks an LLM for kernels; Candidate.proposer is "llm:<model>"."""

    name = "llm"

    def __init__(
        self,
        backend: ChatBackend,
        *,
        prices: Prices | None = None,
        samples: int = 1,
        exemplars: int = 4,
        failures: int = 4,
        seed: int = 0,
    ):
        self.backend = backend
        self.prices = prices or (lambda model: None)
        self.samples = max(1, samples)
        self.exemplars = exemplars
        self.failures = failures
        self.rng = random.Random(seed)
        self.calls: list[LLMCall] = []  # filled by `propose`; the loop reads `generate`'s calls instead

    @property
    def model(self) -> str:
        return self.backend.model

    def prepare(self, ctx: ProposalContext) -> Prepared:
        prompt = build_prompt(ctx, self.rng, exemplars=self.exemplars, failures=self.failures)
        return Prepared(prompt=prompt, parents=[prompt.parent_hash] if prompt.parent_hash else [])

    def generate(self, prepared: Prepared, n: int) -> Generation:
        n = max(1, min(n, self.samples))
        model = self.backend.model
        try:
            completion = self.backend.complete(prepared.prompt.system, prepared.prompt.user, n)
        except LLMError:
            raise
        except Exception as e:  # one bad response (malformed JSON, say) is recorded, not fatal
            call = LLMCall(model, 0, 0, 0.0, 0.0, "error", message=f"{type(e).__name__}: {e}"[:500])
            return Generation([], [call])
        candidates: list[Candidate] = []
        outcomes: list[str] = []
        messages: list[str] = []
        for text, finish in zip(completion.texts, completion.finish_reasons, strict=False):
            reply = parse_reply(text)
            if finish == "content_filter" and reply.source is None:
                reply.outcome = "refused"
            outcomes.append(reply.outcome)
            if reply.problems:
                messages.append(reply.message)
            if reply.source is not None:
                note = "static check: " + reply.message if reply.outcome == "static_check" else ""
                candidates.append(
                    Candidate(
                        source=reply.source,
                        proposer=f"llm:{model}",
                        parents=list(prepared.parents),
                        note=note,
                    )
                )
        outcome = min(outcomes or ["no_code"], key=_OUTCOME_ORDER.index)
        price = self.prices(model)
        call = LLMCall(
            model=model,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            cost_usd=cost_usd(price, completion.prompt_tokens, completion.completion_tokens),
            latency_s=completion.latency_s,
            outcome=outcome,
            kernel_hash=candidates[0].hash if candidates else None,
            message="; ".join(messages)[:500],
        )
        return Generation(candidates, [call])

    def propose(self, ctx: ProposalContext, n: int) -> list[Candidate]:
        generation = self.generate(self.prepare(ctx), n)
        self.calls.extend(generation.calls)
        return generation.candidates

    def observe(self, results: list[tuple[Candidate, Any]]) -> None:
        """Nothing to learn in-process: results reach later prompts through the history and archive."""
