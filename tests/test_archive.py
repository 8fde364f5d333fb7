"""Archive API on a real SQLite file: kernels, records, rankings, lineage, runs, LLM calls, transfer, safety."""

from __future__ import annotations

import json
import random
import sqlite3

import pytest
from hgemm.archive import Archive, ArchiveCorrupt, ArchiveError, ArchiveTooNew
from hgemm.archive.schema import MIGRATIONS

from hgemm.core.errors import HgemmError
from hgemm.core.record import EvalRecord, ModeResult, Stats, kernel_hash
from hgemm.core.shape import Shape
from hgemm.testing.synthetic import kernel_source, make_record


def timed(h, M, N, K, cand_us, best_base_us=10.0, stage="full", gpu="H100", created=None):
    r = EvalRecord(h, M, N, K, gpu=gpu, cc="9.0", driver="1", stage=stage, compiled=True, correct=True)
    if created:
        r.created = created
    for mode in ("offline", "server"):
        base = {
            "lt_autotuned": Stats(best_base_us, best_base_us, best_base_us, 9),
            "torch_nn": Stats(12, 12, 12, 9),
        }
        cand = Stats(cand_us, cand_us, cand_us, 9)
        r.modes[mode] = ModeResult(mode, cand, base, floor_us=5.0).finish(r.shape)
    return r


@pytest.fixture
def arc(tmp_path):
    with Archive(tmp_path / "a.db") as a:
        yield a


def src(i):
    return kernel_source("wgmma_tma", {"bm": 128, "bn": 128, "stages": 4}, i)


def test_default_path_is_under_state_root(hgemm_home):
    with Archive() as a:
        assert a.path == hgemm_home / "archive" / "hgemm.archive.db"
        assert a.execute("PRAGMA journal_mode")[0][0] == "wal"
        assert [r[0] for r in a.execute("SELECT name FROM _migrations")] == [n for n, _ in MIGRATIONS]
        assert a.schema_version == len(MIGRATIONS)


def test_add_kernel_is_idempotent_and_merges_parents(arc):
    p1, p2 = arc.add_kernel(src(1)), arc.add_kernel(src(2))
    h = arc.add_kernel(src(3), family="wgmma_tma", params={"bm": 128}, parents=[p1], proposer="template")
    assert h == kernel_hash(src(3))
    assert arc.add_kernel(src(3) + "\n\n\n", parents=[p2]) == h  # same normalised source
    k = arc.kernel(h[:5])
    assert k["family"] == "wgmma_tma" and k["params"] == {"bm": 128} and k["proposer"] == "template"
    assert sorted(k["parents"]) == sorted([p1, p2])
    assert arc.stats()["kernels"] == 3
    with pytest.raises(ArchiveError):
        arc.add_kernel("   ")
    with pytest.raises(ArchiveError):
        arc.add_kernel(src(4), parents=["not-a-hash"])


def test_prefix_resolution(arc):
    hashes = [arc.add_kernel(src(i)) for i in range(40)]  # 40 hashes: some share a first digit
    assert arc.kernel(hashes[0])["hash"] == hashes[0]
    assert arc.kernel(hashes[0][:8])["hash"] == hashes[0]
    assert arc.kernel("ffffffffffffffff") is None
    first = [h[0] for h in hashes]
    shared = next(c for c in first if first.count(c) > 1)
    with pytest.raises(ArchiveError, match="ambiguous"):
        arc.kernel(shared)
    with pytest.raises(ArchiveError, match="not a kernel hash"):
        arc.kernel("xyz!")


def test_evaluation_rows_roundtrip_and_idempotence(arc):
    h = arc.add_kernel(src(1))
    rec = timed(h, 256, 512, 1024, 8.0)
    rec.ncu = {"sm_throughput_pct": 80.5}
    ids = arc.add_evaluation(h, rec)
    assert len(ids) == 2  # offline and server
    assert arc.add_evaluation(h, rec) == ids
    assert arc.stats()["records"] == 1
    rid = arc.execute("SELECT record_id FROM evaluations WHERE id = ?", (ids[0],))[0][0]
    back = arc.eval_record(rid)
    assert back.to_dict() == rec.to_dict()
    row = arc.execute("SELECT * FROM evaluations WHERE id = ?", (ids[0],))[0]
    assert row["mode"] == "offline" and row["ranked"] == 1
    assert row["lt_autotuned_us"] == 10.0 and row["speedup_lt_autotuned"] == pytest.approx(1.25)
    assert row["speedup_torch_nn"] == pytest.approx(1.5) and row["best_baseline"] == "lt_autotuned"
    assert row["floor_fraction"] == pytest.approx(5 / 8)


