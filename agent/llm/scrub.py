"""Candidate sources as a prompt may show them: code without the prose a candidate can hide in it.

`prompt_source(source)` is the form parents and exemplars take in a prompt; `source_line(source, n)` is
line n of a source as failure notes quote it; `strip_comments(source)` blanks comments and nothing else.

Invariants:
- Lexing follows the compiler's phases: line splices (backslash, optional blanks, newline) join lines
  before comments and literals are recognised; string and character literals (with encoding prefixes)
  hide comment markers; raw strings end at their own `)delim"`, found in the unspliced text, as the
  compiler reverts splices inside them; an unterminated literal ends at its line's end, as in GCC's
  preprocessor; an unterminated block comment runs to the end of the source.
- `strip_comments` keeps every line where it was (a comment becomes one space plus the newlines it
  spanned), so line numbers from the compiler still point at the same code.
- `prompt_source` drops comments, keeps every string and character literal but cuts its contents to a
  bound (and past a per-source budget, to nothing), drops the lines of `#if 0` groups, the text of
  `#error`, `#warning` and `#ident`, all but the first word of unknown `#pragma`s, header names that are
  not plain paths, and whatever follows a directive's operands (`#endif prose`, `#include <x> prose`),
  and escapes control, format, separator and backtick characters as `\\xNN`/`\\uNNNN`, so no fenced
  block or line of the prompt can be closed or forged from inside a source. `source_line` does the same
  to one line and keeps no literal's contents but a plain header name.
- Prose can still hide in identifiers and in macros that are never expanded: scrubbing bounds the
  channel, it does not close it.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from functools import lru_cache

from hgemm.core.record import normalize_source

LITERAL_CHARS = 160  # contents kept of one literal in a prompt source (the kernels' PTX strings are shorter)
LITERAL_BUDGET = 16_000  # contents kept of all literals of one source; later literals keep none
LINE_LITERAL_CHARS = 0  # contents kept of one literal in a quoted line (header names excepted)
LINE_CHARS = 160  # a quoted line is cut to this length

_SPLICE = re.compile(r"\\[ \t]*\n")
_TOKEN = re.compile(
    r"(?P<line>//[^\n]*)"
    r"|(?P<block>/\*.*?(?:\*/|\Z))"
    r'|(?P<raw>(?:u8|[uUL])?R"(?P<delim>[^()\\\s]{0,16})\()'
    r'|(?P<string>(?P<sprefix>(?:u8|[uUL])?)"(?P<sbody>(?:[^"\\\n]|\\.)*)(?P<send>"|(?=\n)|\Z))'
    r"|(?P<char>(?P<cprefix>(?:u8|[uUL])?)'(?P<cbody>(?:[^'\\\n]|\\.)*)(?P<cend>'|(?=\n)|\Z))"
    r"|(?P<word>(?:[^\W\d]|\$)[\w$]*|\.?\d(?:[eEpP][+-]|'(?=\w)|[\w.])*)",
    re.DOTALL,
)
_DIRECTIVE = re.compile(r"[ \t]*#[ \t]*(\w*)(.*)", re.DOTALL)
_DEAD_CONDITION = re.compile(r"\(?\s*(?:0+|false)\s*\)?")
# Pragmas whose arguments are code, not prose; any other pragma keeps its first word only.
_PRAGMAS = {
    "unroll",
    "nounroll",
    "once",
    "pack",
    "push_macro",
    "pop_macro",
    "nv_diag_suppress",
    "nv_diag_default",
    "nv_diag_warning",
    "nv_diag_error",
    "diag_suppress",
    "diag_default",
    "diag_warning",
    "nv_exec_check_disable",
    "hd_warning_disable",
    "STDC",
}
_FREE_TEXT_DIRECTIVES = {"error", "warning", "ident", "sccs"}
_QUOTED_INCLUDE = re.compile(r'[ \t]*#[ \t]*(include|include_next|import)[ \t]*"([^"\n]*)"')
_HEADER_NAME = re.compile(r"[\w./+-]{1,64}")
_BARE_DIRECTIVES = {"else", "endif"}
# Directives whose operand is one token: anything after it is prose.
_OPERAND = {
    **dict.fromkeys(("ifdef", "ifndef", "elifdef", "elifndef", "undef"), re.compile(r"[\w$]*")),
    **dict.fromkeys(("include", "include_next", "import"), re.compile(r'<[\w./+-]{1,64}>|"[\w./+-]{1,64}"')),
    "line": re.compile(r"\d*"),
}
_NON_ASCII = re.compile(r"[^\t\n\x20-\x5f\x61-\x7e]")  # \x60 is the backtick
_UNSAFE_CATEGORIES = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


@dataclass
class _Piece:
    """A span [start, end) of the source that scrubbing rewrites: a comment or a literal."""

    start: int
    end: int
    comment: bool
    prefix: str = ""  # a literal's opening: encoding prefix and quote (raw: `R"delim(`)
    body: str = ""  # a literal's contents
    close: str = ""  # a literal's closing (also when the source left it unterminated)


class _Spliced:
    """The source with its line splices removed, and the map between the two texts' offsets."""

    def __init__(self, text: str):
        parts, logical_at, physical_at, removed = [], [], [], [0]
        pos = 0
        for m in _SPLICE.finditer(text):
            parts.append(text[pos : m.start()])
            physical_at.append(m.start())
            logical_at.append(m.start() - removed[-1])
            removed.append(removed[-1] + m.end() - m.start())
            pos = m.end()
        parts.append(text[pos:])
        self.text = "".join(parts)
        self._logical_at = logical_at  # logical offset at which each splice was removed
        self._physical_at = physical_at  # physical offset where each splice starts
        self._removed = removed  # characters removed by the first i splices

    def physical(self, logical: int) -> int:
        """Physical offset of the character at `logical` (splices before it counted)."""
        return logical + self._removed[bisect_right(self._logical_at, logical)]

    def physical_end(self, logical_end: int) -> int:
        """Physical end (exclusive) of a span whose logical end is `logical_end`."""
        return self.physical(logical_end - 1) + 1 if logical_end > 0 else 0

    def logical(self, physical: int) -> int:
        """Logical offset of a physical offset outside any splice."""
        return physical - self._removed[bisect_left(self._physical_at, physical)]


