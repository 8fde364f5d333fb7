"""No waste: an LLM candidate already tried, or the same as one but for layout, is not compiled again.

- `canonical_hash(source, level)` hashes the source with every run of whitespace collapsed and, at level
  "code" (the default), comments removed: two sources with the same "code" hash compile to the same kernel
  (near-duplicates: a re-indented or re-commented copy of a parent or of an earlier attempt). Level
  "layout" keeps comments (for worlds where comments matter, such as the stand-in evaluator's markers);
  "off" turns near-duplicate rejection off (exact duplicates are still dropped).
- `Known` is the set of kernel and canonical hashes already tried on a shape: every attempt of the archive
  on that shape (all runs, read once per shape in the loop's thread) and this run's results. `seen(source)`
  is True for a duplicate (same kernel hash) or a near-duplicate (same canonical hash).
"""

from __future__ import annotations

import hashlib
import re
import threading
from typing import Any

from hgemm.agent.llm.scrub import strip_comments

from hgemm.core.record import kernel_hash

_SPACE = re.compile(r"\s+")


LEVELS = ("code", "layout", "off")


def canonical_hash(source: str, level: str = "code") -> str:
    text = strip_comments(source) if level == "code" else source
    text = _SPACE.sub(" ", text).strip()
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Known:
    def __init__(self, level: str = "code") -> None:
        if level not in LEVELS:
            raise ValueError(f"near-duplicate level must be one of {LEVELS}, got {level!r}")
        self.level = level
        self.hashes: set[str] = set()
        self.canonical: set[str] = set()
        self._shapes: set[tuple[int, int, int]] = set()
        self._lock = threading.Lock()

    def add(self, source: str) -> None:
        with self._lock:
            self.hashes.add(kernel_hash(source))
            if self.level != "off":
                self.canonical.add(canonical_hash(source, self.level))

    def load_shape(self, archive: Any, shape: tuple[int, int, int]) -> None:
        """Every kernel the archive tried on `shape` (once per shape; call from the archive's thread)."""
        if archive is None or shape in self._shapes:
            return
        self._shapes.add(shape)
        rows = archive.execute(
            "SELECT DISTINCT k.hash AS hash, k.source AS source FROM records r JOIN kernels k ON k.hash = r.kernel "
            "WHERE r.M = ? AND r.N = ? AND r.K = ?",
            shape,
        )
        for row in rows:
            self.add(row["source"])

    def kind(self, source: str) -> str | None:
        """ "duplicate", "near_duplicate" or None (new)."""
        with self._lock:
            if kernel_hash(source) in self.hashes:
                return "duplicate"
            if self.level != "off" and canonical_hash(source, self.level) in self.canonical:
                return "near_duplicate"
        return None
