"""Turn one LLM reply into a kernel source or a typed reason why not.

- `parse_reply(text)` takes the last fenced block tagged cuda, cu, cpp, c++ or c (an untagged block counts
  only when it holds `hgemm_run`), then checks, in order: oversized reply, no code, refusal, the evaluator's
  static check.
- It never raises for a bad reply: every outcome is a `Reply` whose `outcome` is one of OUTCOMES, and only
  "kernel" or "static_check" carries a source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# What one reply (one sample) turned into; "error" is used by callers for failed requests.
OUTCOMES = ("kernel", "static_check", "no_code", "refused", "oversized", "error")

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


def parse_reply(text: str | None, check: bool = True) -> Reply:
    """Classify one reply; `check=False` skips the static check (for callers that run it later)."""
    if text is None or not text.strip():
        return Reply("no_code", problems=["empty reply"])
    if len(text) > MAX_REPLY_CHARS:
        return Reply("oversized", problems=[f"reply has {len(text)} characters (limit {MAX_REPLY_CHARS})"])
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
            return Reply("static_check", source=source, problems=problems)
    return Reply("kernel", source=source)
