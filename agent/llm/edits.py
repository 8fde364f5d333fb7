"""Edits instead of rewrites: SEARCH/REPLACE blocks against the parent a prompt showed.

A reply may answer with blocks of the form

    <<<<<<< SEARCH
    lines of the parent, verbatim
    =======
    the lines that replace them
    >>>>>>> REPLACE

(the format AlphaEvolve and OpenEvolve use), or with a whole file in one ```cuda block.

- `parse_edits(text)` finds the blocks (inside or outside code fences); `apply_edits(base, edits)` applies
  them in order to `base` and returns an `Applied`: the new source and its unified diff against the base, or
  the first block that failed and why (`FAILURE_KINDS`). A block applies when its SEARCH text occurs exactly
  once; failing that, when it occurs exactly once line by line with leading and trailing blanks ignored
  (models re-indent). Zero occurrences is `no_match`, several is `ambiguous`; an empty SEARCH is `empty_search`;
  a block that is not closed is `malformed`; edits that change nothing are `no_change`.
- Pure text functions: nothing is compiled or run here, and no message quotes the reply.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from hgemm.core.record import normalize_source

FAILURE_KINDS = ("no_match", "ambiguous", "empty_search", "malformed", "no_change")
MAX_BLOCKS = 64  # a reply with more blocks than this is malformed

_OPEN = re.compile(r"^[ \t]*<{5,9}[ \t]*SEARCH[ \t]*$", re.MULTILINE)
_BLOCK = re.compile(
    r"^[ \t]*<{5,9}[ \t]*SEARCH[ \t]*\n(?P<search>.*?)^[ \t]*={5,9}[ \t]*\n(?P<replace>.*?)^[ \t]*>{5,9}[ \t]*REPLACE[ \t]*$",
    re.MULTILINE | re.DOTALL,
)


@dataclass(frozen=True)
class Edit:
    search: str
    replace: str


@dataclass
class Applied:
    """The outcome of applying a reply's edits to a base source."""

    source: str | None  # the edited source, None when a block failed
    diff: str = ""  # unified diff base -> source
    failure: str | None = None  # one of FAILURE_KINDS
    block: int | None = None  # 1-based index of the block that failed
    applied: int = 0  # blocks applied before the failure (all of them on success)
    spans: list[tuple[int, int]] = field(default_factory=list)  # lines of the result each block replaced

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def message(self) -> str:
        if self.ok:
            return f"{self.applied} edit(s) applied"
        return f"edit block {self.block}: {self.failure}"


def has_edits(text: str) -> bool:
    """Whether a reply contains at least one SEARCH marker."""
    return bool(_OPEN.search(text or ""))


def parse_edits(text: str) -> list[Edit] | None:
    """The reply's SEARCH/REPLACE blocks in order; None when a SEARCH marker opens a block that never closes
    or there are more than MAX_BLOCKS blocks."""
    text = (text or "").replace("\r\n", "\n")
    edits = [Edit(m.group("search"), m.group("replace")) for m in _BLOCK.finditer(text)]
    if len(_OPEN.findall(text)) != len(edits) or len(edits) > MAX_BLOCKS:
        return None
    return edits


def _line_match(lines: list[str], search: list[str]) -> tuple[list[int], int]:
    """Start indices where `search` matches `lines` line by line (blank lines at both ends of `search`
    dropped, blanks around each line ignored), and the number of lines matched."""
    want = [s.strip() for s in search]
    while want and not want[-1]:
        want.pop()
    while want and not want[0]:
        want.pop(0)
    if not want:
        return [], 0
    stripped = [line.strip() for line in lines]
    n = len(want)
    return [i for i in range(len(lines) - n + 1) if stripped[i : i + n] == want], n


def _apply_one(source: str, edit: Edit) -> tuple[str | None, str | None, int]:
    """(new source, None, first changed line) or (None, failure kind, 0)."""
    if not edit.search.strip():
        return None, "empty_search", 0
    count = source.count(edit.search)
    if count == 1:
        at = source.index(edit.search)
        return source[:at] + edit.replace + source[at + len(edit.search) :], None, source[:at].count("\n")
    if count > 1:
        return None, "ambiguous", 0
    lines = source.split("\n")
    search = edit.search.rstrip("\n").split("\n")
    starts, n = _line_match(lines, search)
    if not starts:
        return None, "no_match", 0
    if len(starts) > 1:
        return None, "ambiguous", 0
    start = starts[0]
    end = start + n
    replace = edit.replace.rstrip("\n").split("\n") if edit.replace.strip() else []
    return "\n".join(lines[:start] + replace + lines[end:]), None, start


def unified_diff(before: str, after: str, name: str = "kernel.cu", context: int = 2) -> str:
    """A unified diff of two sources (empty when equal)."""
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"a/{name}",
        tofile=f"b/{name}",
        n=context,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def apply_edits(base: str, edits: list[Edit] | None) -> Applied:
    """Apply `edits` in order to `base`; the first failing block stops the whole edit."""
    if edits is None:
        return Applied(None, failure="malformed")
    if not edits:
        return Applied(None, failure="no_match", block=1)
    source = base
    spans = []
    for i, edit in enumerate(edits, start=1):
        new, failure, line = _apply_one(source, edit)
        if new is None:
            return Applied(None, failure=failure, block=i, applied=i - 1)
        spans.append((line + 1, line + max(1, edit.replace.count("\n"))))
        source = new
    if not source.endswith("\n"):
        source += "\n"
    if normalize_source(source) == normalize_source(base):  # the same kernel hash: nothing changed
        return Applied(None, failure="no_change", block=len(edits), applied=len(edits))
    return Applied(source, diff=unified_diff(base, source), applied=len(edits), spans=spans)
