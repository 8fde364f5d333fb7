"""The compile cache's size cap: least-recently-used entries go first.

- An entry is a folder `cache/<2 hex>/<key>` holding `meta.json` (and `kernel.so` when built); a hit
  touches `meta.json`, so its modification time is the entry's last use.
- `evict` removes whole entries, oldest use first, until the cache is under its cap; it never removes an
  entry used in the last PROTECT_S seconds (a library handed to a runner that has not loaded it yet), nor
  build folders in progress (`tmp-*`, which the compile path sweeps itself).
- The cap is `HGEMM_CACHE_BYTES` (bytes) or DEFAULT_CAP_BYTES.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

DEFAULT_CAP_BYTES = 2 << 30
PROTECT_S = 600.0


def cap_bytes() -> int:
    value = os.environ.get("HGEMM_CACHE_BYTES")
    try:
        return max(0, int(value)) if value else DEFAULT_CAP_BYTES
    except ValueError:
        return DEFAULT_CAP_BYTES


def touch(entry: Path) -> None:
    """Mark an entry as used now."""
    try:
        os.utime(entry / "meta.json")
    except OSError:
        pass


def _size(folder: Path) -> int:
    total = 0
    for f in folder.iterdir():
        try:
            total += f.stat().st_size
        except OSError:
            pass
    return total


def entries(root: Path) -> list[tuple[float, int, Path]]:
    """(last use, bytes, folder) of every complete entry under `root`."""
    found = []
    for shard in root.iterdir():
        if not shard.is_dir() or len(shard.name) != 2:
            continue
        for entry in shard.iterdir():
            meta = entry / "meta.json"
            try:
                found.append((meta.stat().st_mtime, _size(entry), entry))
            except OSError:
                continue
    return found


def evict(root: Path, cap: int | None = None, now: float | None = None) -> list[Path]:
    """Remove least-recently-used entries until `root` holds at most `cap` bytes; return what went."""
    cap = cap_bytes() if cap is None else cap
    now = time.time() if now is None else now
    found = sorted(entries(root))
    total = sum(size for _, size, _ in found)
    removed = []
    for used, size, entry in found:
        if total <= cap:
            break
        if now - used < PROTECT_S:
            continue
        trash = entry.with_name(f"{entry.name}.evicted-{os.getpid()}-{time.monotonic_ns()}")
        try:
            os.rename(entry, trash)  # atomic: a reader sees the entry whole or not at all
        except OSError:
            continue
        shutil.rmtree(trash, ignore_errors=True)
        total -= size
        removed.append(entry)
    return removed
