"""The one state root for everything hgemm writes.

`HGEMM_HOME` names it (default `~/.hgemm`). Compile cache, archive, index, GPU facts
and logs all live below it; tests point it at a temporary directory.
"""

from __future__ import annotations

import os
from pathlib import Path


def state_root() -> Path:
    root = Path(os.environ.get("HGEMM_HOME") or Path.home() / ".hgemm").expanduser()
    root.mkdir(parents=True, exist_ok=True)
    return root


def state_dir(name: str) -> Path:
    """A named sub-directory of the state root (created on demand): cache, archive, index, gpu, logs."""
    path = state_root() / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` whole or not at all: a temporary file beside it, then a rename."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
