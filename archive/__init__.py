"""The ranked archive of every attempt: kernels, evaluations, lineage, runs and LLM calls, in SQLite.

`Archive(path=None)` opens the default file under the state root (`$HGEMM_HOME/archive/archive.db`).
"""

from hgemm.archive.errors import ArchiveCorrupt, ArchiveError, ArchiveTooNew
from hgemm.archive.store import Archive, default_path

__all__ = ["Archive", "ArchiveCorrupt", "ArchiveError", "ArchiveTooNew", "default_path"]
