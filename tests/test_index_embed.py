"""The index with the real all-MiniLM-L6-v2 model (loaded once for this module, offline, on the CPU)."""

from __future__ import annotations

import pytest
from hgemm.archive import Archive
from hgemm.index import Retriever
from hgemm.index import embed as embed_mod
from hgemm.index.embed import TEXT_DIM
from hgemm.index.features import SHAPE_DIM

from hgemm.core.shape import Shape
from hgemm.testing.synthetic import attempts

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
        near = r.query(Shape(1024, 1024, 2048), "warpgroup mma with tensor memory accelerator loads", k=5)
        assert near and all(x["M"] == 1024 and x["N"] == 1024 and x["K"] == 2048 for x in near[:2])

        # every distinct text was embedded once and cached: a rebuild embeds nothing new
        calls = []
        real = model.encode
        monkeypatch.setattr(model, "encode", lambda *a_, **k: calls.append(1) or real(*a_, **k))
        assert r.rebuild()["total"] == 400
        assert calls == []


def test_shape_and_text_query_is_exact(model, monkeypatch):
    """The factorised search equals a flat L2 search over the explicit 403-dim per-record vectors."""
    import numpy as np
    from hgemm.index.features import shape_features
    from hgemm.index.store import W_SHAPE, W_TEXT

    monkeypatch.delenv("HGEMM_EMBEDDER", raising=False)
    with Archive() as a:
        with a.writer.transaction():
            for at in attempts(300, seed=8, kernels=40, gpus=("H100", "H200")):
                h = a.add_kernel(at.source, family=at.family, params=at.params, proposer=at.proposer)
                a.add_evaluation(h, at.record)
        r = Retriever(a)
        r.sync()
        recs = a.execute("SELECT id, M, N, K, gpu FROM records ORDER BY id")
        texts = [r.store.text_for(x["id"]) for x in recs]
        emb = r.store.embedder.embed(texts).astype(np.float64)
        shape = np.stack([shape_features(Shape(x["M"], x["N"], x["K"])) for x in recs]).astype(np.float64)
        vecs = np.hstack([W_SHAPE * shape, W_TEXT * emb])
        for text, (M, N, K), gpu in [("illegal memory access", (1000, 3000, 2000), None),
                                     ("wgmma with TMA, faster than cuBLAS", (4096, 4096, 512), "H200"),
                                     (None, (128, 1024, 8192), None)]:  # fmt: skip
            tq = r.store.embedder.embed_query(text) if text else np.zeros(TEXT_DIM)
            q = np.concatenate([W_SHAPE * shape_features(Shape(M, N, K)), W_TEXT * tq]).astype(np.float64)
            d = ((vecs - q) ** 2).sum(axis=1)
            ranked = sorted((round(float(x), 4), -y["id"], float(x)) for y, x in zip(recs, d)
                            if gpu is None or y["gpu"] == gpu)[:10]  # fmt: skip
            got = r.query(Shape(M, N, K), text, gpu=gpu, k=10) if text else r.history(Shape(M, N, K), k=10)
            assert [g["id"] for g in got] == [-neg for _, neg, _ in ranked]
            assert [g["distance"] for g in got] == pytest.approx([x for _, _, x in ranked], abs=1e-4)


def test_fast_query_encoder_matches_the_model(model):
    import numpy as np

    fast = embed_mod.query_encoder()
    assert fast is not None, "the traced query encoder could not be built"
    for text in ("", "ldmatrix", "split-K with a 128x256 tile, " * 30 + "slower than cuBLAS"):
        assert np.allclose(fast(text), embed_mod._encode_one(model, text), atol=1e-5)


def test_the_cache_serves_texts_embedded_from_other_threads(model, tmp_path, monkeypatch):
    """A sweep's slot threads embed through one index: the cache is not tied to the thread that opened it."""
    import threading

    import numpy as np

    monkeypatch.delenv("HGEMM_EMBEDDER", raising=False)
    embedder = embed_mod.Embedder(tmp_path / "embeddings.db")
    first = embedder.embed(["family small; tile 64x64"])
    got: list = []
    errors: list = []

    def other(text: str) -> None:
        try:
            got.append(embedder.embed([text, "family small; tile 64x64"]))
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=other, args=(f"family wgmma; tile {n}x128",)) for n in (64, 128)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert all(np.allclose(g[1], first[0]) for g in got) and len(got) == 2
    embedder.close()
