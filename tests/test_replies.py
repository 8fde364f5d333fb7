"""Reply parsing: the last CUDA/C++ block wins; no code, refusals, oversize and static-check failures are
typed outcomes, never exceptions."""

from __future__ import annotations

from hgemm.agent.llm.replies import MAX_REPLY_CHARS, OUTCOMES, extract_code, parse_reply
from hgemm.evaluator.kernels import get_family

KERNEL = get_family("small").render(dict(BM=32, BN=32, WARPS_M=1, WARPS_N=1, WARPS_K=1))


def test_last_tagged_block_wins():
    text = f"First try:\n```cpp\nint old;\n```\nBetter:\n```cuda\n{KERNEL}```\nDone."
    assert extract_code(text) == KERNEL
    for tag in ("cu", "c++", "CUDA"):
        assert extract_code(f"```{tag}\n{KERNEL}```") == KERNEL


def test_untagged_block_only_when_it_defines_the_entry_point():
    assert extract_code("```\nls -la\n```") is None
    assert extract_code(f"```\n{KERNEL}```") == KERNEL
    assert extract_code("```python\nprint(1)\n```") is None


def test_kernel_reply_passes_static_check():
    reply = parse_reply(f"The tile is too small.\n```cuda\n{KERNEL}```")
    assert reply.outcome == "kernel" and reply.source == KERNEL and reply.problems == []


def test_no_code_refusal_oversize():
    assert parse_reply(None).outcome == "no_code"
    assert parse_reply("   ").outcome == "no_code"
    assert parse_reply("Use a bigger tile.").outcome == "no_code"
    assert parse_reply("I'm sorry, but I can't help with that.").outcome == "refused"
    big = parse_reply("x" * (MAX_REPLY_CHARS + 1))
    assert big.outcome == "oversized" and big.source is None


def test_static_check_failure_keeps_source_and_reasons():
    bad = KERNEL.replace(
        'extern "C" int hgemm_run',
        '#include <cstdlib>\nstatic int f() { return system("ls"); }\nextern "C" int hgemm_run',
        1,
    )
    assert bad != KERNEL
    reply = parse_reply(f"```cuda\n{bad}```")
    assert reply.outcome == "static_check"
    assert reply.source is not None and reply.problems
    assert "system" in reply.message


def test_every_outcome_is_known():
    for text in (None, "no code", f"```cuda\n{KERNEL}```", "I cannot help with this."):
        assert parse_reply(text).outcome in OUTCOMES
