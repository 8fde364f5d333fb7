"""The archive's fast paths give the same answers as the plain ones: record serialisation, the ranking
index (migration 002) and `best` across GPUs."""

from __future__ import annotations

import hashlib
import random

import pytest
from hgemm.archive import Archive, rows, schema
from hgemm.archive.queries import KERNEL_COLS, ORDER

from hgemm.core.record import EvalRecord
from hgemm.core.shape import Shape
from hgemm.testing.synthetic import attempts, make_record


def _fill(a, n, seed, gpus):
    with a.writer.transaction():
        for at in attempts(n, seed=seed, kernels=40, gpus=gpus):
            h = a.add_kernel(at.source, family=at.family, params=at.params, proposer=at.proposer)
            a.add_evaluation(h, at.record)


def test_record_dict_equals_asdict_and_keeps_fingerprints():
    recs = [at.record for at in attempts(300, seed=11)]
    recs.append(EvalRecord("0" * 16, 8, 8, 8))  # no resources, no modes
    rng = random.Random(3)
    with_ncu = make_record(rng, "1" * 16, 64, 64, 64)
    with_ncu.ncu = {"nested": {"list": [1, 2.5, "x", None], "tuple": (1, 2)}, "flag": True}
    recs.append(with_ncu)
    for r in recs:
        assert rows.record_dict(r) == r.to_dict()
        old = hashlib.sha256(rows.dumps(r.to_dict()).encode()).hexdigest()  # the fingerprint as first defined
        assert rows.fingerprint(r) == old == rows.record_row(r, None)["fingerprint"]
    d = rows.record_dict(with_ncu)
    d["ncu"]["nested"]["list"].append(9)  # a copy, never an alias of the record's own values
    assert with_ncu.ncu["nested"]["list"] == [1, 2.5, "x", None]


def test_version_1_archive_migrates_to_the_ranking_index(tmp_path, monkeypatch):
    path = tmp_path / "old.db"
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:1])
    with Archive(path) as a:
        _fill(a, 300, seed=4, gpus=("H100", "H200"))
        assert a.schema_version == 1
        before = {(M, N, K, m): a.best(Shape(M, N, K), mode=m) for (M, N, K) in {(r[0], r[1], r[2]) for r in
                  a.execute("SELECT M, N, K FROM records")} for m in ("offline", "server")}  # fmt: skip
    monkeypatch.undo()
    with Archive(path) as a:
        assert a.schema_version == len(schema.MIGRATIONS) >= 3
        names = {r[0] for r in a.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "idx_evaluations_ranking" in names
        assert "idx_evaluations_mode_ranked_M_N_K_gpu_speedup_best" not in names
        assert a.check() == "ok"
        for (M, N, K, m), b in before.items():
            assert a.best(Shape(M, N, K), mode=m) == b


def test_best_equals_a_full_sort_across_gpus_and_ties(tmp_path):
    with Archive(tmp_path / "a.db") as a:
        _fill(a, 600, seed=9, gpus=("H100", "H200", "A100"))
        h = a.add_kernel("// a kernel with no GPU name\n", family="x")
        r = make_record(random.Random(1), h, 1024, 1024, 2048)
        while not r.modes or r.stage != "full":
            r = make_record(random.Random(random.random()), h, 1024, 1024, 2048)
        r.gpu = None  # a record without a GPU name still ranks when no GPU is asked for
        a.add_evaluation(h, r)
        # exact ties on speedup: the lower median time wins, then the older row
        ties = [a.add_kernel(f"// tie {i}\n", family="x") for i in range(3)]
        for i, (k, us) in enumerate(zip(ties, (8.0, 7.0, 7.0))):
            t = make_record(random.Random(5), k, 96, 96, 96, gpu="H200")
            t.stage = "full"
            t.modes["offline"].speedup_best = 2.0
            t.modes["offline"].candidate.median_us = us
            t.created = f"2025-01-0{i + 1}T00:00:00+00:00"
            a.add_evaluation(k, t)
        assert a.best(Shape(96, 96, 96))["kernel"] == ties[1]
        full_sort = (
            f"SELECT e.*, {KERNEL_COLS} FROM evaluations e NOT INDEXED JOIN kernels k ON k.hash = e.kernel "
            "WHERE e.mode = ? AND e.ranked = 1 AND e.M = ? AND e.N = ? AND e.K = ? {g} ORDER BY " + ORDER
        )
        shapes = {(x[0], x[1], x[2]) for x in a.execute("SELECT M, N, K FROM evaluations")}
        checked = 0
        for M, N, K in shapes:
            for mode in ("offline", "server"):
                for gpu in (None, "H100", "H200", "A100"):
                    g, gp = ("AND e.gpu = ?", [gpu]) if gpu else ("", [])
                    want = [rows.to_dict(x) for x in a.execute(full_sort.format(g=g), [mode, M, N, K, *gp])]
                    got = a.best(Shape(M, N, K), gpu=gpu, mode=mode)
                    assert got == (want[0] if want else None), (M, N, K, mode, gpu)
                    checked += bool(want)
        assert checked > 100


@pytest.mark.parametrize("mode", ["offline", "server"])
def test_best_plan_reads_the_ranking_index(tmp_path, mode):
    with Archive(tmp_path / "a.db") as a:
        plan = " ".join(
            str(r[3])
            for r in a.execute(
                f"EXPLAIN QUERY PLAN SELECT e.* FROM evaluations e WHERE e.mode = ? AND e.ranked = 1 "
                f"AND e.M = ? AND e.N = ? AND e.K = ? AND e.gpu IS ? ORDER BY {ORDER} LIMIT 1",
                [mode, 1, 1, 1, "H100"],
            )
        )
        assert "idx_evaluations_ranking" in plan and "TEMP B-TREE" not in plan
