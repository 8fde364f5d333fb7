"""The persisted retrieval index over archive records: a cache of the archive, never a source of truth.

- A record (one attempt: kernel x shape x GPU x stage) is the vector `W_SHAPE * shape_features ++ W_TEXT *
  embedding(attempt_text)`, without the text part in shape-only mode (no model).
- Vectors are stored factorised, never per record: each distinct shape once (`shapes.json`), each distinct
  attempt text's unit embedding once (`texts.faiss`, `texts.json`), GPU names in `gpus.json`, and one row per
  record in `entries.npy` (record id, text, shape and GPU numbers), in increasing id order.
- Search is exact: a record's squared L2 distance is its shape's distance plus W_TEXT^2 times its text's
  (2 - 2 cos; 1 when the query has no text), each computed once per distinct shape and text, then gathered
  per record. Ties (to 4 decimals) go to the newest record.
- `meta.json` says what the files were built from (archive, embedder, weights, SM count, format version,
  highest record id); anything that disagrees with the live archive or settings makes the cache stale and
  `IndexStore.ensure()` rebuilds it. Records newer than the highest id are appended.
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
from hgemm.index.digest import attempt_text, kernel_digest
from hgemm.index.embed import MODEL_NAME, TEXT_DIM, Embedder, enabled
from hgemm.index.features import SHAPE_DIM, shape_features

from hgemm.core.shape import Shape


def on_gpu() -> bool:
    """True when the installed FAISS is a GPU build and sees a GPU (the default install is faiss-cpu)."""
    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


VERSION = 2
W_SHAPE = 1.0
W_TEXT = 0.5
BATCH = 5000
FILES = ("texts.faiss", "texts.json", "entries.npy", "shapes.json", "gpus.json")
ID, TEXT, SHAPE, GPU = range(4)  # the columns of `entries`


class IndexStore:
    def __init__(self, archive: Any, directory: Path, sm_count: int):
        # The searches here are small (thousands of vectors): one thread is as fast, and parallel FAISS
        # leaves OpenMP threads spinning that slow the query embedding's forward pass on a small CPU.
        faiss.omp_set_num_threads(1)
        self.archive = archive
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.sm_count = sm_count
        self.embedder = Embedder(self.dir / "embeddings.db")
        self.text_mode = enabled() and self.embedder.available
        self.dim = SHAPE_DIM + (TEXT_DIM if self.text_mode else 0)  # of the (virtual) per-record vector
        self.meta: dict[str, Any] = {}
        self.texts: faiss.Index | None = None
        self.text_list: list[str] = []
        self.text_no: dict[str, int] = {}
        self.shape_list: list[tuple[int, int, int]] = []
        self.shape_no: dict[tuple[int, int, int], int] = {}
        self.gpu_list: list[str | None] = []
        self.gpu_no: dict[str | None, int] = {}
        self.entries = np.zeros((0, 4), dtype=np.int64)
        self._derived: dict[str, Any] = {}

    @property
    def count(self) -> int:
        return len(self.entries)

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
        max_id, count, after = self._counts(meta.get("max_id", 0))
        if meta.get("max_id", 0) > max_id or meta.get("count", 0) > count:
            return "the archive lost records the index has"
        if count - meta.get("count", 0) != after:
            return "the archive gained records below the indexed range"
        for name in FILES:
            if not (self.dir / name).exists():
                return f"{name} missing"
        return None

    def _counts(self, max_id: int) -> tuple[int, int, int]:
        """The archive's highest record id, its record count, and how many records lie above `max_id`, read in
        one statement: one snapshot, though another process (a sweep's driver) may commit records meanwhile."""
        row = self.archive.execute(
            "SELECT coalesce(max(id), 0), count(*), count(CASE WHEN id > ? THEN 1 END) FROM records",
            (max_id,),
        )[0]
        return int(row[0]), int(row[1]), int(row[2])

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
        return {"rebuilt": False, "reason": None, "added": added, "total": self.count}

    def _empty(self) -> None:
        self.texts = faiss.IndexIDMap2(faiss.IndexFlatIP(TEXT_DIM if self.text_mode else 1))
        self.text_list, self.text_no = [], {}
        self.shape_list, self.shape_no = [], {}
        self.gpu_list, self.gpu_no = [], {}
        self.entries = np.zeros((0, 4), dtype=np.int64)
        self.meta = {**self.wanted_meta(), "max_id": 0, "count": 0}
        self._derived = {}

    def rebuild(self) -> dict[str, Any]:
        self._empty()
        added = self.append(save=False)
        self.save()
        return {"added": added, "total": self.count}

    def _load(self) -> None:
        self.meta = json.loads((self.dir / "meta.json").read_text())
        self.texts = faiss.read_index(str(self.dir / "texts.faiss"))
        self.entries = np.load(self.dir / "entries.npy")
        self.text_list = json.loads((self.dir / "texts.json").read_text())
        self.text_no = {t: i for i, t in enumerate(self.text_list)}
        self.shape_list = [tuple(s) for s in json.loads((self.dir / "shapes.json").read_text())]
        self.shape_no = {s: i for i, s in enumerate(self.shape_list)}
        self.gpu_list = json.loads((self.dir / "gpus.json").read_text())
        self.gpu_no = {g: i for i, g in enumerate(self.gpu_list)}
        self._derived = {}
        n = self.meta["count"]
        if self.entries.shape != (n, 4) or (self.text_mode and self.texts.ntotal != len(self.text_list)):
            raise ValueError("file sizes disagree with meta.json")
        if n and (
            self.entries[:, TEXT].max() >= len(self.text_list)
            or self.entries[:, SHAPE].max() >= len(self.shape_list)
            or self.entries[:, GPU].max() >= len(self.gpu_list)
        ):
            raise ValueError("entries name texts, shapes or GPUs the files do not have")

    def append(self, save: bool = True) -> int:
        """Add every record newer than the highest indexed id; returns how many."""
        added = 0
        while True:
            rows = self.archive.execute(
                "SELECT r.id, r.M, r.N, r.K, r.gpu, r.stage, r.correct, r.failure_kind, r.failure_message, "
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

    @staticmethod
    def _number(value: Any, numbers: dict, values: list) -> int:
        n = numbers.get(value)
        if n is None:
            n = numbers[value] = len(values)
            values.append(value)
        return n

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
        new_texts = [t for t in dict.fromkeys(texts) if t not in self.text_no]
        if self.text_mode and new_texts:
            emb_new = self.embedder.embed(new_texts)
            first = len(self.text_list)
            self.texts.add_with_ids(emb_new, np.arange(first, first + len(new_texts), dtype=np.int64))
        for t in new_texts:
            self._number(t, self.text_no, self.text_list)
        block = np.asarray(
            [
                (
                    r["id"],
                    self.text_no[t],
                    self._number((r["M"], r["N"], r["K"]), self.shape_no, self.shape_list),
                    self._number(r["gpu"], self.gpu_no, self.gpu_list),
                )
                for r, t in zip(rows, texts)
            ],
            dtype=np.int64,
        )
        self.entries = np.vstack([self.entries, block])
        self.meta["max_id"] = int(block[:, ID].max())
        self.meta["count"] = len(self.entries)
        self._derived = {}

    def save(self) -> None:
        def put(name: str, write) -> None:
            tmp = self.dir / f".{name}.tmp"
            write(tmp)
            os.replace(tmp, self.dir / name)

        (self.dir / "meta.json").unlink(missing_ok=True)  # stale until the new meta lands
        (self.dir / "attempts.faiss").unlink(missing_ok=True)  # the per-record index of format 1
        put("texts.faiss", lambda p: faiss.write_index(self.texts, str(p)))
        put("entries.npy", lambda p: np.save(open(p, "wb"), self.entries))
        put("texts.json", lambda p: p.write_text(json.dumps(self.text_list)))
        put("shapes.json", lambda p: p.write_text(json.dumps(self.shape_list)))
        put("gpus.json", lambda p: p.write_text(json.dumps(self.gpu_list)))
        put("meta.json", lambda p: p.write_text(json.dumps(self.meta, indent=1)))

    # ----- searching -----------------------------------------------------------------------------------

    def _get(self, name: str) -> Any:
        """Arrays derived from the loaded files, computed once per load or append."""
        if name not in self._derived:
            if name == "shape_features":
                value = W_SHAPE * np.stack(
                    [shape_features(Shape(*s), self.sm_count) for s in self.shape_list]
                    or [np.zeros(SHAPE_DIM, np.float32)]
                )
            elif name == "text_matrix":  # row i = text number i (texts were added with ids 0, 1, ...)
                n = self.texts.ntotal
                value = faiss.downcast_index(self.texts.index).reconstruct_n(0, n)
            elif name == "by_text":  # record rows grouped by text number, newest first within a text
                order = np.lexsort((-self.entries[:, ID], self.entries[:, TEXT]))
                starts = np.searchsorted(self.entries[order, TEXT], np.arange(len(self.text_list) + 1))
                value = (self.entries[order, ID], starts)
            else:
                raise KeyError(name)
            self._derived[name] = value
        return self._derived[name]

    def search_attempts(
        self, shape: Shape, k: int, text_vec: np.ndarray | None = None, gpu: str | None = None
    ) -> list[tuple[int, float]]:
        """The k records nearest to (shape, text) as (record id, squared L2 distance), nearest first and,
        among equal distances (4 decimals), newest first; only records of `gpu` when it is given."""
        if self.count == 0 or k <= 0:
            return []
        rows = self.entries
        if gpu is not None:
            if gpu not in self.gpu_no:
                return []
            rows = rows[rows[:, GPU] == self.gpu_no[gpu]]
        q = W_SHAPE * shape_features(shape, self.sm_count)
        shape_d = ((self._get("shape_features") - q) ** 2).sum(axis=1)
        d = shape_d[rows[:, SHAPE]]
        if self.text_mode:
            if text_vec is None:  # a zero text part: every unit text is at distance 1
                d = d + W_TEXT**2
            else:
                cos = self._cosines(text_vec)
                d = d + W_TEXT**2 * np.maximum(0.0, 2.0 - 2.0 * cos)[rows[:, TEXT]]
        d = d.astype(np.float64)
        if len(d) > k:  # candidates: everything within rounding of the k-th distance
            kth = np.partition(d, k - 1)[k - 1]
            keep = np.flatnonzero(d <= kth + 1e-4)
        else:
            keep = np.arange(len(d))
        ids = rows[keep, ID]
        order = np.lexsort((-ids, np.round(d[keep], 4)))[:k]
        return [(int(ids[i]), float(d[keep][i])) for i in order]

    def _text_searcher(self) -> faiss.Index:
        """The text index to search: a GPU copy when a GPU build of FAISS sees a GPU, else the CPU one.
        The CPU index stays the one that is persisted and appended to; the copy follows its size."""
        if not on_gpu():
            return self.texts
        cached = getattr(self, "_gpu_texts", None)
        if cached is None or cached[0] != self.texts.ntotal:
            res = faiss.StandardGpuResources()
            cached = (self.texts.ntotal, faiss.index_cpu_to_gpu(res, 0, self.texts), res)
            self._gpu_texts = cached
        return cached[1]

    def _cosines(self, text_vec: np.ndarray) -> np.ndarray:
        """The query's cosine to every distinct text, indexed by text number. `einsum` (no BLAS threads:
        those, like OpenMP's, keep spinning after a call and slow the next query embedding)."""
        q = np.asarray(text_vec, dtype=np.float32).reshape(-1)
        return np.einsum("ij,j->i", self._get("text_matrix"), q).astype(np.float64)

    def search_texts(self, text_vec: np.ndarray, k: int) -> list[tuple[int, float]]:
        if self.texts is None or self.texts.ntotal == 0 or not self.text_mode:
            return []
        index = self._text_searcher()
        sims, nos = index.search(text_vec.reshape(1, -1).astype(np.float32), min(k, self.texts.ntotal))
        return [(int(n), float(s)) for n, s in zip(nos[0], sims[0]) if n >= 0]

    def text_for(self, record_id: int) -> str | None:
        """The attempt text of an indexed record (entries are kept in increasing id order)."""
        ids = self.entries[:, ID]
        i = int(np.searchsorted(ids, record_id))
        if i < len(ids) and ids[i] == record_id:
            return self.text_list[int(self.entries[i, TEXT])]
        return None

    def records_for_text(self, number: int) -> list[int]:
        """Record ids sharing one text, newest first."""
        ids, starts = self._get("by_text")
        if not 0 <= number < len(starts) - 1:
            return []
        return ids[starts[number] : starts[number + 1]].tolist()

    def warn_if_shape_only(self) -> None:
        if not self.text_mode and enabled():
            warnings.warn("index built from shape features only (no embedding model)", stacklevel=3)
