"""The factorised exact search equals a brute-force flat L2 search over explicit per-record vectors
(shape-only mode here; tests/test_index_embed.py checks the text half with the real model)."""

from __future__ import annotations

import numpy as np
import pytest
from hgemm.archive import Archive
from hgemm.index import Retriever
from hgemm.index.features import shape_features
from hgemm.index.store import W_SHAPE

from hgemm.core.shape import Shape
from hgemm.testing.synthetic import attempts


@pytest.fixture(autouse=True)
def shape_only(monkeypatch):
    monkeypatch.setenv("HGEMM_EMBEDDER", "none")


def brute_force(a, shape, k, gpu=None):
    recs = a.execute("SELECT id, M, N, K, gpu FROM records ORDER BY id")
    feats = [shape_features(Shape(r["M"], r["N"], r["K"])) for r in recs]
    vecs = np.stack([W_SHAPE * f for f in feats]).astype(np.float64)
    q = W_SHAPE * shape_features(shape).astype(np.float64)
    d = ((vecs - q) ** 2).sum(axis=1)
    found = [
        (round(float(x), 4), -r["id"], float(x)) for r, x in zip(recs, d) if gpu is None or r["gpu"] == gpu
    ]
    return [(-neg, x) for _, neg, x in sorted(found)[:k]]


def test_history_is_the_exact_nearest_then_newest():
    with Archive() as a:
        with a.writer.transaction():
            for at in attempts(500, seed=3, kernels=50, gpus=("H100", "H200")):
                h = a.add_kernel(at.source, family=at.family, params=at.params, proposer=at.proposer)
                a.add_evaluation(h, at.record)
        r = Retriever(a)
        queries = [
            Shape(1000, 3000, 2000),
            Shape(4096, 4096, 4096),
            Shape(128, 256, 512),
            Shape(16384, 64, 64),
        ]
        for shape in queries:
            for gpu in (None, "H200", "B200"):
                for k in (1, 10, 40):
                    want = brute_force(a, shape, k, gpu)
                    got = r.history(shape, gpu=gpu, k=k)
                    assert [g["id"] for g in got] == [i for i, _ in want], (shape, gpu, k)
                    assert [g["distance"] for g in got] == pytest.approx([x for _, x in want], abs=1e-5)
                    assert all(g["gpu"] == gpu for g in got) if gpu else True
                    assert all(g["text"] for g in got)
        # records with one shape share a distance: the newest come first
        same = r.history(Shape(4096, 4096, 4096), k=5)
        assert [g["id"] for g in same] == sorted((g["id"] for g in same), reverse=True)


def test_new_records_are_found_after_sync():
    with Archive() as a:
        with a.writer.transaction():
            for at in attempts(50, seed=1, kernels=10):
                h = a.add_kernel(at.source, family=at.family, params=at.params, proposer=at.proposer)
                a.add_evaluation(h, at.record)
        r = Retriever(a)
        assert r.history(Shape(1000, 1000, 1000), gpu="H300") == []
        at = next(attempts(1, seed=2, kernels=1, gpus=("H300",)))
        h = a.add_kernel(at.source, family=at.family, params=at.params, proposer=at.proposer)
        a.add_evaluation(h, at.record)
        assert r.sync()["added"] == 1
        assert [g["id"] for g in r.history(Shape(1000, 1000, 1000), gpu="H300")] == [a.max_record_id()]


def test_faiss_build_decides_cpu_or_gpu_search():
    import faiss
    from hgemm.index.store import on_gpu

    gpu_build = hasattr(faiss, "StandardGpuResources")
    assert on_gpu() == (gpu_build and faiss.get_num_gpus() > 0)
