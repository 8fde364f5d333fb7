"""Errors the archive raises: all are `HgemmError`s, so the CLI prints them as one line."""

from __future__ import annotations

from hgemm.core.errors import HgemmError


class ArchiveError(HgemmError):
    """A problem with the archive's contents or a request against it (unknown id, ambiguous prefix)."""


class ArchiveCorrupt(ArchiveError):
    """The file is not an SQLite database, or SQLite reports it damaged. The file is never touched."""


class ArchiveTooNew(ArchiveError):
    """The database was written by a newer hgemm (a schema this version does not know)."""
