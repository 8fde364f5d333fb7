"""The FAISS index over the archive, shape-only mode (HGEMM_EMBEDDER=none): sync, staleness, retrieval, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
import typer
from hgemm.archive import Archive
from hgemm.index import Retriever
from hgemm.index.digest import attempt_text, kernel_digest, source_techniques
from hgemm.index.features import SHAPE_DIM, shape_features
from typer.testing import CliRunner

from hgemm.core.record import EvalRecord, ModeResult, Stats
from hgemm.core.shape import Shape
from hgemm.testing.synthetic import attempts, kernel_source


@pytest.fixture(autouse=True)
def shape_only(monkeypatch):
    monkeypatch.setenv("HGEMM_EMBEDDER", "none")


def _timed(h, M, N, K, us):
    r = EvalRecord(h, M, N, K, gpu="H100", cc="9.0", stage="full", compiled=True, correct=True)
    for mode in ("offline", "server"):
        base = {"lt_autotuned": Stats(10.0, 10, 10, 5)}
        r.modes[mode] = ModeResult(mode, Stats(us, us, us, 5), base, floor_us=5.0).finish(r.shape)
    return r


def _fill(a, n, seed=0):
    with a.writer.transaction():
        for at in attempts(n, seed=seed, kernels=200):
            h = a.add_kernel(at.source, family=at.family, params=at.params, proposer=at.proposer)
            a.add_evaluation(h, at.record)


def test_shape_features_are_stable_and_scaled():
    f = shape_features(Shape(4096, 4096, 4096))
    assert f.dtype == np.float32 and f.shape == (SHAPE_DIM,)
    assert np.array_equal(f, shape_features(Shape(4096, 4096, 4096), 132))
    assert not np.array_equal(f, shape_features(Shape(4096, 4096, 4096), 114))  # waves depend on the SM count
    assert np.abs(shape_features(Shape(65536, 1, 32767))).max() < 10
    near = np.linalg.norm(f - shape_features(Shape(4096, 4096, 3072)))
    far = np.linalg.norm(f - shape_features(Shape(128, 4096, 4096)))
    assert near < far


def test_digest_reads_family_params_or_source():
    assert "tile 128x256x64" in kernel_digest("wgmma_tma", {"bm": 128, "bn": 256, "bk": 64}, "")
    assert source_techniques("asm volatile(\"wgmma.mma_async.sync ...\"); cp.async.cg.shared; ldmatrix") == [
        "wgmma", "cp.async", "ldmatrix"
    ]  # fmt: skip
    # the literals that let a source skip a pattern are in every match of it: the same answer as the patterns
    from hgemm.evaluator.kernels.family import kernel_file
    from hgemm.index.digest import _TECH

    sources = [kernel_file(n) for n in ("small.cu", "mma_ms.cu", "wgmma_ws.cu", "wgmma_ptx.cuh")]
    sources += [
        "template <int SPLIT_K> __global__ void k() { extern  __shared__ char s[]; }",
        "// warpspecial producer\n#include <cute/tensor.hpp>\nuse_tma(); tma;",
        "splitK streamk",
        "",
    ]
    for src in sources:
        assert source_techniques(src) == [name for name, rx, _ in _TECH if rx.search(src)]
        for name, rx, lits in _TECH:
            assert all(any(lit in m.group(0) for lit in lits) for m in rx.finditer(src)), name
    row = {"failure_kind": "compile_error", "failure_message": "kernel.cu(123): error: bad\nmore"}
    assert attempt_text(row).endswith("failed compile_error: kernel.cu(N): error: bad")
    ok = {"correct": 1, "offline_speedup": 1.2, "family": "f"}
    assert "faster than cuBLAS" in attempt_text(ok, {"sm_throughput_pct": 91.0})
    assert "ncu sm_throughput_pct 91" in attempt_text(ok, {"sm_throughput_pct": 91.0})


def test_sync_is_incremental_and_persisted(hgemm_home):
    with Archive() as a:
        _fill(a, 300)
        r = Retriever(a)
        first = r.sync()
        assert first["rebuilt"] and first["total"] == 300 and not r.text_mode
        assert (hgemm_home / "index" / "entries.npy").exists()
        _fill(a, 50, seed=1)
        second = Retriever(a).sync()  # a new process would see the persisted cache
        assert second == {"rebuilt": False, "reason": None, "added": 50, "total": 350}
        meta = json.loads((hgemm_home / "index" / "meta.json").read_text())
        assert meta["count"] == 350 and meta["max_id"] == a.max_record_id() and meta["embedder"] == "none"


def test_records_another_process_commits_during_the_staleness_check_are_appended_not_rebuilt(hgemm_home):
    """A sweep's search processes check their index while the driver commits: a commit between the check's
    reads of the archive must not look like records lost or added below the indexed range."""
    with Archive() as a, Archive(a.path) as other:
        _fill(a, 100)
        Retriever(a).sync()
        _fill(a, 10, seed=1)
        extra = iter(attempts(10, seed=2, kernels=200))
        checking = [False]

        def commit_after(read):  # another process commits a record right after each of the check's reads
            def wrapped(*args, **kwargs):
                value = read(*args, **kwargs)
                if checking[0]:
                    at = next(extra)
                    with other.writer.transaction():
                        h = other.add_kernel(at.source, family=at.family, params=at.params)
                        other.add_evaluation(h, at.record)
                return value

            return wrapped

        for name in ("execute", "max_record_id", "record_count"):
            setattr(a, name, commit_after(getattr(a, name)))
        r = Retriever(a)
        check = r.store.stale_reason

        def checked() -> str | None:
            checking[0] = True
            try:
                return check()
            finally:
                checking[0] = False

        r.store.stale_reason = checked
        summary = r.sync()
        assert summary["rebuilt"] is False and summary["added"] >= 10
        assert Retriever(a).sync()["total"] == a.record_count() == 110 + (10 - len(list(extra)))


def test_stale_index_is_rebuilt(hgemm_home, tmp_path):
    with Archive() as a:
        _fill(a, 100)
        Retriever(a).sync()
    with Archive(tmp_path / "other.db") as b:  # a different archive: the cache is not its own
        _fill(b, 20, seed=2)
        s = Retriever(b).sync()
        assert s["rebuilt"] and "archive changed" in s["reason"] and s["total"] == 20
    with Archive() as a:
        assert "archive changed" in Retriever(a).sync()["reason"]
        s = Retriever(a, gpu_sm_count=114).sync()
        assert s["rebuilt"] and "sm_count" in s["reason"]
        (hgemm_home / "index" / "entries.npy").unlink()
        assert Retriever(a, gpu_sm_count=114).sync()["reason"] == "entries.npy missing"
        (hgemm_home / "index" / "texts.faiss").write_bytes(b"junk")
        s = Retriever(a, gpu_sm_count=114).sync()
        assert s["rebuilt"] and s["reason"].startswith("could not load") and s["total"] == 100


def test_similar_shapes_returns_best_of_nearest_shapes():
    with Archive() as a:
        ks = [a.add_kernel(kernel_source("wgmma_tma", {"bm": 128}, i), family="wgmma_tma", params={"bm": 128})
              for i in range(4)]  # fmt: skip
        a.add_evaluation(ks[0], _timed(ks[0], 4096, 4096, 4096, 9.0))
        a.add_evaluation(ks[1], _timed(ks[1], 4096, 4096, 4096, 8.0))  # the best at 4096^3
        a.add_evaluation(ks[2], _timed(ks[2], 4096, 4096, 2048, 7.0))
        a.add_evaluation(ks[3], _timed(ks[3], 128, 128, 128, 1.0))
        bad = EvalRecord(ks[3], 4096, 4096, 4000, gpu="H100").fail("incorrect", "wrong")
        a.add_evaluation(ks[3], bad)
        r = Retriever(a)
        got = r.similar_shapes(Shape(4096, 4096, 4000), k=3)
        assert [(g["M"], g["N"], g["K"]) for g in got][:2] == [(4096, 4096, 4096), (4096, 4096, 2048)]
        assert got[0]["kernel_hash"] == ks[1] and got[0]["speedup_best"]["offline"] == pytest.approx(10 / 8)
        assert set(got[0]["median_us"]) == {"offline", "server"} and got[0]["source"].startswith(
            "// synthetic"
        )
        assert got[0]["params"] == {"bm": 128}
        hist = r.history(Shape(4096, 4096, 4000), k=3)
        assert hist[0]["failure_kind"] == "incorrect" and hist[0]["distance"] == pytest.approx(0, abs=1e-6)
        assert "failed incorrect" in hist[0]["text"]
        assert r.similar_shapes(Shape(4096, 4096, 4000), gpu="H200") == []


def test_text_search_without_model_uses_word_overlap():
    with Archive() as a:
        _fill(a, 200)
        r = Retriever(a)
        with pytest.warns(UserWarning, match="word overlap"):
            found = r.search_text("illegal memory access crash", k=4)
        assert len(found) == 4 and all(f["failure_kind"] == "crash" for f in found)


def test_index_cli(hgemm_home):
    from hgemm.index import cli as index_cli

    with Archive() as a:
        _fill(a, 150)
    app = typer.Typer()
    index_cli.register(app)

    @app.callback()
    def _root() -> None:
        pass

    runner = CliRunner()
    out = runner.invoke(app, ["index", "rebuild"], catch_exceptions=False)
    assert out.exit_code == 0 and "indexed 150 attempts (shape only)" in out.output
    out = runner.invoke(app, ["index", "query", "1000", "1000", "1000"], catch_exceptions=False)
    assert (
        out.exit_code == 0 and "nearest shapes to 1000x1000x1000" in out.output and "1024x1024x" in out.output
    )
    out = runner.invoke(app, ["index", "search", "compile_error identifier"], catch_exceptions=False)
    assert out.exit_code == 0 and "compile_error" in out.output