def _pieces(text: str) -> list[_Piece]:
    """Every comment and literal of `text` (LF line endings), as physical spans, in order."""
    spliced = _Spliced(text)
    logical = spliced.text
    out: list[_Piece] = []
    pos = 0
    while True:
        m = _TOKEN.search(logical, pos)
        if m is None:
            return out
        kind = m.lastgroup if m.lastgroup in ("line", "block", "word") else None
        start = spliced.physical(m.start())
        if m.group("raw") is not None:
            opened = spliced.physical_end(m.end())
            closing = ")" + m.group("delim") + '"'
            found = text.find(closing, opened)
            end = len(text) if found < 0 else found + len(closing)
            body = text[opened : found if found >= 0 else len(text)]
            out.append(_Piece(start, end, False, text[start:opened], body, closing))
            pos = spliced.logical(end)
            continue
        pos = m.end()
        if kind == "word":
            continue
        end = spliced.physical_end(m.end())
        if kind in ("line", "block"):
            out.append(_Piece(start, end, True))
        elif m.group("string") is not None:
            out.append(_Piece(start, end, False, m.group("sprefix") + '"', m.group("sbody"), '"'))
        else:
            out.append(_Piece(start, end, False, m.group("cprefix") + "'", m.group("cbody"), "'"))


def _bounded(body: str, limit: int) -> str:
    """`body` cut to `limit` characters, never ending inside an escape sequence, `...` marking the cut."""
    if len(body) <= limit:
        return body
    kept = body[:limit]
    trailing = len(kept) - len(kept.rstrip("\\"))
    if trailing % 2:
        kept = kept[:-1]
    return kept + "..."


def _rewrite(text: str, literal_chars: int | None, budget: int | None) -> tuple[str, set[int]]:
    """Comments become a space plus the newlines they spanned; literals are bounded when asked. Also the
    indices of the lines that begin inside a literal (no directive starts there)."""
    out: list[str] = []
    inside: set[int] = set()
    line = 0
    pos = 0
    left = budget
    for p in _pieces(text):
        before = text[pos : p.start]
        out.append(before)
        line += before.count("\n")
        span = text[p.start : p.end]
        if p.comment:
            piece = " " + "\n" * span.count("\n")
        elif literal_chars is None:
            piece = span
        else:
            limit = literal_chars if left is None else max(0, min(literal_chars, left))
            body = _bounded(p.body, limit)
            if left is not None:
                left -= min(len(p.body), limit)
            rebuilt = p.prefix + body + p.close
            piece = rebuilt + "\n" * max(0, span.count("\n") - rebuilt.count("\n"))
        newlines = piece.count("\n")
        if not p.comment:
            inside.update(range(line + 1, line + newlines + 1))
        out.append(piece)
        line += newlines
        pos = p.end
    out.append(text[pos:])
    return "".join(out), inside


def strip_comments(source: str) -> str:
    """`source` with every comment blanked and each remaining line where it was."""
    return _rewrite(source.replace("\r\n", "\n").replace("\r", "\n"), None, None)[0]


def _escape(match: re.Match[str]) -> str:
    ch = match.group(0)
    if ch != "`" and unicodedata.category(ch) not in _UNSAFE_CATEGORIES:
        return ch
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escape_unsafe(text: str) -> str:
    """Control, format, separator, private and unassigned characters and backticks as visible escapes."""
    return _NON_ASCII.sub(_escape, text)


