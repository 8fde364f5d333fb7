"""Rendering that inlines the kernel directory's own `.cuh` headers.

`inline_includes(text)` replaces every `#include "name.cuh"` whose file ships in
evaluator/kernels with that file's text (recursively, each header at most once, `#pragma once`
dropped), so a rendered source compiles from any directory. Angle-bracket includes are left
alone. `InliningFamily` is a `Family` whose `render` does this after the parameter defines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hgemm.evaluator.kernels.family import Family, Params, kernel_file

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([A-Za-z0-9_.-]+\.cuh)"[ \t]*$', re.MULTILINE)
_PRAGMA_ONCE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once[ \t]*\n?", re.MULTILINE)


def inline_includes(text: str, _seen: set[str] | None = None) -> str:
    """Text with the kernel directory's quoted `.cuh` includes replaced by their contents."""
    seen = set() if _seen is None else _seen

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in seen:
            return f"// {name} already inlined"
        seen.add(name)
        body = _PRAGMA_ONCE.sub("", kernel_file(name))
        return f"// ---- begin {name} ----\n{inline_includes(body, seen).rstrip()}\n// ---- end {name} ----"

    return _INCLUDE.sub(substitute, text)


@dataclass
class InliningFamily(Family):
    """A family whose rendered source carries its shared headers inline."""

    def render(self, params: Params) -> str:
        return inline_includes(super().render(params))