def test_a_readonly_archive_sees_what_the_writer_commits_and_cannot_write(arc):
    with Archive(arc.path, readonly=True) as reader:
        h = arc.add_kernel(src(1))
        arc.add_evaluation(h, timed(h, 256, 512, 1024, 8.0))
        assert reader.best(Shape(256, 512, 1024), gpu="H100")["kernel"] == h  # committed: visible at once
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            reader.add_kernel(src(2))
    assert arc.stats()["kernels"] == 1


def test_failure_record_has_no_timed_rows_but_is_an_attempt(arc):
    h = arc.add_kernel(src(1))
    rec = EvalRecord(h, 64, 64, 64, gpu="H100").fail("compile_error", "error: oops")
    assert arc.add_evaluation(h, rec) == []
    att = arc.attempts(Shape(64, 64, 64))
    assert len(att) == 1 and att[0]["failure_kind"] == "compile_error" and att[0]["correct"] == 0
    assert arc.failures(Shape(64, 64, 64)) == {"compile_error": 1}
    assert arc.best(Shape(64, 64, 64)) is None


def test_record_must_match_an_archived_kernel(arc):
    h = arc.add_kernel(src(1))
    with pytest.raises(ArchiveError, match="add_kernel first"):
        arc.add_evaluation("0" * 16, timed("0" * 16, 8, 8, 8, 1.0))
    with pytest.raises(ArchiveError, match="not"):
        arc.add_evaluation(h, timed("1" * 16, 8, 8, 8, 1.0))


def test_rankings_use_only_full_correct_rows(arc):
    a, b, c, d = (arc.add_kernel(src(i)) for i in range(4))
    arc.add_evaluation(a, timed(a, 1024, 1024, 1024, 9.0, created="2025-01-01T00:00:00+00:00"))
    arc.add_evaluation(b, timed(b, 1024, 1024, 1024, 8.0, created="2025-01-02T00:00:00+00:00"))
    arc.add_evaluation(c, timed(c, 1024, 1024, 1024, 1.0, stage="quick"))  # quick: never ranked
    bad = timed(d, 1024, 1024, 1024, 0.5)
    bad.fail("suspicious_speed", "faster than the floor")  # timed but failed: never ranked
    arc.add_evaluation(d, bad)
    arc.add_evaluation(a, timed(a, 1024, 1024, 1024, 9.5, created="2025-01-03T00:00:00+00:00"))
    arc.add_evaluation(c, timed(c, 2048, 2048, 2048, 20.0, best_base_us=25.0, gpu="H200"))
    best = arc.best(Shape(1024, 1024, 1024))
    assert best["kernel"] == b and best["speedup_best"] == pytest.approx(10 / 8) and best["source"] == src(1)
    assert arc.best(Shape(1024, 1024, 1024), gpu="H200") is None
    assert arc.best(Shape(1024, 1024, 1024), mode="server")["kernel"] == b
    with pytest.raises(ArchiveError):
        arc.best(Shape(1024, 1024, 1024), mode="nope")
    board = arc.leaderboard(top=5)
    assert [(r["M"], r["kernel"], r["rank"]) for r in board] == [(1024, b, 1), (1024, a, 2), (2048, c, 1)]
    assert [r["kernel"] for r in arc.leaderboard(gpu="H200")] == [c]
    assert [r["kernel"] for r in arc.leaderboard(shape=Shape(1024, 1024, 1024))] == [b]
    hist = arc.history(Shape(1024, 1024, 1024))
    assert [(r["kernel"], r["previous_best"]) for r in hist] == [(a, None), (b, pytest.approx(10 / 9))]
    assert len(arc.attempts(Shape(1024, 1024, 1024))) == 5


