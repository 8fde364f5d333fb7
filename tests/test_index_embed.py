"""The index with the real all-MiniLM-L6-v2 model (loaded once for this module, offline, on the CPU)."""

from __future__ import annotations

import pytest

from archive import Archive
from archive.synthetic import attempts
from index import Retriever
from index import embed as embed_mod
from index.embed import TEXT_DIM
from index.features import SHAPE_DIM

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model():
    m = embed_mod.load_model()
    if m is None:
        pytest.skip(f"embedding model not loadable: {embed_mod._failed}")
    return m


def test_text_index_finds_attempts_by_meaning(model, monkeypatch):
    monkeypatch.delenv("HGEMM_EMBEDDER", raising=False)
    with Archive() as a:
        with a.writer.transaction():
            for at in attempts(400, seed=5, kernels=60):
                h = a.add_kernel(at.source, family=at.family, params=at.params, proposer=at.proposer)
                a.add_evaluation(h, at.record)
        r = Retriever(a)
        s = r.sync()
        assert r.text_mode and s["total"] == 400
        assert r.store.dim == SHAPE_DIM + TEXT_DIM
        found = r.search_text("the GPU reported an illegal memory access and the process died", k=5)
        assert found and found[0]["failure_kind"] == "crash"
        found = r.search_text("kernel failed to compile: undefined identifier", k=3)
        assert found[0]["failure_kind"] == "compile_error"
        near = r.query(1024, 1024, 2048, "warpgroup mma with tensor memory accelerator loads", k=5)
        assert near and all(x["M"] == 1024 and x["N"] == 1024 and x["K"] == 2048 for x in near[:2])

        # every distinct text was embedded once and cached: a rebuild embeds nothing new
        calls = []
        real = model.encode
        monkeypatch.setattr(model, "encode", lambda *a_, **k: calls.append(1) or real(*a_, **k))
        assert r.rebuild()["total"] == 400
        assert calls == []