def _logical_lines(lines: list[str]) -> list[tuple[int, int]]:
    """(first, last) physical line index of each logical line (lines joined by trailing backslashes)."""
    spans = []
    i = 0
    while i < len(lines):
        j = i
        while j + 1 < len(lines) and re.search(r"\\[ \t]*$", lines[j]):
            j += 1
        spans.append((i, j))
        i = j + 1
    return spans


def _directive(line: str) -> tuple[str, str] | None:
    m = _DIRECTIVE.match(line)
    return (m.group(1), m.group(2).strip()) if m else None


def _scrub_directive(name: str, rest: str, line: str) -> str:
    """A live directive line without the prose it may carry."""
    indent = line[: len(line) - len(line.lstrip())]
    if name in _FREE_TEXT_DIRECTIVES or name in _BARE_DIRECTIVES:
        return f"{indent}#{name}"
    if name == "pragma":
        first = re.match(r"\w*", rest).group(0)
        return line if first in _PRAGMAS else f"{indent}#pragma {first}".rstrip()
    operand = _OPERAND.get(name)
    if operand is None:
        return line
    kept = operand.match(rest)
    return f"{indent}#{name} {kept.group(0) if kept else ''}".rstrip()


def _drop_dead_groups(lines: list[str], inside: set[int]) -> list[str | None]:
    """Lines with those of `#if 0` groups (and `#elif 0` branches) as None and directives scrubbed; a line
    that begins inside a literal (index in `inside`) is never a directive."""
    out: list[str | None] = list(lines)
    depth = 0
    dead_at: int | None = None  # nesting depth of the group being skipped
    for first, last in _logical_lines(lines):
        joined = " ".join(re.sub(r"\\[ \t]*$", "", lines[k]) for k in range(first, last + 1))
        d = None if first in inside else _directive(joined)
        name, rest = d if d else ("", "")
        keep = dead_at is None
        if name in ("if", "ifdef", "ifndef"):
            depth += 1
            if dead_at is None and name == "if" and _DEAD_CONDITION.fullmatch(rest):
                dead_at = depth
        elif name in ("elif", "elifdef", "elifndef", "else") and dead_at in (None, depth):
            keep = True
            dead = name == "elif" and _DEAD_CONDITION.fullmatch(rest)
            dead_at = depth if dead else None
        elif name == "endif":
            if dead_at == depth:
                dead_at, keep = None, True
            depth = max(0, depth - 1)
        for k in range(first, last + 1):
            out[k] = None if not keep else out[k]
        if keep and d:
            scrubbed = _scrub_directive(name, rest, joined)
            if scrubbed != joined:
                out[first] = scrubbed
                for k in range(first + 1, last + 1):
                    out[k] = ""
    return out


@lru_cache(maxsize=256)
def prompt_source(source: str) -> str:
    """The source as a prompt shows it: no comments, bounded literals, no dead `#if 0` text, no blank runs."""
    text = normalize_source(source)
    stripped, inside = _rewrite(text, LITERAL_CHARS, LITERAL_BUDGET)
    original = text.split("\n")
    kept: list[str] = []
    for before, after in zip(original, _drop_dead_groups(stripped.split("\n"), inside), strict=True):
        if after is None:
            continue
        after = after.rstrip()
        if not after and before.strip():  # a line that held only a comment or dropped text
            continue
        if after or (kept and kept[-1]):
            kept.append(after)
    return escape_unsafe("\n".join(kept).strip("\n")) + "\n"


def source_lines(source: str) -> list[str]:
    """Every line of the normalised source (the text nvcc compiles) as failure notes quote it: scrubbed, cut
    to LINE_CHARS, and with no literal's contents (a failed line's strings, static_assert messages among
    them, are the candidate's prose) except a plain header name in `#include "..."`."""
    text = normalize_source(source)[:-1]  # the last line's newline ends it; it starts no line
    stripped, inside = _rewrite(text, LINE_LITERAL_CHARS, None)
    lines = _drop_dead_groups(stripped.split("\n"), inside)
    plain = strip_comments(text).split("\n")
    out = []
    for k, line in enumerate(lines):
        header = _QUOTED_INCLUDE.match(plain[k]) if line and _QUOTED_INCLUDE.match(line) else None
        if header and _HEADER_NAME.fullmatch(header.group(2)):
            line = f'#{header.group(1)} "{header.group(2)}"'
        line = " ".join((line or "").split())
        line = escape_unsafe(line)
        out.append(line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 3] + "...")
    return out


def source_line(source: str, n: int) -> str | None:
    """Line n (1-based) of the normalised source, scrubbed and cut to LINE_CHARS; None when out of range."""
    lines = source_lines(source)
    return lines[n - 1] if 1 <= n <= len(lines) else None
