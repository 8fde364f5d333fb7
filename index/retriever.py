"""`Retriever`: what the agent asks the index — similar shapes' best kernels, nearby attempts, text search.

Invariants:
- The first query syncs the index with the archive (rebuilding a missing or stale cache, appending new
  records); `sync()` does it again on demand. Results always come from the archive's current rows.
- `similar_shapes` returns, for the k distinct ranked shapes nearest in shape-feature space (the query
  shape itself first when the archive has it), the best kernel per mode with its speedups.
- `history` and `query` return the exact k nearest attempts (failures included; of one GPU when `gpu` is
  given), nearest first then newest, each with its attempt text and NCU metrics.
- Without an embedding model the index is shape-only; `search_text` then ranks attempt texts by shared
  words instead of embeddings, with a warning.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import faiss
import numpy as np
from hgemm.index.embed import load_model
from hgemm.index.features import DEFAULT_SM_COUNT, shape_features, shapes_matrix
from hgemm.index.store import IndexStore

from hgemm.core.paths import state_dir
from hgemm.core.record import MODES
from hgemm.core.shape import Shape

_WORD = re.compile(r"[a-z0-9][a-z0-9.+\-]*")


class Retriever:
    def __init__(self, archive: Any, gpu_sm_count: int = DEFAULT_SM_COUNT, path: Path | None = None):
        self.archive = archive
        self.sm_count = int(gpu_sm_count or DEFAULT_SM_COUNT)
        self.store = IndexStore(archive, Path(path) if path else state_dir("index"), self.sm_count)
        self._synced = False
        self._shapes: dict[str | None, tuple[list[Shape], faiss.Index]] = {}

    # ----- keeping up with the archive -----------------------------------------------------------------

    def sync(self) -> dict[str, Any]:
        """Bring the index up to date with the archive (rebuild when stale). Returns what happened."""
        summary = self.store.ensure()
        self._synced = True
        self._shapes.clear()
        return summary

    def rebuild(self) -> dict[str, Any]:
        summary = self.store.rebuild()
        self._synced = True
        self._shapes.clear()
        return summary

    def _ready(self) -> None:
        if not self._synced:
            self.sync()

    @property
    def text_mode(self) -> bool:
        return self.store.text_mode

    # ----- similar shapes ------------------------------------------------------------------------------

    def _shape_index(self, gpu: str | None) -> tuple[list[Shape], faiss.Index]:
        if gpu not in self._shapes:
            sql = "SELECT DISTINCT M, N, K FROM evaluations WHERE ranked = 1" + (
                " AND gpu = ?" if gpu else ""
            )
            shapes = [Shape(*r) for r in self.archive.execute(sql, (gpu,) if gpu else ())]
            idx = faiss.IndexFlatL2(shapes_matrix([]).shape[1])
            if shapes:
                idx.add(shapes_matrix(shapes, self.sm_count))
            self._shapes[gpu] = (shapes, idx)
        return self._shapes[gpu]

    def gpus(self) -> list[str]:
        """The GPUs with ranked results in the archive."""
        rows = self.archive.execute("SELECT DISTINCT gpu FROM evaluations WHERE ranked = 1 AND gpu IS NOT NULL")
        return sorted(r[0] for r in rows)

    def similar_shapes(self, shape: Shape, gpu: str | None = None, k: int = 5) -> list[dict[str, Any]]:
        """Best kernels of the k nearest ranked shapes: hash, family, params, source, shape, per-mode
        speedup_best / median_us / best_baseline, and the shape distance."""
        shape = Shape.of(shape)
        self._ready()
        shapes, idx = self._shape_index(gpu)
        if not shapes:
            return []
        q = shape_features(shape, self.sm_count).reshape(1, -1)
        dist, nos = idx.search(q, min(k, len(shapes)))
        out = []
        for d, n in zip(dist[0], nos[0]):
            if n < 0:
                continue
            near = shapes[n]
            per_mode = {m: self.archive.best(near, gpu=gpu, mode=m) for m in MODES}
            lead = per_mode.get("offline") or next(v for v in per_mode.values() if v)
            out.append(
                {
                    "kernel_hash": lead["kernel"],
                    "family": lead["family"],
                    "params": lead["params"],
                    "proposer": lead["proposer"],
                    "source": lead["source"],
                    "M": near.M,
                    "N": near.N,
                    "K": near.K,
                    "gpu": lead["gpu"],
                    "distance": float(d),
                    "speedup_best": {m: b["speedup_best"] for m, b in per_mode.items() if b},
                    "median_us": {m: b["median_us"] for m, b in per_mode.items() if b},
                    "best_baseline": {m: b["best_baseline"] for m, b in per_mode.items() if b},
                    "kernel_by_mode": {m: b["kernel"] for m, b in per_mode.items() if b},
                }
            )
        return out

    # ----- attempts near a shape -----------------------------------------------------------------------

    def history(self, shape: Shape, gpu: str | None = None, k: int = 10) -> list[dict[str, Any]]:
        """Attempts (failures included) on this and the nearest shapes, with attempt text and NCU metrics."""
        shape = Shape.of(shape)
        self._ready()
        return self._attempts(self.store.search_attempts(shape, k, gpu=gpu))

    def query(self, shape: Shape, text: str, gpu: str | None = None, k: int = 10) -> list[dict[str, Any]]:
        """Attempts near a shape AND a description (both halves of the vector); shape-only without a model."""
        shape = Shape.of(shape)
        self._ready()
        vec = self._embed_query(text)
        return self._attempts(self.store.search_attempts(shape, k, text_vec=vec, gpu=gpu))

    def _attempts(self, hits: list[tuple[int, float]], key: str = "distance") -> list[dict[str, Any]]:
        """The archive rows of `hits` in their order, each with its value under `key` and its attempt text."""
        found = self.archive.records_by_id([i for i, _ in hits])
        out = []
        for rid, value in hits:
            row = found.get(rid)
            if row is None:
                continue
            row[key] = value
            row["kernel_hash"] = row["kernel"]
            row["text"] = self.store.text_for(rid)
            out.append(row)
        return out

    # ----- text search ---------------------------------------------------------------------------------

    def _embed_query(self, text: str) -> np.ndarray | None:
        if not self.store.text_mode or load_model() is None:
            return None
        return self.store.embedder.embed_query(text)

    def search_text(self, query: str, k: int = 10) -> list[dict[str, Any]]:
        """Attempts whose description best matches `query` (embedding similarity; word overlap without a model)."""
        self._ready()
        vec = self._embed_query(query)
        if vec is not None:
            text_hits = self.store.search_texts(vec, k)
        else:
            warnings.warn("no embedding model: text search falls back to word overlap", stacklevel=2)
            text_hits = self._word_overlap(query, k)
        hits: list[tuple[int, float]] = []
        for number, score in text_hits:
            for rid in self.store.records_for_text(number):
                hits.append((rid, score))
                if len(hits) >= k:
                    break
            if len(hits) >= k:
                break
        return self._attempts(hits, key="score")

    def _word_overlap(self, query: str, k: int) -> list[tuple[int, float]]:
        words = set(_WORD.findall(query.lower()))
        if not words:
            return []
        scored = []
        for n, text in enumerate(self.store.text_list):
            have = set(_WORD.findall(text.lower()))
            s = len(words & have) / len(words)
            if s > 0:
                scored.append((n, s))
        scored.sort(key=lambda x: -x[1])
        return scored[:k]