def test_a_kernel_that_ever_failed_on_a_shape_is_not_ranked_there(arc):
    flaky, steady, other = (arc.add_kernel(src(i)) for i in range(3))
    arc.add_evaluation(flaky, timed(flaky, 1024, 1024, 1024, 5.0))  # passes first, fastest
    arc.add_evaluation(steady, timed(steady, 1024, 1024, 1024, 8.0))
    arc.add_evaluation(flaky, timed(flaky, 2048, 2048, 2048, 5.0))  # another shape
    assert arc.best(Shape(1024, 1024, 1024))["kernel"] == flaky
    # a later run of the same kernel, same shape and GPU, fails: a race, a sanitizer report, ...
    arc.add_evaluation(flaky, EvalRecord(flaky, 1024, 1024, 1024, gpu="H100").fail("sanitizer", "racecheck: hazard"))
    assert arc.best(Shape(1024, 1024, 1024))["kernel"] == steady
    assert arc.best(Shape(1024, 1024, 1024), mode="server")["kernel"] == steady
    assert arc.best(Shape(2048, 2048, 2048))["kernel"] == flaky  # other shapes keep their ranking
    # passing again later does not restore it
    arc.add_evaluation(flaky, timed(flaky, 1024, 1024, 1024, 4.0))
    assert arc.best(Shape(1024, 1024, 1024))["kernel"] == steady
    # not supporting a shape is not a defect
    arc.add_evaluation(other, timed(other, 1024, 1024, 1024, 6.0))
    arc.add_evaluation(other, EvalRecord(other, 1024, 1024, 1024, gpu="H100").fail("unsupported_shape", "no"))
    assert arc.best(Shape(1024, 1024, 1024))["kernel"] == other
    # nor is a run the host disturbed: the kernel passed its checks, only its time is missing
    disturbed = EvalRecord(other, 1024, 1024, 1024, gpu="H100", correct=True).fail("timing_disturbed", "busy host")
    assert disturbed.correct and not disturbed.ok
    arc.add_evaluation(other, disturbed)
    assert arc.best(Shape(1024, 1024, 1024))["kernel"] == other


def test_disqualifying_failures_are_every_kind_but_those_that_are_not_defects():
    from hgemm.archive.rows import DISQUALIFYING

    from hgemm.core.record import FAILURE_KINDS

    assert set(DISQUALIFYING) == set(FAILURE_KINDS) - {"unsupported_shape", "timing_disturbed"}


def test_migration_3_unranks_kernels_that_failed_before_it(tmp_path, monkeypatch):
    from hgemm.archive import schema

    path = tmp_path / "old.db"
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:2])
    monkeypatch.setattr("hgemm.archive.store._unrank_if_disqualified", lambda *a: None)  # the old store
    with Archive(path) as a:
        flaky, steady = a.add_kernel(src(1)), a.add_kernel(src(2))
        a.add_evaluation(flaky, timed(flaky, 512, 512, 512, 5.0))
        a.add_evaluation(steady, timed(steady, 512, 512, 512, 8.0))
        a.add_evaluation(flaky, EvalRecord(flaky, 512, 512, 512, gpu="H100").fail("incorrect", "max error 3.1"))
        assert a.best(Shape(512, 512, 512))["kernel"] == flaky
    monkeypatch.undo()
    with Archive(path) as a:
        assert a.schema_version == len(schema.MIGRATIONS) >= 3
        assert a.best(Shape(512, 512, 512))["kernel"] == steady


def test_lineage_walks_both_ways(arc):
    root = arc.add_kernel(src(0))
    mid = arc.add_kernel(src(1), parents=[root])
    leaf = arc.add_kernel(src(2), parents=[mid, "abcdef0123456789"])  # one parent not in the archive
    other = arc.add_kernel(src(3), parents=[root])
    lin = arc.lineage(mid)
    assert [(r["hash"], r["depth"]) for r in lin["ancestors"]] == [(root, 1)]
    assert [(r["hash"], r["depth"]) for r in lin["descendants"]] == [(leaf, 1)]
    up = arc.lineage(leaf)["ancestors"]
    assert {(r["hash"], r["depth"], r["known"]) for r in up} == {
        (mid, 1, True),
        ("abcdef0123456789", 1, False),
        (root, 2, True),
    }
    assert {r["hash"] for r in arc.lineage(root)["descendants"]} == {mid, leaf, other}


