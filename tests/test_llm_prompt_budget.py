"""Prompts within their token budget, from the archive the project ships (grid100 on an H100, imported):
the parent once, variants as their differences, the count by a real tokenizer where one loads offline."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hgemm.agent.config import gpu_preset
from hgemm.agent.llm import tokens
from hgemm.agent.llm.prompt import DEFAULT_BUDGET, render_prompt
from hgemm.agent.proposer import ProposalContext
from hgemm.archive import Archive

from hgemm.core.shape import Shape

SEED = (
    Path(__file__).resolve().parents[1] / "bench" / "results" / "archive-grid100-r10-H100-2026-11-24.jsonl.xz"
)
SHAPES = [(4096, 4096, 4096), (1024, 128, 1024), (7, 14336, 4096), (3000, 5000, 700)]
H100 = gpu_preset("h100-sxm")


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    path = tmp_path_factory.mktemp("seeded") / "archive.db"
    with Archive(path) as archive:
        archive.import_file(SEED)
    return path


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_prompt_fits_the_budget_and_shows_differences(seeded, shape):
    with Archive(seeded) as archive:
        ctx = ProposalContext(Shape(*shape), H100, archive=archive)
        prompt = render_prompt(ctx, rng=random.Random(0))
        unbounded = render_prompt(ctx, budget_tokens=None, rng=random.Random(0), variants=8)
    counter = tokens.counter()
    assert prompt.tokenizer == counter.name
    assert prompt.tokens == counter.count(prompt.system) + counter.count(prompt.user)
    assert prompt.budget == DEFAULT_BUDGET and prompt.tokens <= DEFAULT_BUDGET
    assert prompt.parent_hash and prompt.parent_source
    user = prompt.user
    assert prompt.exemplar_hashes, "no variant fitted"
    variants = user.split("# Scored variants", 1)[1].split("\n## Variant ")[1:]
    assert len(variants) == len(prompt.exemplar_hashes)
    differences = ("Same code as the parent with these settings", "```diff\n", "other lines of code differ",
                   "Settings that differ from the parent")  # fmt: skip
    as_differences = sum(any(d in v for d in differences) for v in variants)
    assert as_differences >= 1
    # the parent in full once; a variant in full only when its difference would be longer (another family)
    assert user.count("```cuda\n") == 1 + len(prompt.exemplar_hashes) - as_differences
    assert prompt.parent_hash not in prompt.exemplar_hashes
    assert "Nsight Compute: no metrics were collected" in user  # the seed archive has none: said plainly
    # the shown parent is the base edits apply to (folding aside)
    if not prompt.folded:
        assert prompt.parent_source.strip("\n") in user
    assert unbounded.tokens >= prompt.tokens


def test_a_smaller_budget_shortens_variants_then_drops_them(seeded):
    with Archive(seeded) as archive:
        ctx = ProposalContext(Shape(4096, 4096, 4096), H100, archive=archive)
        full = render_prompt(ctx, budget_tokens=None, rng=random.Random(0))
        tight = render_prompt(ctx, budget_tokens=full.tokens - 1, rng=random.Random(0))
        bare = render_prompt(ctx, budget_tokens=full.tokens - len(full.user) // 8, rng=random.Random(0))
    assert full.parent_hash == tight.parent_hash and full.exemplar_hashes and not full.folded
    assert tight.tokens <= full.tokens - 1
    short = "other lines of code differ (not shown, to keep within the token budget)"
    assert short not in full.user and (
        short in tight.user or len(tight.exemplar_hashes) < len(full.exemplar_hashes)
    )
    assert bare.tokens <= bare.budget
    assert bare.left_out >= 1 or bare.folded or short in bare.user


def test_the_counter_is_real_or_labelled_an_estimate(monkeypatch):
    counter = tokens.counter()
    assert counter.count("__global__ void k() {}") > 3
    assert counter.exact or counter.name.startswith("estimate")
    monkeypatch.setattr(tokens, "_chosen", None)
    monkeypatch.setenv("HGEMM_TOKENIZER", "estimate")
    assert tokens.counter().name.startswith("estimate") and not tokens.counter().exact
    monkeypatch.setattr(tokens, "_chosen", counter)


def test_the_prompt_sizes_figure_compares_copies_with_differences(seeded, tmp_path):
    from hgemm.bench import prompt_sizes

    with Archive(seeded) as archive:
        rows = prompt_sizes.measure(archive, DEFAULT_BUDGET)
    assert [r["shape"] for r in rows] == [list(s) for s in SHAPES]
    for r in rows:
        assert r["within_budget"] and r["after_tokens"] <= DEFAULT_BUDGET
        assert r["before_tokens"] > 3 * r["after_tokens"]  # copies of ~1,000-line sources against differences
    md, js = prompt_sizes.write(tmp_path, rows, DEFAULT_BUDGET, tokens.counter().name)
    assert "| 4096x4096x4096 |" in md.read_text() and tokens.counter().name in md.read_text()
