"""Retrieval over the archive: FAISS over shape features and text embeddings of every attempt.

`Retriever(archive, gpu_sm_count=132)` answers `similar_shapes`, `history`, `query` and `search_text`;
the index under `$HGEMM_HOME/index` is a cache of the archive, rebuilt when missing or stale.
"""

from hgemm.index.retriever import Retriever

__all__ = ["Retriever"]
