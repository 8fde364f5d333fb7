"""The persisted FAISS index over archive records: a cache of the archive, never a source of truth.

Invariants:
- One vector per archive record (one attempt: kernel x shape x GPU x stage), id = the record's row id:
  `W_SHAPE * shape_features ++ W_TEXT * embedding(attempt_text)`; in shape-only mode (no model) the text
  part is absent. Text embeddings are unit length, so a query whose text part is zero ranks by shape alone.
- Beside it, `texts.faiss` holds each distinct attempt text once (inner product on unit vectors) and
  `entries.npy` maps record id -> text number, for text search.
- `meta.json` says what the files were built from (archive path, embedder, weights, SM count, feature
  version, highest record id, count). Anything that disagrees with the live archive or settings makes
  the cache stale, and `IndexStore.ensure()` rebuilds it; records newer than the highest id are appended.
- Files are written to temporaries and renamed, meta last: a crash leaves the old cache or a stale one.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from index.digest import attempt_text, kernel_digest
from index.embed import MODEL_NAME, TEXT_DIM, Embedder, enabled
from index.features import SHAPE_DIM, shape_features

VERSION = 1
W_SHAPE = 1.0
W_TEXT = 0.5
BATCH = 5000


def _use_gpu(index: faiss.Index) -> faiss.Index:
    """A GPU copy of `index` for searching when a GPU build of FAISS and a GPU are present."""
    try:
        if hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0:
            return faiss.index_cpu_to_gpu(faiss.StandardGpuResources(), 0, index)
    except Exception:  # a GPU build without a usable device: stay on the CPU
        pass
    return index


class IndexStore:
    def __init__(self, archive: Any, directory: Path, sm_count: int):
        self.archive = archive
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.sm_count = sm_count
        self.embedder = Embedder(self.dir / "embeddings.db")
        self.text_mode = enabled() and self.embedder.available
        self.dim = SHAPE_DIM + (TEXT_DIM if self.text_mode else 0)
        self.meta: dict[str, Any] = {}
        self.attempts: faiss.Index | None = None
        self.texts: faiss.Index | None = None
        self.text_list: list[str] = []
        self.text_no: dict[str, int] = {}
        self.entries = np.zeros((0, 2), dtype=np.int64)
        self._search_attempts: faiss.Index | None = None

    # ----- identity and staleness ----------------------------------------------------------------------

    def wanted_meta(self) -> dict[str, Any]:
        return {
            "version": VERSION,
            "archive": str(Path(self.archive.path).resolve()),
            "embedder": MODEL_NAME if self.text_mode else "none",
            "dim": self.dim,
            "w_shape": W_SHAPE,
            "w_text": W_TEXT,
            "sm_count": self.sm_count,
        }

    def stale_reason(self) -> str | None:
        """Why the persisted files cannot be used as they are (None: usable, maybe needing new records)."""
        meta_path = self.dir / "meta.json"
        if not meta_path.exists():
            return "no index yet"
        try:
            meta = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            return "unreadable meta.json"
        wanted = self.wanted_meta()
        for key, value in wanted.items():
            if meta.get(key) != value:
                return f"{key} changed ({meta.get(key)!r} -> {value!r})"
        max_id, count = self.archive.max_record_id(), self.archive.record_count()
        if meta.get("max_id", 0) > max_id or meta.get("count", 0) > count:
            return "the archive lost records the index has"
        if count - meta.get("count", 0) != self._count_after(meta.get("max_id", 0)):
            return "the archive gained records below the indexed range"
        for name in ("attempts.faiss", "texts.faiss", "entries.npy", "texts.json"):
            if not (self.dir / name).exists():
                return f"{name} missing"
        return None

    def _count_after(self, max_id: int) -> int:
        return self.archive.execute("SELECT count(*) FROM records WHERE id > ?", (max_id,))[0][0]

    # ----- load, build, append, save ------------------------------------------------------------------

    def ensure(self) -> dict[str, Any]:
        """Load the persisted cache, rebuilding it if stale, then append new records. Returns a summary."""
        reason = self.stale_reason()
        if reason is None:
            try:
                self._load()
            except Exception as e:  # damaged cache files: rebuild rather than fail
                reason = f"could not load ({e})"
        if reason is not None:
            return {"rebuilt": True, "reason": reason, **self.rebuild()}
        added = self.append()
        return {"rebuilt": False, "reason": None, "added": added, "total": self.attempts.ntotal}

    def _empty(self) -> None:
        self.attempts = faiss.IndexIDMap2(faiss.IndexFlatL2(self.dim))
        self.texts = faiss.IndexIDMap2(faiss.IndexFlatIP(TEXT_DIM if self.text_mode else 1))
        self.text_list, self.text_no = [], {}
        self.entries = np.zeros((0, 2), dtype=np.int64)
        self.meta = {**self.wanted_meta(), "max_id": 0, "count": 0}
        self._search_attempts = None

    def rebuild(self) -> dict[str, Any]:
        self._empty()
        added = self.append(save=False)
        self.save()
        return {"added": added, "total": self.attempts.ntotal}

    def _load(self) -> None:
        self.meta = json.loads((self.dir / "meta.json").read_text())
        self.attempts = faiss.read_index(str(self.dir / "attempts.faiss"))
        self.texts = faiss.read_index(str(self.dir / "texts.faiss"))
        self.entries = np.load(self.dir / "entries.npy")
        self.text_list = json.loads((self.dir / "texts.json").read_text())
        self.text_no = {t: i for i, t in enumerate(self.text_list)}
        if self.attempts.ntotal != self.meta["count"] or len(self.entries) != self.meta["count"]:
            raise ValueError("file sizes disagree with meta.json")
        self._search_attempts = None

    def append(self, save: bool = True) -> int:
        """Add every record newer than the highest indexed id; returns how many."""
        added = 0
        while True:
            rows = self.archive.execute(
                "SELECT r.id, r.M, r.N, r.K, r.stage, r.correct, r.failure_kind, r.failure_message, "
                "json_extract(r.record, '$.ncu') AS ncu, k.family, k.params, k.source, "
                "(SELECT speedup_best FROM evaluations x WHERE x.record_id = r.id AND x.mode = 'offline') "
                "AS offline_speedup FROM records r JOIN kernels k ON k.hash = r.kernel "
                "WHERE r.id > ? ORDER BY r.id LIMIT ?",
                (self.meta["max_id"], BATCH),
            )
            if not rows:
                break
            self._add_rows([dict(r) for r in rows])
            added += len(rows)
        if added and save:
            self.save()
        return added

    def _add_rows(self, rows: list[dict[str, Any]]) -> None:
        digests: dict[tuple, str] = {}  # per distinct kernel: scanning the source is the slow part
        texts = []
        for r in rows:
            key = (r["family"], r["params"], r["source"])
            if key not in digests:
                params = json.loads(r["params"]) if r["params"] else None
                digests[key] = kernel_digest(r["family"], params, r["source"])
            ncu = json.loads(r["ncu"]) if r["ncu"] else None
            texts.append(attempt_text(r, ncu, digest=digests[key]))
        ids = np.asarray([r["id"] for r in rows], dtype=np.int64)
        shape = np.stack([shape_features(r["M"], r["N"], r["K"], self.sm_count) for r in rows]) * W_SHAPE
        new_texts = [t for t in dict.fromkeys(texts) if t not in self.text_no]
        if self.text_mode:
            emb_new = self.embedder.embed(new_texts) if new_texts else np.zeros((0, TEXT_DIM), np.float32)
        for t in new_texts:
            self.text_no[t] = len(self.text_list)
            self.text_list.append(t)
        numbers = np.asarray([self.text_no[t] for t in texts], dtype=np.int64)
        if self.text_mode:
            if new_texts:
                self.texts.add_with_ids(
                    emb_new, np.asarray([self.text_no[t] for t in new_texts], dtype=np.int64)
                )
            uniq = sorted(set(numbers.tolist()))
            lookup = {n: self.texts.reconstruct(int(n)) for n in uniq}
            text_vecs = np.stack([lookup[int(n)] for n in numbers])
            vecs = np.hstack([shape, W_TEXT * text_vecs]).astype(np.float32)
        else:
            vecs = shape.astype(np.float32)
        self.attempts.add_with_ids(np.ascontiguousarray(vecs), ids)
        self.entries = np.vstack([self.entries, np.stack([ids, numbers], axis=1)])
        self.meta["max_id"] = int(ids.max())
        self.meta["count"] = int(self.attempts.ntotal)
        self._search_attempts = None

    def save(self) -> None:
        def put(name: str, write) -> None:
            tmp = self.dir / f".{name}.tmp"
            write(tmp)
            os.replace(tmp, self.dir / name)

        (self.dir / "meta.json").unlink(missing_ok=True)  # stale until the new meta lands
        put("attempts.faiss", lambda p: faiss.write_index(self.attempts, str(p)))
        put("texts.faiss", lambda p: faiss.write_index(self.texts, str(p)))
        put("entries.npy", lambda p: np.save(open(p, "wb"), self.entries))
        put("texts.json", lambda p: p.write_text(json.dumps(self.text_list)))
        put("meta.json", lambda p: p.write_text(json.dumps(self.meta, indent=1)))

    # ----- searching -----------------------------------------------------------------------------------

    def query_vector(self, M: int, N: int, K: int, text_vec: np.ndarray | None = None) -> np.ndarray:
        q = np.zeros((1, self.dim), dtype=np.float32)
        q[0, :SHAPE_DIM] = W_SHAPE * shape_features(M, N, K, self.sm_count)
        if text_vec is not None and self.text_mode:
            q[0, SHAPE_DIM:] = W_TEXT * text_vec
        return q

    def search_attempts(self, q: np.ndarray, k: int) -> list[tuple[int, float]]:
        if self.attempts is None or self.attempts.ntotal == 0:
            return []
        if self._search_attempts is None:
            self._search_attempts = _use_gpu(self.attempts)
        dist, ids = self._search_attempts.search(q, min(k, self.attempts.ntotal))
        return [(int(i), float(d)) for i, d in zip(ids[0], dist[0]) if i >= 0]

    def search_texts(self, text_vec: np.ndarray, k: int) -> list[tuple[int, float]]:
        if self.texts is None or self.texts.ntotal == 0 or not self.text_mode:
            return []
        sims, nos = self.texts.search(text_vec.reshape(1, -1).astype(np.float32), min(k, self.texts.ntotal))
        return [(int(n), float(s)) for n, s in zip(nos[0], sims[0]) if n >= 0]

    def text_for(self, record_id: int) -> str | None:
        """The attempt text of an indexed record (entries are kept in increasing id order)."""
        ids = self.entries[:, 0]
        i = int(np.searchsorted(ids, record_id))
        if i < len(ids) and ids[i] == record_id:
            return self.text_list[int(self.entries[i, 1])]
        return None

    def records_for_text(self, number: int) -> list[int]:
        """Record ids sharing one text, newest first."""
        return sorted(self.entries[self.entries[:, 1] == number, 0].tolist(), reverse=True)

    def warn_if_shape_only(self) -> None:
        if not self.text_mode and enabled():
            warnings.warn("index built from shape features only (no embedding model)", stacklevel=3)
