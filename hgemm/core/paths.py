"""The one state root for everything hgemm writes.

`HGEMM_HOME` names it (default `~/.hgemm`). Compile cache, archive, index, GPU facts
and logs all live below it; tests point it at a temporary directory.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hgemm.core.errors import BadInput


def _make_dir(path: Path) -> Path:
    """Create `path` (and parents); a path that cannot be a writable folder is a `BadInput`, not a traceback."""
    if path.exists() and not path.is_dir():
        raise BadInput(f"cannot use {path} as hgemm's state folder (HGEMM_HOME): it is a file, not a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BadInput(f"cannot use {path} as hgemm's state folder (HGEMM_HOME): {e.strerror}") from e
    if not os.access(path, os.W_OK | os.X_OK):
        raise BadInput(f"cannot use {path} as hgemm's state folder (HGEMM_HOME): not writable")
    return path


def state_root() -> Path:
    return _make_dir(Path(os.environ.get("HGEMM_HOME") or Path.home() / ".hgemm").expanduser())


def state_dir(name: str) -> Path:
    """A named sub-directory of the state root (created on demand): cache, archive, index, gpu, logs."""
    return _make_dir(state_root() / name)


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` whole or not at all: a temporary file of this writer's own beside it, then a
    rename. Writers racing on one path (two GPU workers sharing a state root) each leave a whole file; the
    last rename wins."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # as a plain write would leave it (mkstemp makes it private)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
