"""Turn one LLM reply into a kernel source or a typed reason why not.

- `parse_reply(text, base=...)`: a reply with SEARCH/REPLACE blocks is applied to `base` (the parent as the
  prompt showed it; `agent.llm.edits`), and a block that does not apply makes the outcome "edit_failed" with
  the failure kind; otherwise it takes the last fenced block tagged cuda, cu, cpp, c++ or c (an untagged block
  counts only when it holds `hgemm_run`). Then it checks, in order: oversized reply, no code, refusal, the
  evaluator's static check.
- It never raises for a bad reply: every outcome is a `Reply` whose `outcome` is one of OUTCOMES, and only
  "kernel" or "static_check" carries a source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hgemm.agent.llm.edits import Applied, apply_edits, has_edits, parse_edits

# What one reply (one sample) turned into; "error" is used by callers for failed requests.
OUTCOMES = ("kernel", "static_check", "edit_failed", "duplicate", "no_code", "refused", "oversized", "error")

MAX_REPLY_CHARS = 200_000  # a reply longer than this is not read at all
MAX_SOURCE_CHARS = 120_000  # a kernel longer than this is not compiled

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9+_-]*)[^\n]*\n(.*?)```", re.DOTALL)
_CODE_TAGS = {"cuda", "cu", "cpp", "c++", "cxx", "c", "cuh"}
_REFUSAL = re.compile(
    r"\b(i can(?:no|')t help|i cannot (?:assist|help|comply|provide)|i(?:'m| am) (?:sorry|unable)|"
    r"i won'?t (?:help|provide|write))",
    re.IGNORECASE,
)


@dataclass
class Reply:
    outcome: str
    source: str | None = None
    problems: list[str] = field(default_factory=list)  # static-check findings, or why nothing was taken
    edit: Applied | None = None  # the applied (or failed) SEARCH/REPLACE edit, when the reply made one

    @property
    def message(self) -> str:
        return "; ".join(self.problems)


def extract_code(text: str) -> str | None:
    """The last fenced code block tagged as CUDA/C++ (or untagged but defining hgemm_run), else None."""
    chosen = None
    for match in _FENCE.finditer(text):
        tag, body = match.group(1).lower(), match.group(2)
        if tag in _CODE_TAGS or (tag == "" and "hgemm_run" in body):
            chosen = body
    if chosen is None or not chosen.strip():
        return None
    return chosen.strip("\n") + "\n"


def parse_reply(text: str | None, check: bool = True, base: str | None = None) -> Reply:
    """Classify one reply; `check=False` skips the static check (for callers that run it later); `base` is
    the source SEARCH/REPLACE blocks apply to (without one, blocks are not looked for)."""
    if text is None or not text.strip():
        return Reply("no_code", problems=["empty reply"])
    if len(text) > MAX_REPLY_CHARS:
        return Reply("oversized", problems=[f"reply has {len(text)} characters (limit {MAX_REPLY_CHARS})"])
    edit = None
    if base is not None and has_edits(text):
        edit = apply_edits(base, parse_edits(text))
        if not edit.ok:
            return Reply("edit_failed", problems=[edit.message], edit=edit)
        source = edit.source
    else:
        source = extract_code(text)
    if source is None:
        if _REFUSAL.search(text):
            return Reply("refused", problems=["the model declined"])
        return Reply("no_code", problems=["no ```cuda block in the reply"])
    if len(source) > MAX_SOURCE_CHARS:
        return Reply(
            "oversized", problems=[f"kernel has {len(source)} characters (limit {MAX_SOURCE_CHARS})"]
        )
    if check:
        from hgemm.evaluator.static_check import check_source

        problems = list(check_source(source))
        if problems:
            return Reply("static_check", source=source, problems=problems, edit=edit)
    return Reply("kernel", source=source, edit=edit)
