"""Opening the archive's SQLite file safely, and the single-writer discipline.

Invariants:
- A file that is not SQLite (wrong header) or that SQLite reports damaged raises `ArchiveCorrupt` and is
  left byte-for-byte untouched: the header is checked before connecting, and nothing is written (no WAL
  switch, no migration) until reads have succeeded.
- Every write runs inside `Writer.transaction()`: an exclusive `flock` on `<db>.lock` (one writer across
  processes, waiting rather than failing), a thread lock (one writer per process), then
  `BEGIN IMMEDIATE` ... `COMMIT`, or `ROLLBACK` on error. A killed writer's lock is released by the kernel.
- WAL journal with `synchronous=NORMAL`: a committed transaction survives the death of the process
  (SIGKILL included); `HGEMM_ARCHIVE_SYNC=full` also makes it survive power loss, at a write-speed cost.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from hgemm.archive.errors import ArchiveCorrupt

try:  # POSIX; elsewhere SQLite's own busy handling is the only arbiter
    import fcntl
except ImportError:  # pragma: no cover
    fcntl = None  # type: ignore[assignment]

SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 120_000


def check_header(path: Path) -> None:
    """Raise `ArchiveCorrupt` unless `path` is absent, empty, or starts with the SQLite header."""
    if not path.exists():
        return
    if not path.is_file():
        raise ArchiveCorrupt(f"{path} is not a regular file")
    with open(path, "rb") as f:
        head = f.read(len(SQLITE_HEADER))
    if head and head != SQLITE_HEADER[: len(head)] or 0 < len(head) < len(SQLITE_HEADER):
        raise ArchiveCorrupt(f"{path} is not an SQLite database; it was left untouched")


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), rows as `sqlite3.Row`."""
    check_header(path)
    if readonly:
        uri = f"file:{path}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    else:
        conn = sqlite3.connect(
            str(path), isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False
        )
    conn.row_factory = sqlite3.Row
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        conn.execute("PRAGMA user_version").fetchone()
    except sqlite3.DatabaseError as e:
        conn.close()
        raise ArchiveCorrupt(f"{path} is not a usable SQLite database ({e}); it was left untouched") from e
    return conn


def configure(conn: sqlite3.Connection) -> None:
    """Switch on WAL and the durability level; call once reads have shown the file is sound."""
    conn.execute("PRAGMA journal_mode = WAL")
    sync = "FULL" if os.environ.get("HGEMM_ARCHIVE_SYNC", "").lower() == "full" else "NORMAL"
    conn.execute(f"PRAGMA synchronous = {sync}")
    conn.execute("PRAGMA foreign_keys = OFF")


class Writer:
    """Serialises writers: across processes through a lock file, within one through a thread lock."""

    def __init__(self, conn: sqlite3.Connection, db_path: Path):
        self.conn = conn
        self.lock_path = db_path.with_name(db_path.name + ".lock")
        self._thread_lock = threading.RLock()
        self._depth = 0

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        with self._thread_lock:
            if self._depth:  # nested: join the open transaction
                self._depth += 1
                try:
                    yield self.conn
                finally:
                    self._depth -= 1
                return
            with self._file_lock():
                self.conn.execute("BEGIN IMMEDIATE")
                self._depth = 1
                try:
                    yield self.conn
                except BaseException:
                    self.conn.execute("ROLLBACK")
                    raise
                else:
                    self.conn.execute("COMMIT")
                finally:
                    self._depth = 0

    @contextlib.contextmanager
    def _file_lock(self) -> Iterator[None]:
        if fcntl is None:
            yield
            return
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
