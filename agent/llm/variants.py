"""Variants shown as their differences from the parent, and which variants are worth showing.

- `view(parent_source, variant_source)` is how a prompt shows a variant beside its parent: "params" (the
  two differ only in the values of `#define NAME <value>` lines: a table of those), "diff" (a unified diff
  against the parent, when shorter than the variant itself) or "source" (the variant in full);
  `summary(v)` is the short form a tight budget falls back to: the settings that differ and how many other
  lines do.
- `pick(parent, ranked, k)` chooses up to k variants that teach something: the nearest faster kernels,
  the nearest slower ones, then kernels of another instruction family (`family_class`), skipping any whose
  difference from the parent repeats one already picked (near-duplicates) or is empty.

Sources reaching here are already scrubbed prompt forms (`agent.llm.scrub.prompt_source`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hgemm.agent.llm.edits import unified_diff

_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+(\S[^\n]*?)[ \t]*$", re.MULTILINE)
FAMILY_MARKS = (("wgmma", "wgmma"), ("mma.sync", "mma.sync"), ("mma_sync", "mma.sync"), ("wmma", "wmma"))


@dataclass
class View:
    kind: str  # "params", "diff" or "source"
    text: str = ""  # the diff or the source
    params: list[tuple[str, str, str]] = field(default_factory=list)  # name, parent value, variant value
    changed_lines: int = 0


def defines(source: str) -> dict[str, str]:
    return {m.group(1): m.group(2) for m in _DEFINE.finditer(source)}


def _without_defines(source: str) -> str:
    return _DEFINE.sub("", source)


def family_class(source: str) -> str:
    """The instruction family a kernel's source uses (wgmma, mma.sync, wmma or other)."""
    for mark, name in FAMILY_MARKS:
        if mark in source:
            return name
    return "other"


def view(parent_source: str, variant_source: str) -> View:
    a, b = defines(parent_source), defines(variant_source)
    params = [
        (n, a.get(n, "(unset)"), b.get(n, "(unset)")) for n in sorted(set(a) | set(b)) if a.get(n) != b.get(n)
    ]
    if _without_defines(parent_source) == _without_defines(variant_source):
        return View("params", params=params, changed_lines=len(params))
    diff = unified_diff(parent_source, variant_source, name="parent.cu", context=1)
    changed = sum(1 for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---")))
    if len(diff) < len(variant_source):
        return View("diff", text=diff, params=params, changed_lines=changed)
    return View("source", text=variant_source, params=params, changed_lines=changed)


def summary(v: View) -> View:
    """The settings that differ, and how many other lines differ (not shown)."""
    if v.kind == "params":
        return v
    other = max(0, v.changed_lines - 2 * len(v.params))
    return View("summary", params=v.params, changed_lines=other)


def signature(v: View) -> str:
    """What makes two views the same lesson."""
    if v.kind == "params":
        return "p:" + ";".join(f"{n}={b}" for n, _, b in v.params)
    return v.kind + ":" + v.text


def pick(parent, ranked: list, k: int, view_of) -> list:
    """Up to k of `ranked` (best first, each with `.score` and `.hash`) besides the parent: alternately the
    nearest faster and the nearest slower by score, then other instruction families; near-duplicates (the
    same view of their difference from the parent, or no difference) are skipped. `view_of(item)` gives
    the item's View. Returned in that order of priority."""
    others = [s for s in ranked if s.hash != parent.hash]
    faster = sorted((s for s in others if s.score > parent.score), key=lambda s: s.score)
    slower = sorted((s for s in others if s.score <= parent.score), key=lambda s: -s.score)
    parent_family = family_class(parent.source)
    foreign = [s for s in others if family_class(s.source) != parent_family]
    order: list = []
    if foreign:
        order.append(foreign[0])
    for i in range(max(len(faster), len(slower))):
        order.extend(x[i] for x in (faster, slower) if i < len(x))
    order.extend(foreign[1:])
    chosen, seen, lessons = [], set(), set()
    for s in order:
        if len(chosen) >= k or s.hash in seen:
            continue
        seen.add(s.hash)
        v = view_of(s)
        if v.changed_lines == 0 or signature(v) in lessons:
            continue
        lessons.add(signature(v))
        chosen.append(s)
    return chosen
