"""SEARCH/REPLACE edits on real kernels: blocks apply to the parent as the prompt shows it, failures have a
kind (no_match, ambiguous, empty_search, malformed, no_change), the applied diff is a unified diff, and a
reply's edit becomes a candidate that passes the static check."""

from __future__ import annotations

import pytest
from hgemm.agent.llm.compact import fold_bodies, resolve_conditionals
from hgemm.agent.llm.edits import apply_edits, parse_edits
from hgemm.agent.llm.replies import parse_reply
from hgemm.agent.llm.scrub import prompt_source
from hgemm.evaluator.kernels import get_family

from hgemm.core.shape import Shape


def _parent(family: str = "mma_ms") -> str:
    fam = get_family(family)
    return resolve_conditionals(prompt_source(fam.render(fam.default_params(Shape(4096, 4096, 4096)))))


def _block(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def _define_line(source: str, prefix: str = "#define HG_STAGES") -> str:
    return next(line for line in source.splitlines() if line.startswith(prefix)) + "\n"


@pytest.mark.parametrize("family", ["mma_ms", "small", "wgmma"])
def test_an_edit_of_a_define_applies_and_passes_the_static_check(family):
    parent = _parent(family)
    line = next(line for line in parent.splitlines() if line.startswith("#define HG_")) + "\n"
    name, value = line.split()[1:3]
    new = f"#define {name} {value}  \n"  # same value, trailing blanks: must not count as a change
    assert apply_edits(parent, parse_edits(_block(line, new))).failure == "no_change"
    reply = "Deeper pipeline.\n" + _block(line, f"#define {name} ({value})\n")
    got = parse_reply(reply, base=parent)
    assert got.outcome == "kernel", got.problems
    assert got.source.count(f"#define {name} ({value})") == 1
    assert f"-{line}" in got.edit.diff and f"+#define {name} ({value})" in got.edit.diff
    assert got.edit.diff.startswith("--- a/kernel.cu\n+++ b/kernel.cu\n@@")


def test_failure_kinds_on_a_real_kernel():
    parent = _parent()
    assert apply_edits(parent, parse_edits(_block("no such line at all\n", "x\n"))).failure == "no_match"
    common = next(
        line for line in parent.splitlines() if parent.count(line + "\n") > 2 and line.strip() == "}"
    )
    got = apply_edits(parent, parse_edits(_block(common + "\n", "};\n")))
    assert got.failure == "ambiguous" and got.block == 1
    assert apply_edits(parent, parse_edits(_block("\n", "x\n"))).failure == "empty_search"
    assert parse_edits("<<<<<<< SEARCH\nabc\n=======\n") is None
    assert apply_edits(parent, None).failure == "malformed"
    # the second block fails: nothing of the first is kept
    line = _define_line(parent)
    two = _block(line, "#define HG_STAGES 5\n") + _block("missing\n", "y\n")
    got = apply_edits(parent, parse_edits(two))
    assert got.source is None and got.failure == "no_match" and got.block == 2 and got.applied == 1
    reply = parse_reply("prose\n" + two, base=parent)
    assert reply.outcome == "edit_failed" and reply.source is None and "no_match" in reply.message


def test_reindented_search_text_still_applies_once():
    parent = _parent()
    lines = parent.splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith("    ") and parent.count(line) == 1)
    search = "\n".join(line.strip() for line in lines[i : i + 2]) + "\n"  # indentation lost
    got = apply_edits(parent, parse_edits(_block(search, lines[i] + "\n" + lines[i + 1] + "  // kept\n")))
    assert got.ok and got.source.count("// kept") == 1


def test_edits_inside_a_code_fence_and_a_whole_file_reply():
    parent = _parent()
    line = _define_line(parent)
    fenced = "```cuda\n" + _block(line, "#define HG_STAGES 3\n") + "```\n"
    assert parse_reply(fenced, base=parent).outcome == "kernel"
    whole = "A rewrite.\n```cuda\n" + parent.replace(line, "#define HG_STAGES 3\n") + "```\n"
    got = parse_reply(whole, base=parent)
    assert got.outcome == "kernel" and got.edit is None and "#define HG_STAGES 3" in got.source


def test_sources_shrink_only_by_branches_they_exclude():
    source = (
        "#define A 2\n#if A == 2\nint two;\n#else\nint other;\n#endif\n"
        "#ifdef B\nint b;\n#endif\n#if defined(__CUDA_ARCH__) && A > 1\nint dev;\n#endif\n#ifndef A\n#define A 3\n#endif\n"
    )
    got = resolve_conditionals(source)
    assert "int two;" in got and "int other;" not in got and "#if A" not in got
    assert "#ifdef B\nint b;\n#endif" in got  # B is not the source's own: undecided, kept
    assert "#if defined(__CUDA_ARCH__) && A > 1\nint dev;\n#endif" in got
    assert "#define A 3" not in got
    folded, n = fold_bodies("__device__ int f(int x) {\n  return x;\n}\n__global__ void k() {\n  f(1);\n}\n")
    assert n == 1 and "__device__ int f(int x) { ... }" in folded and "f(1);" in folded


def test_every_template_family_survives_compaction_unchanged_where_it_matters():
    """The compacted parent keeps every line of code its own settings compile (nothing but directives and
    excluded branches goes)."""
    for family in ("mma_ms", "small", "wgmma"):
        fam = get_family(family)
        source = prompt_source(fam.render(fam.default_params(Shape(1024, 1024, 1024))))
        compact = resolve_conditionals(source)
        assert len(compact) <= len(source)
        kept = [line for line in compact.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        assert set(kept) <= set(source.splitlines())
