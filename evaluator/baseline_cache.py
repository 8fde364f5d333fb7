"""Baseline timings cached per (GPU, driver, shape, mode) under the state root.

`hgemm bench` reads them back unless asked for fresh ones. Candidate evaluations never use
the cache: they time the baselines again, interleaved with the candidate on the same inputs.
"""

from __future__ import annotations

import json
from pathlib import Path

from hgemm.core.paths import state_dir, write_text_atomic
from hgemm.core.shape import Shape


def _path(gpu_key: str) -> Path:
    return state_dir("baselines") / f"{gpu_key}-times.json"


def load(gpu_key: str, shape: Shape, mode: str) -> dict | None:
    path = _path(gpu_key)
    if not path.exists():
        return None
    return json.loads(path.read_text()).get(f"{shape}:{mode}")


def store(gpu_key: str, shape: Shape, mode: str, times: dict) -> None:
    path = _path(gpu_key)
    table = json.loads(path.read_text()) if path.exists() else {}
    table[f"{shape}:{mode}"] = times
    write_text_atomic(path, json.dumps(table, indent=1))
