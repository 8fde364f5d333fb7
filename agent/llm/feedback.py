"""What a prompt may say about a candidate: text a candidate controls never reaches a model verbatim.

- A source shown in a prompt loses its comments, and each string literal keeps at most STRING_CHARS
  characters; blank runs collapse.
- A failure is its kind (the sentence for it lives in prompts/task.j2), named numbers read from the
  evaluator's message by fixed patterns, a signal from a fixed set, and for build failures the lines of
  the candidate's own source they point at (comments stripped), with the compiler's words only where
  every quoted word in them already appears in that source.
- Nothing else of an evaluator message, compiler log, crash output or runner reply is passed on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from hgemm.core.record import normalize_source

STRING_CHARS = 120
LINE_CHARS = 160
MAX_LINES = 6
SIGNALS = ("SIGSEGV", "SIGBUS", "SIGABRT", "SIGFPE", "SIGILL", "SIGKILL", "SIGTRAP", "SIGSYS")
BUILD_KINDS = ("compile_error", "static_check", "object_audit", "bad_source")

# Numbers an evaluator message may carry, each read by one pattern into one named field.
_NUMBERS = (
    ("relative_error", r"relative error ([0-9.eE+-]+)"),
    ("relative_error_bound", r"relative error [0-9.eE+-]+ \(bound ([0-9.eE+-]+)\)"),
    ("max_error", r"max error ([0-9.eE+-]+)"),
    ("max_error_bound", r"max error [0-9.eE+-]+ \(bound ([0-9.eE+-]+)\)"),
    ("elements_unwritten", r"(\d+) (?:of \d+ )?elements of C never written"),
    ("elements_nonfinite", r"(\d+) elements of C are NaN or Inf"),
    ("timed_sample", r"timed sample (\d+)"),
    ("timed_launch", r"launch (\d+) of \d+"),
    ("launches_per_graph", r"launch \d+ of (\d+)"),
    ("rows_wrong", r"(\d+) rows of C disagree"),
    ("cuda_error", r"CUDA error (\d+)"),
    ("time_limit_s", r"past its (\d+) s limit"),
    ("time_us", r"([0-9.]+) us is below the physical floor"),
    ("floor_us", r"below the physical floor ([0-9.]+) us"),
)
_NUMBER = re.compile(r"^[0-9][0-9.eE+-]{0,15}$")
_COMPILER_LINE = re.compile(r"kernel\.cu\((\d+)\): (error|warning)[^:]*: (.*)")
_CHECK_LINE = re.compile(r"\bline (\d+)\b")
_QUOTED = re.compile(r"\"([^\"]*)\"|`([^`]*)`|'([^']*)'")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


@dataclass
class SafeFailure:
    """A failure as a prompt may show it."""

    hash: str
    kind: str
    facts: dict[str, str] = field(default_factory=dict)  # name -> a number or a fixed word
    lines: list[tuple[int, str, str]] = field(default_factory=list)  # (line, source line, compiler words)


def strip_comments(source: str) -> str:
    """`source` without comments, long string literals cut, trailing spaces and blank runs gone."""
    from hgemm.evaluator.static_check import _scan

    text = _scan(normalize_source(source)).no_comments

    def cut(m: re.Match) -> str:
        body = m.group(1)
        return m.group(0) if len(body) <= STRING_CHARS else f'"{body[:STRING_CHARS]}..."'

    text = re.sub(r'"((?:[^"\\\n]|\\.)*)"', cut, text)
    return normalize_source(text)


def _plain(text: str, limit: int) -> str:
    return _CONTROL.sub(" ", " ".join(text.split()))[:limit]


def _source_lines(source: str) -> list[str]:
    return strip_comments(source).split("\n") if source else []


def _words_from_source(words: str, source_text: str) -> str:
    """The compiler's words, kept only when everything they quote is spelled in the candidate's source."""
    for m in _QUOTED.finditer(words):
        quoted = next(g for g in m.groups() if g is not None)
        if quoted.strip() and quoted.strip() not in source_text:
            return ""
    return _plain(words, LINE_CHARS)


def safe_failure(kernel_hash: str, kind: str, message: str | None, source: str = "") -> SafeFailure:
    """The prompt's view of one failure (see the module docstring for what passes)."""
    message = message or ""
    facts: dict[str, str] = {}
    for name, pattern in _NUMBERS:
        m = re.search(pattern, message)
        if m and _NUMBER.match(m.group(1)):
            facts[name] = m.group(1)
    signal = next((s for s in SIGNALS if re.search(rf"\b{s}\b", message)), None)
    if signal:
        facts["signal"] = signal
    lines: list[tuple[int, str, str]] = []
    if kind in BUILD_KINDS and source:
        shown = _source_lines(source)
        plain_source = "\n".join(shown)
        seen: set[int] = set()
        for raw in re.split(r"\n|; ", message):
            m = _COMPILER_LINE.search(raw)
            number, words = (int(m.group(1)), _words_from_source(m.group(3), plain_source)) if m else (None, "")
            if number is None:
                c = _CHECK_LINE.search(raw)
                number = int(c.group(1)) if c else None
            if number is None or number in seen or not 1 <= number <= len(shown):
                continue
            seen.add(number)
            lines.append((number, _plain(shown[number - 1], LINE_CHARS), words))
            if len(lines) >= MAX_LINES:
                break
    return SafeFailure(kernel_hash, kind, facts, lines)
