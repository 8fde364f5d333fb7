"""Make a (scrubbed) kernel source shorter without changing what nvcc compiles from it.

`resolve_conditionals(source)` evaluates `#if`/`#ifdef`/`#ifndef`/`#elif`/`#else` groups whose conditions
use only object-like macros the source itself defines as integers (once, never `#undef`ed, before use) and
the `defined` operator on such macros, keeping the taken branch's lines and dropping the rest and the
directive lines; conditions it cannot decide (compiler macros such as `__CUDA_ARCH__`, anything unknown)
keep their group intact. Our families render their configuration as such macros, so a parent shrinks to the
code of its own configuration, and SEARCH/REPLACE edits apply to exactly that text.

`fold_bodies(source, max_lines, host=False)` is the last resort of a tight budget: bodies of short
`__device__` helper functions (and with `host`, of file-scope host helpers, never a kernel or a contract entry
point) become `{ ... }` in the shown text; the proposer applies edits to the unfolded text.
"""

from __future__ import annotations

import ast
import re

_DIRECTIVE = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif|define|undef)\b(.*)$")
_INT_DEFINE = re.compile(r"^\s*([A-Za-z_]\w*)\s+\(?\s*(-?\d+)[uUlL]*\s*\)?\s*$")
_DEFINED = re.compile(r"\bdefined\s*(?:\(\s*([A-Za-z_]\w*)\s*\)|([A-Za-z_]\w*))")
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
_INT = re.compile(r"\b(\d+)[uUlL]*\b")
_ALLOWED = (ast.Expression, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Compare, ast.Constant, ast.And, ast.Or,
            ast.Not, ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.USub, ast.Eq, ast.NotEq, ast.Lt,
            ast.LtE, ast.Gt, ast.GtE, ast.IfExp, ast.BitAnd, ast.BitOr, ast.LShift, ast.RShift)  # fmt: skip


def _evaluate(expr: str, macros: dict[str, int]) -> bool | None:
    """The condition's value, or None when it uses anything not known."""

    def is_defined(m: re.Match[str]) -> str:
        return "1" if (m.group(1) or m.group(2)) in macros else "@"

    text = _DEFINED.sub(is_defined, expr.split("//")[0])
    if "@" in text or any(name not in macros for name in _IDENT.findall(text)):
        return None
    text = _IDENT.sub(lambda m: str(macros[m.group(0)]), text)
    text = _INT.sub(r"\1", text)
    text = text.replace("&&", " and ").replace("||", " or ").replace("/", "//")
    text = re.sub(r"!(?!=)", " not ", text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return None
    if not all(isinstance(node, _ALLOWED) for node in ast.walk(tree)):
        return None
    try:
        return bool(eval(compile(tree, "<if>", "eval"), {"__builtins__": {}}, {}))  # noqa: S307 (ints only)
    except Exception:
        return None


def resolve_conditionals(source: str) -> str:
    """The source with every decidable conditional group replaced by its taken branch.

    One pass in order, as the preprocessor reads: a macro's value is known from its `#define` on (an
    integer literal, outside any group left undecided); a `#define` or `#undef` inside an undecided group
    makes it unknown from there on."""
    macros: dict[str, int] = {}
    out: list[str] = []
    # frames: [mode, branch taken now, some branch taken]; mode "resolved" (directives dropped),
    # "kept" (undecided: directives and every branch kept) or "dead" (inside a dropped branch)
    stack: list[list] = []

    def live() -> bool:
        return all(f[0] == "kept" or (f[0] == "resolved" and f[1]) for f in stack)

    def undecided() -> bool:
        return any(f[0] == "kept" for f in stack)

    for line in source.split("\n"):
        m = _DIRECTIVE.match(line)
        kind = m.group(1) if m else None
        if kind in ("if", "ifdef", "ifndef"):
            if not live():
                stack.append(["dead", False, True])
                continue
            arg = m.group(2).strip()
            if kind == "if":
                value = _evaluate(arg, macros)
            else:
                name = (arg.split() or [""])[0]
                value = None if name not in macros else (kind == "ifdef")
            if value is None:
                stack.append(["kept", None, False])
                out.append(line)
            else:
                stack.append(["resolved", value, value])
            continue
        if kind in ("elif", "else", "endif") and stack:
            frame = stack[-1]
            if kind == "endif":
                stack.pop()
                if frame[0] == "kept":
                    out.append(line)
            elif frame[0] == "kept":
                out.append(line)
            elif frame[0] == "resolved":
                if frame[2]:
                    frame[1] = False
                else:
                    value = True if kind == "else" else _evaluate(m.group(2).strip(), macros)
                    if value is None:  # undecidable #elif after false branches: the rest stays a group
                        frame[0], frame[1] = "kept", None
                        out.append(line.replace("elif", "if", 1))
                    else:
                        frame[1] = frame[2] = value
            continue
        if not live():
            continue
        if kind in ("define", "undef"):
            name = re.match(r"\s*([A-Za-z_]\w*)", m.group(2))
            if name:
                value = _INT_DEFINE.match(m.group(2)) if kind == "define" else None
                if value and not undecided():
                    macros[name.group(1)] = int(value.group(2))
                else:
                    macros.pop(name.group(1), None)
        out.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out))


_HELPER = re.compile(
    r"^(?P<head>[ \t]*(?:template\s*<[^>]*>\s*)?(?:static\s+)?__device__[^;{}]*\))\s*(?:const\s*)?\{[ \t]*$"
)
# host helpers at file scope (not the entry points, not kernels): `bool make_map(...) {`
_HOST = re.compile(
    r"^(?P<head>(?!.*\b(?:hgemm_run|hgemm_supports|hgemm_workspace\w*)\b)[A-Za-z_][\w:<>*& ]*\s[\w:*&]+\([^;{}]*\))\s*\{[ \t]*$"
)
_HEAD_LINES = 4  # a helper's signature may span this many lines


def fold_bodies(source: str, max_lines: int = 12, host: bool = False) -> tuple[str, int]:
    """`__device__` function bodies of at most `max_lines` lines folded to `{ ... }` (signatures of up to
    _HEAD_LINES lines), and with `host` the bodies of file-scope host helpers too (never a kernel or an
    entry point of the contract); returns the text and how many were folded."""
    lines = source.split("\n")
    out: list[str] = []
    folded = 0
    i = 0
    while i < len(lines):
        m = None
        if host and "__global__" not in lines[i] and "__device__" not in lines[i]:
            m = _HOST.match(lines[i])
            start = i
        elif "__device__" in lines[i] and "__global__" not in lines[i]:
            for h in range(_HEAD_LINES):
                if i + h >= len(lines) or ";" in lines[i + h]:
                    break
                m = _HELPER.match(
                    " ".join(line.strip() if k else line for k, line in enumerate(lines[i : i + h + 1]))
                )
                if m or "{" in lines[i + h]:
                    break
            start = i + h if m else i
        if m:
            depth, j = 0, start
            while j < len(lines):
                depth += lines[j].count("{") - lines[j].count("}")
                if depth <= 0 and j > start:
                    break
                j += 1
            if j < len(lines) and depth == 0 and 0 < j - start <= max_lines and lines[j].strip() == "}":
                out.append(m.group("head") + " { ... }")
                folded += 1
                i = j + 1
                continue
        out.append(lines[i])
        i += 1
    return "\n".join(out), folded