def test_runs_and_llm_usage(arc):
    run = arc.start_run("hgemm optimize 1024 1024 1024", {"proposer": "llm", "budget": 10})
    assert arc.run(run)["status"] == "running" and arc.run(run)["config"]["budget"] == 10
    arc.add_llm_call(run, "m1", 1000, 200, 0.01, 2.5, "compiled")
    arc.add_llm_call(run, "m1", 900, 100, 0.02, 1.5, "no_code")
    arc.add_llm_call(None, "m2", 10, 10, 0.5, 0.1, "compiled")
    arc.end_run(run, "done")
    assert arc.run(run)["status"] == "done" and arc.run(run)["ended"]
    u = arc.llm_usage(run)
    assert u["calls"] == 2 and u["prompt_tokens"] == 1900 and u["cost_usd"] == pytest.approx(0.03)
    assert u["by_outcome"] == {"compiled": 1, "no_code": 1} and set(u["by_model"]) == {"m1"}
    assert arc.llm_usage()["calls"] == 3
    with pytest.raises(ArchiveError):
        arc.end_run(999)


def _fill(a, n, seed):
    rng = random.Random(seed)
    prev = []
    for i in range(n):
        h = a.add_kernel(src(seed * 1000 + i), family="wgmma_tma", parents=prev[-1:], proposer="template")
        prev.append(h)
        fail = "incorrect" if i % 4 == 0 else None
        a.add_evaluation(h, make_record(rng, h, 512, 512, 512 * (1 + i % 3), failure=fail))
    run = a.start_run("cmd", {})
    a.add_llm_call(run, "m", 1, 1, 0.1, 0.1, "ok", prev[0])
    a.end_run(run)


def test_export_import_jsonl_and_db_are_idempotent(tmp_path):
    with Archive(tmp_path / "one.db") as one:
        _fill(one, 12, seed=1)
        n = one.export(tmp_path / "one.jsonl", "jsonl")
        assert n == 1 + one.stats()["kernels"] + one.stats()["records"] + 1 + 1
        rows = one.export(tmp_path / "one.csv", "csv")
        assert rows == one.stats()["evaluation_rows"]
        stats_one = one.stats()
    with Archive(tmp_path / "two.db") as two:
        _fill(two, 5, seed=2)
        got = two.import_file(tmp_path / "one.jsonl")
        assert got["kernels"] == stats_one["kernels"] and got["records"] == stats_one["records"]
        assert got["runs"] == 1 and got["llm_calls"] == 1
        again = two.import_file(tmp_path / "one.db")  # the same data from the .db: nothing new
        assert again["kernels"] == again["records"] == again["runs"] == again["llm_calls"] == 0
        s = two.stats()
        assert s["records"] == stats_one["records"] + 5 and s["runs"] == 2 and s["llm_calls"] == 2
        assert len(two.lineage(two.leaderboard()[0]["kernel"])["ancestors"]) >= 0
    with Archive(tmp_path / "three.db") as three:
        three.import_file(tmp_path / "one.db")
        assert three.stats()["records"] == stats_one["records"]
        mine = {
            json.loads(line)["record"]["kernel_hash"]
            for line in open(tmp_path / "one.jsonl")
            if '"record"' in line
        }
        assert {r[0] for r in three.execute("SELECT kernel FROM records")} == mine
    header = open(tmp_path / "one.csv").readline()
    assert header.startswith("record_id,kernel,family")
    with pytest.raises(ArchiveError):
        Archive(tmp_path / "x.db").import_file(tmp_path / "one.csv")
    with pytest.raises(ArchiveError):
        Archive(tmp_path / "x.db").export(tmp_path / "x.out", "xml")


@pytest.mark.parametrize(("suffix", "magic"), [(".jsonl.xz", b"\xfd7zXZ\x00"), (".jsonl.gz", b"\x1f\x8b")])
def test_compressed_jsonl_export_imports_like_plain(tmp_path, suffix, magic):
    with Archive(tmp_path / "one.db") as one:
        _fill(one, 6, seed=3)
        plain = one.export(tmp_path / "one.jsonl", "jsonl")
        packed = one.export(tmp_path / f"one{suffix}", "jsonl")
        stats_one = one.stats()
    assert packed == plain
    assert (tmp_path / f"one{suffix}").read_bytes().startswith(magic)
    with Archive(tmp_path / "two.db") as two:
        got = two.import_file(tmp_path / f"one{suffix}")
        assert got["kernels"] == stats_one["kernels"] and got["records"] == stats_one["records"]
        again = two.import_file(tmp_path / "one.jsonl")  # the same lines, uncompressed: nothing new
        assert again["kernels"] == again["records"] == 0


