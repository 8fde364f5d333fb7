"""The OpenAI-compatible backend and the LLM proposer end to end against a loopback server: the real
openai client, langchain, tenacity retries, reply parsing and cost accounting, no network."""

from __future__ import annotations

import random

import pytest
from hgemm.agent.llm import LLMError, LLMProposer, MissingKey, OpenAIBackend, Unreachable, cost_usd
from hgemm.agent.proposer import ProposalContext
from hgemm.evaluator.kernels import get_family
from standin import STANDIN_GPU

from hgemm.core.shape import Shape
from hgemm.testing.replay_server import ReplayServer, Step, reply

KERNEL = get_family("small").render(dict(BM=32, BN=64, WARPS_M=1, WARPS_N=2, WARPS_K=1))
EDIT = f"The tile is narrow; widen it.\n```cuda\n{KERNEL}```"
PRICE = (2.0, 8.0)  # USD per million prompt / completion tokens


def _backend(server, **kw):
    options = dict(timeout_s=1.0, retries=2, backoff_s=0.01)
    options.update(kw)
    return OpenAIBackend("replay-model", base_url=server.base_url, **options)


def _generate(proposer):
    return proposer.generate(proposer.prepare(ProposalContext(Shape(256, 512, 128), STANDIN_GPU)), 4)


def test_kernel_edit_becomes_a_candidate_with_cost():
    with ReplayServer([reply(EDIT)]) as server:
        proposer = LLMProposer(_backend(server), prices=lambda m: PRICE, samples=1)
        generation = _generate(proposer)
        (request,) = server.requests
    (candidate,) = generation.candidates
    assert candidate.source == KERNEL and candidate.proposer == "llm:replay-model"
    (call,) = generation.calls
    assert call.outcome == "kernel" and call.kernel_hash == candidate.hash
    assert call.prompt_tokens > 100 and call.completion_tokens == len(EDIT) // 4
    assert (
        call.cost_usd == pytest.approx(cost_usd(PRICE, call.prompt_tokens, call.completion_tokens))
        and call.cost_usd > 0
    )
    assert request["model"] == "replay-model" and request["messages"][0]["role"] == "system"
    assert "M=256, N=512, K=128" in request["messages"][1]["content"]


def test_samples_per_prompt_reach_the_server():
    with ReplayServer([reply(EDIT, "no code here")]) as server:
        generation = _generate(LLMProposer(_backend(server), samples=2))
        assert server.requests[0]["n"] == 2
    assert len(generation.candidates) == 1 and generation.calls[0].outcome == "kernel"


@pytest.mark.parametrize(
    "step, outcome",
    [
        (reply("I would use a larger tile, but here is only prose."), "no_code"),
        (reply("I'm sorry, but I can't help with that."), "refused"),
        (Step(raw=b'{"choices": [ {not json'), "error"),
    ],
)
def test_bad_replies_are_recorded_not_fatal(step, outcome):
    with ReplayServer([step]) as server:
        generation = _generate(LLMProposer(_backend(server)))
    assert generation.candidates == []
    assert [c.outcome for c in generation.calls] == [outcome]


def test_rate_limit_then_success_is_retried():
    with ReplayServer([Step(status=429), Step(status=503), reply(EDIT)]) as server:
        generation = _generate(LLMProposer(_backend(server)))
        assert len(server.requests) == 3
    assert generation.calls[0].outcome == "kernel"


def test_timeout_then_success_is_retried():
    with ReplayServer([Step(delay_s=3.0, texts=[EDIT]), reply(EDIT)]) as server:
        generation = _generate(LLMProposer(_backend(server, timeout_s=0.5)))
    assert generation.calls[0].outcome == "kernel"
    assert generation.calls[0].latency_s >= 0.5


def test_exhausted_retries_and_dead_servers_are_clear_errors():
    with ReplayServer([Step(delay_s=2.0)] * 3) as server:
        with pytest.raises(Unreachable, match="did not answer within 0.3 s"):
            _generate(LLMProposer(_backend(server, timeout_s=0.3, retries=1)))
    with ReplayServer([Step(status=429)] * 3) as server:
        with pytest.raises(LLMError, match="rate-limiting"):
            _generate(LLMProposer(_backend(server, retries=1)))
    with ReplayServer([]) as server:
        dead = server.base_url
    with pytest.raises(Unreachable, match="cannot reach"):
        _generate(LLMProposer(OpenAIBackend("m", base_url=dead, timeout_s=0.5, retries=0)))


def test_missing_or_refused_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingKey, match="OPENAI_API_KEY"):
        OpenAIBackend("gpt-4o-mini")
    with ReplayServer([Step(status=401)]) as server:
        with pytest.raises(MissingKey, match="refused the API key"):
            _generate(LLMProposer(_backend(server, api_key="wrong")))


def test_propose_protocol_path_matches_prepare_generate():
    with ReplayServer([reply(EDIT)]) as server:
        proposer = LLMProposer(_backend(server), seed=3)
        proposer.rng = random.Random(3)
        candidates = proposer.propose(ProposalContext(Shape(256, 512, 128), STANDIN_GPU), 1)
    assert [c.source for c in candidates] == [KERNEL]
    assert [c.outcome for c in proposer.calls] == ["kernel"]
