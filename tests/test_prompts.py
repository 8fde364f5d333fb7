"""Prompt templates: each renders with exactly its variables (missing or unknown ones raise), the
system prompt includes the evaluator's contract, and the task prompt shows exemplars slowest first."""

from __future__ import annotations

import random

import pytest
from hgemm.agent.llm.prompt import build_prompt, choose, gather, gpu_facts, rank_weighted_sample
from hgemm.agent.proposer import Candidate, ProposalContext
from hgemm.evaluator.api import contract_text
from hgemm.evaluator.kernels import get_family
from standin import STANDIN_GPU, StandinEvaluator

from hgemm import prompts
from hgemm.core.shape import Shape

REQUIRED = {
    "system.j2": {"contract"},
    "task.j2": {"M", "N", "K", "gpu", "floors", "baselines", "parent", "exemplars", "failures"},
}


def _values(name):
    if name == "system.j2":
        return {"contract": "CONTRACT"}
    return dict(
        M=1,
        N=2,
        K=3,
        gpu=gpu_facts(STANDIN_GPU),
        floors={},
        baselines={},
        parent=None,
        exemplars=[],
        failures=[],
    )


def test_every_template_is_known_and_renders():
    assert set(prompts.names()) == set(REQUIRED)
    for name, wanted in REQUIRED.items():
        assert prompts.variables(name) == wanted
        assert prompts.render(name, **_values(name)).strip()


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_missing_and_unknown_variables_raise(name):
    values = _values(name)
    with pytest.raises(prompts.PromptError, match="unknown"):
        prompts.render(name, **values, surprise=1)
    values.pop(sorted(values)[0])
    with pytest.raises(prompts.PromptError, match="missing"):
        prompts.render(name, **values)


def _history(n_good: int = 5, shape=(512, 512, 512)):
    family = get_family("small")
    sources = [
        f"// STANDIN_SPEED {0.8 + 0.1 * i:.2f}\n"
        + family.render(dict(BM=32, BN=32, WARPS_M=1, WARPS_N=1, WARPS_K=1 << (i % 4)))
        for i in range(n_good)
    ]
    sources.append("// STANDIN_WRONG\n" + sources[0])
    records = StandinEvaluator().evaluate(sources, Shape(*shape), stage="full", ncu=True)
    return [(Candidate(s, "template"), r) for s, r in zip(sources, records, strict=True)]


def test_task_prompt_shows_contract_exemplars_parent_and_failures():
    ctx = ProposalContext(Shape(512, 512, 512), STANDIN_GPU, history=_history())
    prompt = build_prompt(ctx, random.Random(1), exemplars=3)
    assert contract_text().strip() in prompt.system
    assert prompt.parent_hash and len(prompt.exemplar_hashes) == 3
    assert prompt.parent_hash not in prompt.exemplar_hashes
    user = prompt.user
    assert "M=512, N=512, K=512" in user and "132 SMs" in user and "lt_autotuned" in user
    assert "Variant 3" in user and "Parent kernel" in user and "Nsight Compute:" in user
    assert "its result was wrong" in user and "max relative error" not in user  # a fixed sentence, no message
    # slowest first: offline speedups along the variants increase
    ranked, _, _ = gather(ctx)
    shown = [next(s for s in ranked if s.hash == h) for h in prompt.exemplar_hashes]
    assert [s.score for s in shown] == sorted(s.score for s in shown)
    positions = [user.index(h) for h in prompt.exemplar_hashes]
    assert positions == sorted(positions)


def test_prompt_without_history_still_renders():
    prompt = build_prompt(ProposalContext(Shape(64, 64, 64), STANDIN_GPU), random.Random(0))
    assert prompt.parent_hash is None and prompt.exemplar_hashes == []
    assert "not been measured yet" in prompt.user and "```cuda" in prompt.system


def test_rank_weighting_prefers_the_best_but_keeps_diversity():
    items = list(range(10))  # best first
    rng = random.Random(0)
    firsts = [rank_weighted_sample(items, 1, rng)[0] for _ in range(3000)]
    counts = [firsts.count(i) for i in items]
    assert counts[0] > counts[1] > counts[5] > 0 and counts[9] > 0
    ranked, _, _ = gather(ProposalContext(Shape(512, 512, 512), STANDIN_GPU, history=_history(8)))
    for seed in range(20):
        parent, shown = choose(ranked, 3, random.Random(seed))
        rest = [s for s in ranked if s.hash != parent.hash]
        slower = {s.hash for s in rest[len(rest) // 2 :]}
        assert any(s.hash in slower for s in shown)  # something slower to contrast with
        assert len({s.hash for s in shown} | {parent.hash}) == 4