def test_compressed_exports_are_written_at_the_fastest_level(tmp_path, monkeypatch):
    """A sweep exports its archive on SIGTERM, and a time limit's grace is seconds: the seed archive took 19 s
    through xz's default preset, 1.3 s through preset 1. Both formats still import (above)."""
    from hgemm.archive import transfer

    levels = []
    real_xz, real_gz = transfer.lzma.open, transfer.gzip.open
    monkeypatch.setattr(transfer.lzma, "open", lambda *a, **k: levels.append(("xz", k.get("preset"))) or real_xz(*a, **k))
    monkeypatch.setattr(transfer.gzip, "open",
                        lambda *a, **k: levels.append(("gz", k.get("compresslevel"))) or real_gz(*a, **k))  # fmt: skip
    with Archive(tmp_path / "one.db") as one:
        _fill(one, 2, seed=5)
        one.export(tmp_path / "one.jsonl.xz", "jsonl")
        one.export(tmp_path / "one.jsonl.gz", "jsonl")
    assert levels == [("xz", 1), ("gz", 1)]
    with Archive(tmp_path / "two.db") as two:
        assert two.import_file(tmp_path / "one.jsonl.xz")["kernels"] > 0  # reading passes no level
        assert levels[2:] == [("xz", None)]


def test_tampered_jsonl_kernel_is_refused(tmp_path, arc):
    arc.add_kernel(src(1))
    arc.export(tmp_path / "e.jsonl", "jsonl")
    text = (tmp_path / "e.jsonl").read_text().replace("variant 1", "variant 2")
    (tmp_path / "bad.jsonl").write_text(text)
    with Archive(tmp_path / "other.db") as other:
        with pytest.raises(ArchiveError, match="does not match"):
            other.import_file(tmp_path / "bad.jsonl")
        assert other.stats()["kernels"] == 0  # the whole import rolled back


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "a.db"
    Archive(path).close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(ArchiveTooNew, match="upgrade hgemm"):
        Archive(path)
    assert issubclass(ArchiveTooNew, HgemmError)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO _migrations VALUES ('002_from_the_future', 'x')")
    conn.commit()
    conn.close()
    with pytest.raises(ArchiveTooNew, match="002_from_the_future"):
        Archive(path)


@pytest.mark.parametrize(
    "content",
    [b"this is a text file, not a database\n" * 50, b"SQLite format 3\x00" + b"\xff\x13garbage" * 400],
    ids=["not-sqlite", "corrupt-sqlite"],
)
def test_corrupt_or_foreign_file_is_refused_and_untouched(tmp_path, content):
    path = tmp_path / "a.db"
    path.write_bytes(content)
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    with pytest.raises(ArchiveCorrupt, match="left untouched"):
        Archive(path)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.db"]


def test_truncated_database_is_refused_and_untouched(tmp_path):
    path = tmp_path / "a.db"
    with Archive(path) as a:
        _fill(a, 30, seed=3)
        a.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    with pytest.raises(ArchiveCorrupt, match="malformed"):
        Archive(path)
    assert path.read_bytes() == data[: len(data) // 3]


def test_an_import_with_a_shape_out_of_limits_is_refused_whole(tmp_path, arc):
    h = arc.add_kernel(src(1))
    arc.add_evaluation(h, timed(h, 256, 512, 1024, 8.0))
    arc.export(tmp_path / "e.jsonl", "jsonl")
    text = (tmp_path / "e.jsonl").read_text().replace('"M": 256', '"M": 70000')
    (tmp_path / "bad.jsonl").write_text(text)
    with Archive(tmp_path / "other.db") as other:
        with pytest.raises(ArchiveError, match="M=70000 is larger than"):
            other.import_file(tmp_path / "bad.jsonl")
        assert other.stats()["kernels"] == 0 and other.stats()["records"] == 0  # the whole import rolled back
