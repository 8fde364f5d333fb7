"""Sweeps: report writing (JSON, Markdown, PNG) on synthetic rows, and whole sweeps with the
template proposer, the stand-in evaluator and a real archive, including resume and the CLI."""

from __future__ import annotations

import json
import math

import pytest
import typer
from hgemm.agent import sweep
from hgemm.agent.sweep import read_grid, row_from_record, run_sweep, summarize, write_report
from standin import StandinEvaluator
from typer.testing import CliRunner

from hgemm.core.record import BASELINES, EvalRecord, ModeResult, Stats, kernel_hash
from hgemm.core.shape import Shape


def stats(us: float) -> Stats:
    return Stats(median_us=us, p10_us=us, p90_us=us, n=10)


def record(M, N, K, cand_us: float, base_us: float) -> EvalRecord:
    rec = EvalRecord(kernel_hash=f"{M:04x}{N:04x}{K:08x}", M=M, N=N, K=K, gpu="H100 test", stage="full")
    rec.compiled = rec.correct = True
    for mode, scale in (("offline", 1.0), ("server", 1.2)):
        baselines = {b: stats(base_us * scale * (1 + 0.01 * i)) for i, b in enumerate(BASELINES)}
        rec.modes[mode] = ModeResult(mode, stats(cand_us * scale), baselines, floor_us=1.0).finish(rec.shape)
    return rec


@pytest.fixture
def rows():
    return [
        row_from_record(
            Shape(64, 64, 64), record(64, 64, 64, 4.0, 5.0), family="small", gpu_seconds=1.5, evals=10
        ),
        row_from_record(
            Shape(1024, 1024, 1024),
            record(1024, 1024, 1024, 20.0, 18.0),
            family="mma_ms",
            gpu_seconds=3.0,
            evals=20,
        ),
        row_from_record(
            Shape(8192, 8192, 8192),
            record(8192, 8192, 8192, 1500.0, 1650.0),
            family="wgmma",
            gpu_seconds=9.5,
            evals=30,
        ),
        row_from_record(Shape(512, 128, 8192), None, gpu_seconds=2.0, evals=8),
    ]


def test_rows_carry_times_and_speedups(rows):
    r = rows[0]
    assert r["offline_us"] == 4.0 and r["server_us"] == pytest.approx(4.8)
    assert r["offline_speedup_best"] == pytest.approx(5.0 / 4.0)
    assert r["offline_best_baseline"] == BASELINES[0]
    assert set(r["offline_speedup"]) == set(BASELINES)
    assert rows[3]["status"] == "no_kernel" and rows[3]["offline_us"] is None


def test_summary(rows):
    s = summarize(rows)
    expected = math.exp((math.log(5 / 4) + math.log(18 / 20) + math.log(1650 / 1500)) / 3)
    assert s["offline"]["geomean_speedup_best"] == pytest.approx(expected)
    assert s["server"]["geomean_speedup_best"] == pytest.approx(expected)  # same ratios, scaled times
    assert s["offline"]["worst"] == {"M": 1024, "N": 1024, "K": 1024, "speedup_best": pytest.approx(0.9)}
    assert s["offline"]["share_below_1"] == pytest.approx(
        2 / 4
    )  # the slower shape and the one without a kernel
    assert s["no_kernel"] == 1
    assert s["gpu_seconds"] == pytest.approx(16.0) and s["gpu_seconds_per_shape"] == pytest.approx(4.0)
    assert s["evals"] == 68


def test_write_report(tmp_path, rows):
    paths = write_report(rows, tmp_path / "out", "unit")
    data = json.loads(paths["json"].read_text())
    assert data["name"] == "unit" and len(data["rows"]) == 4
    assert data["summary"]["offline"]["geomean_speedup_best"] == pytest.approx(
        summarize(rows)["offline"]["geomean_speedup_best"]
    )
    md = paths["md"].read_text()
    assert "| offline |" in md and "| server |" in md
    assert "| 8192 | 8192 | 8192 |" in md and "wgmma" in md
    assert "1 shape(s) ended without a correct full-stage kernel" in md
    png = paths["png"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_read_grid(tmp_path):
    f = tmp_path / "g.txt"
    f.write_text("# header\n64 64 64\n\n128 256 512  # note\n")
    assert read_grid(f) == [Shape(64, 64, 64), Shape(128, 256, 512)]
    f.write_text("64 64\n")
    from hgemm.core.errors import BadInput

    with pytest.raises(BadInput):
        read_grid(f)
    f.write_text("64 64 64\n0 64 64\n")
    with pytest.raises(BadInput, match=r"g.txt:2: M must be positive"):  # validated as read, with its line
        read_grid(f)


def test_committed_grid100_is_what_the_script_writes():
    from hgemm.agent.sweep import DEFAULT_GRID
    from hgemm.bench import grid100

    shapes = grid100.choose()
    assert grid100.GRID.read_text() == grid100.render(shapes)
    assert DEFAULT_GRID.read_text() == grid100.GRID.read_text()  # what `hgemm sweep` reads by default
    assert [tuple(s) for s in read_grid(DEFAULT_GRID)] == shapes
    assert len(set(shapes)) == 100
    assert {grid100.decade(s) for s in shapes} == set(range(5, 13))  # every FLOP decade of the grid


def test_sweep_runs_and_resumes():
    from hgemm.archive import Archive
    from hgemm.evaluator.kernels import get_family

    shapes = [Shape(256, 256, 256), Shape(512, 128, 2048)]
    archive = Archive()
    evaluator = StandinEvaluator()
    rows = run_sweep(shapes, evaluator=evaluator, archive=archive, budget_evals=14, progress=False)
    assert [Shape(r["M"], r["N"], r["K"]) for r in rows] == shapes
    for r in rows:
        assert r["status"] == "optimized"
        assert r["offline_speedup_best"] > 0 and r["server_speedup_best"] > 0
        assert 0 < r["evals"] <= 14
        assert r["gpu_seconds"] == pytest.approx(0.01 * (r["evals"] + r["confirm_evals"]))  # 0.01 s per record
        assert r["model_spearman"] is None or -1.0 <= r["model_spearman"] <= 1.0
    calls = len(evaluator.calls)

    again = run_sweep(shapes, evaluator=evaluator, archive=archive, budget_evals=14, progress=False)
    assert len(evaluator.calls) == calls  # nothing evaluated: both shapes resumed from the archive
    for before, after in zip(rows, again, strict=True):
        assert after["status"] == "resumed"
        assert after["kernel"] == before["kernel"]
        # a template kernel's row carries its parameters: the family's render of them rebuilds the kernel
        assert before["params"] and after["params"] == before["params"]
        assert kernel_hash(get_family(before["family"]).render(before["params"])) == before["kernel"]
        assert after["offline_us"] == pytest.approx(before["offline_us"])
        assert after["evals"] == before["evals"]

    fresh = run_sweep(
        shapes[:1], evaluator=evaluator, archive=archive, budget_evals=10, resume=False, progress=False
    )
    assert fresh[0]["status"] in ("optimized", "kept") and len(evaluator.calls) > calls
    # searched again, yet never reported worse than the kernel the archive already had
    assert sweep.row_score(fresh[0], "both") >= sweep.row_score(again[0], "both")
    assert fresh[0]["evals"] <= 10  # what this search spent, not the archive's total
    archive.close()


def test_a_search_again_keeps_the_archived_kernel_when_it_finds_nothing_better():
    from hgemm.agent.proposer import Candidate
    from hgemm.archive import Archive
    from hgemm.evaluator.kernels import get_family

    body = get_family("small").render(dict(BM=32, BN=32, WARPS_M=1, WARPS_N=1, WARPS_K=1))
    fast = "// STANDIN_SPEED 0.2\n" + body  # far faster than anything the template search proposes
    ev = StandinEvaluator()
    with Archive() as archive:
        (rec,) = ev.evaluate([fast], Shape(256, 256, 256), stage="full")
        archive.record(Candidate(fast, "list"), rec)
        (row,) = run_sweep([Shape(256, 256, 256)], evaluator=ev, archive=archive, budget_evals=6, resume=False,
                           progress=False)  # fmt: skip
        assert row["status"] == "kept" and row["kernel"] == kernel_hash(fast)
        assert 0 < row["evals"] <= 6 and row["stop_reason"]  # the search ran; its spending is reported
        (checked,) = run_sweep([Shape(256, 256, 256)], evaluator=ev, archive=archive, budget_evals=6, resume=False,
                               progress=False, sanitize=True)  # fmt: skip
        assert checked["status"] != "kept" and checked["kernel"] != kernel_hash(fast)


def test_sweep_command(tmp_path, monkeypatch):
    from hgemm.agent import commands

    monkeypatch.setattr(commands, "open_evaluator", lambda: StandinEvaluator())
    monkeypatch.setenv("HGEMM_EMBEDDER", "none")  # the real index, by shape features only
    grid = tmp_path / "mini.txt"
    grid.write_text("# two shapes\n128 128 128\n256 512 256\n")
    app = typer.Typer()
    sweep.register(app)
    app.command("noop")(lambda: None)  # a second command keeps typer's sub-command parsing
    out = tmp_path / "results"
    exported = tmp_path / "sweep-archive.jsonl"
    result = CliRunner().invoke(
        app,
        ["sweep", "--grid", str(grid), "--budget-evals", "10", "--out", str(out), "--export-archive", str(exported)],
    )
    assert result.exit_code == 0, result.output
    data = json.loads((out / "mini.json").read_text())
    assert [(r["M"], r["N"], r["K"]) for r in data["rows"]] == [(128, 128, 128), (256, 512, 256)]
    assert (out / "mini.md").exists() and (out / "mini.png").exists()
    assert "geomean speedup" in result.output
    # the exported archive carries the sweep's winners to another machine
    from hgemm.archive import Archive

    with Archive(tmp_path / "elsewhere.db") as other:
        other.import_file(exported)
        for M, N, K in [(128, 128, 128), (256, 512, 256)]:
            assert other.best(Shape(M, N, K)) is not None


def test_model_rank_correlation_is_spearman():
    from hgemm.agent.proposer import Candidate
    from hgemm.agent.sweep import model_rank_correlation
    from hgemm.evaluator.kernels import FAMILIES

    gpu = StandinEvaluator().gpu_info()
    shape = Shape(1024, 1024, 1024)
    from hgemm.agent.model import predict_us

    fam = FAMILIES["mma_ms"]
    configs = [dict(fam.default_params(shape, gpu), BM=bm, BN=bn) for bm in (32, 64, 128) for bn in (64, 128)]
    configs = [p for p in configs if fam.check(p, shape, gpu) is None]
    results = []
    for p in configs:
        c = Candidate(source=fam.render(p), proposer="template", family="mma_ms", params=p)
        rec = record(*shape, predict_us(fam, p, shape, gpu), 10.0)
        rec.stage = "quick"
        results.append((c, rec))
    assert model_rank_correlation(results, shape, gpu) == pytest.approx(1.0)  # times in model order
    for c, r in results:
        r.modes["offline"].candidate.median_us = 1.0 / predict_us(fam, c.params, shape, gpu)
    assert model_rank_correlation(results, shape, gpu) == pytest.approx(-1.0)
    assert model_rank_correlation(results[:3], shape, gpu) is None


def test_sweep_sanitizes_only_the_reported_kernel():
    from hgemm.agent.sweep import run_sweep
    from hgemm.archive import Archive

    ev = StandinEvaluator()
    with Archive() as archive:
        rows = run_sweep([Shape(256, 256, 256)], evaluator=ev, archive=archive, budget_evals=12, progress=False,
                         sanitize=True)
    assert rows[0]["kernel"]
    assert ev.sanitized == [("full", 1)]  # one sanitizer run, on the winner
    assert any(stage == "quick" for stage, _ in ev.calls)


class DiesOnShape(StandinEvaluator):
    """The stand-in evaluator, killed (as by a time limit) when the sweep reaches `shape`."""

    def __init__(self, shape):
        super().__init__()
        self.shape = shape

    def evaluate(self, sources, shape, **kw):
        M, N, K = shape
        if (M, N, K) == self.shape:
            raise KeyboardInterrupt  # what a timeout's SIGINT looks like to Python
        return super().evaluate(sources, shape, **kw)


def test_a_sweep_cut_off_keeps_the_report_of_the_shapes_it_finished(tmp_path, monkeypatch):
    from hgemm.agent import commands

    monkeypatch.setattr(commands, "open_evaluator", lambda: DiesOnShape((256, 512, 256)))
    monkeypatch.setenv("HGEMM_EMBEDDER", "none")
    grid = tmp_path / "mini.txt"
    grid.write_text("128 128 128\n256 512 256\n")
    app = typer.Typer()
    sweep.register(app)
    app.command("noop")(lambda: None)
    out = tmp_path / "results"
    result = CliRunner().invoke(app, ["sweep", "--grid", str(grid), "--budget-evals", "8", "--out", str(out)])
    assert result.exit_code != 0
    data = json.loads((out / "mini.json").read_text())
    assert [(r["M"], r["N"], r["K"]) for r in data["rows"]] == [(128, 128, 128)]
    assert data["rows"][0]["status"] == "optimized"
    assert "| 128 | 128 | 128 |" in (out / "mini.md").read_text()


def test_sweep_without_a_terminal_prints_a_line_per_shape(capsys):
    from hgemm.archive import Archive

    with Archive() as archive:
        shapes = [Shape(128, 128, 128), Shape(256, 256, 256)]
        run_sweep(shapes, evaluator=StandinEvaluator(), archive=archive, budget_evals=8)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[")]
    assert lines[0].startswith("[1/2] 128x128x128 optimized") and lines[1].startswith("[2/2] 256x256x256")
    assert "offline" in lines[0] and "server" in lines[0]


def test_a_resumed_shape_is_chosen_by_the_objective():
    from hgemm.agent.proposer import Candidate
    from hgemm.archive import Archive
    from hgemm.evaluator.kernels import get_family

    body = get_family("small").render(dict(BM=32, BN=32, WARPS_M=1, WARPS_N=1, WARPS_K=1))
    cold_sensitive = "// STANDIN_SPEED 0.80\n// STANDIN_SERVER_SPEED 1.5\n" + body
    even = "// STANDIN_SPEED 0.85\n" + body
    ev = StandinEvaluator()
    shape = Shape(256, 256, 256)
    with Archive() as archive:
        for source in (cold_sensitive, even):
            (rec,) = ev.evaluate([source], shape, stage="full")
            archive.record(Candidate(source, "list"), rec)
        gpu = ev.gpu_info().name
        assert sweep.archived_row(archive, shape, gpu, "offline")["kernel"] == kernel_hash(cold_sensitive)
        assert sweep.archived_row(archive, shape, gpu, "both")["kernel"] == kernel_hash(even)
        assert sweep.archived_row(archive, shape, gpu, "server")["kernel"] == kernel_hash(even)


def test_a_record_with_disturbed_baselines_does_not_win_the_resumed_row():
    from hgemm.agent.proposer import Candidate
    from hgemm.archive import Archive
    from hgemm.evaluator.kernels import get_family

    body = get_family("small").render(dict(BM=32, BN=32, WARPS_M=1, WARPS_N=1, WARPS_K=1))
    fast, slow = "// STANDIN_SPEED 0.7\n" + body, "// STANDIN_SPEED 1.0\n" + body  # time factors
    ev = StandinEvaluator()
    shape = Shape(256, 256, 256)
    with Archive() as archive:
        (rec_fast,) = ev.evaluate([fast], shape, stage="full")
        (rec_slow,) = ev.evaluate([slow], shape, stage="full")
        for mode in rec_slow.modes.values():  # the slow kernel's baselines timed 2x too long (a busy host)
            for stats in mode.baselines.values():
                stats.median_us *= 2
            mode.finish(shape)
        assert rec_slow.speedup_best("server") > rec_fast.speedup_best("server")  # it looks better on speedups
        archive.record(Candidate(fast, "list"), rec_fast)
        archive.record(Candidate(slow, "list"), rec_slow)
        gpu = ev.gpu_info().name
        row = sweep.archived_row(archive, shape, gpu, "both")
        assert row["kernel"] == kernel_hash(fast)
        prior_slow = sweep.row_from_record(shape, rec_slow, kernel=kernel_hash(slow), family="small",
                                           proposer="list", gpu=gpu, evals=1, gpu_seconds=0.0)  # fmt: skip
        assert sweep.row_score(row, "both") > sweep.row_score(prior_slow, "both")


def test_a_resumed_shape_reports_its_confirmed_figure_not_a_luckier_search_sample():
    from hgemm.agent.proposer import Candidate
    from hgemm.archive import Archive
    from hgemm.evaluator.kernels import get_family

    body = get_family("small").render(dict(BM=32, BN=32, WARPS_M=1, WARPS_N=1, WARPS_K=1))
    lucky, steady = "// STANDIN_SPEED 0.7\n" + body, "// STANDIN_SPEED 0.9\n" + body
    ev = StandinEvaluator()
    shape = Shape(256, 256, 256)
    with Archive() as archive:
        (sample,) = ev.evaluate([lucky], shape, stage="full")  # one fast search sample, never confirmed
        (median,) = ev.evaluate([steady], shape, stage="confirmed")  # the confirmation's median
        archive.record(Candidate(lucky, "list"), sample)
        archive.record(Candidate(steady, "list"), median)
        gpu = ev.gpu_info().name
        assert sample.median_us("offline") < median.median_us("offline")
        for objective in ("both", "offline", "server"):
            row = sweep.archived_row(archive, shape, gpu, objective)
            assert row["kernel"] == kernel_hash(steady) and row["measured"] == "confirmed"
            assert row["offline_us"] == median.median_us("offline")
        assert sweep.archived_row(archive, shape, gpu, "both", "2999-01-01T00:00:00+00:00") is None
        other = Shape(128, 256, 256)  # without a confirmation, the search's own best
        for source in (lucky, steady):
            (rec,) = ev.evaluate([source], other, stage="full")
            archive.record(Candidate(source, "list"), rec)
        row = sweep.archived_row(archive, other, gpu, "both")
        assert row["kernel"] == kernel_hash(lucky) and row["measured"] == "unconfirmed"


def test_a_resumed_template_kernel_carries_its_params_on_every_path():
    """Resumed rows name the kernel's family params whichever query found it: the search's own ranking (an
    archive without confirmations, as the shipped seed archive is), a confirmation, or --measured-after."""
    from hgemm.agent.proposer import Candidate
    from hgemm.archive import Archive
    from hgemm.evaluator.kernels import get_family

    params = dict(BM=32, BN=32, WARPS_M=1, WARPS_N=1, WARPS_K=1)
    source = get_family("small").render(params)
    ev = StandinEvaluator()
    shape = Shape(256, 256, 256)
    with Archive() as archive:
        gpu = ev.gpu_info().name
        (rec,) = ev.evaluate([source], shape, stage="full")
        archive.record(Candidate(source, "template", family="small", params=params), rec)
        for stage in ("full", "confirmed"):
            if stage == "confirmed":
                (rec,) = ev.evaluate([source], shape, stage="confirmed")
                archive.record(Candidate(source, "template", family="small", params=params), rec)
            for objective in ("both", "offline", "server"):
                for after in (None, "2000-01-01T00:00:00+00:00"):
                    row = sweep.archived_row(archive, shape, gpu, objective, after)
                    assert row["params"] == params, (stage, objective, after)
                    assert kernel_hash(get_family(row["family"]).render(row["params"])) == row["kernel"]


def test_figures_from_before_measured_after_neither_resume_nor_rank():
    """After a fix to the evaluator, a sweep with --measured-after searches again the shapes whose archived
    figures are older, ignores those figures, and resumes the shapes measured since."""
    from hgemm.agent.proposer import Candidate
    from hgemm.agent.sweep_cli import record_time
    from hgemm.archive import Archive
    from hgemm.evaluator.kernels import get_family

    body = get_family("small").render(dict(BM=32, BN=32, WARPS_M=1, WARPS_N=1, WARPS_K=1))
    stale_source = "// STANDIN_SPEED 0.5\n" + body  # looked fast under the evaluator of then
    ev = StandinEvaluator()
    old, new = Shape(256, 256, 256), Shape(512, 128, 2048)
    with Archive() as archive:
        (stale,) = ev.evaluate([stale_source], old, stage="full")
        stale.created = "2026-11-20T10:00:00+00:00"
        archive.record(Candidate(stale_source, "list"), stale)
        run_sweep([new], evaluator=ev, archive=archive, budget_evals=6, progress=False)
        gpu = ev.gpu_info().name
        after = record_time("2026-11-26T09:30")
        assert sweep.archived_row(archive, old, gpu, "both")["kernel"] == kernel_hash(stale_source)
        assert sweep.archived_row(archive, old, gpu, "both", after) is None
        assert sweep.archived_row(archive, old, gpu, "offline", after) is None
        assert sweep.resumable_row(archive, new, gpu, "both", after)["status"] == "resumed"

        calls = len(ev.calls)
        rows = run_sweep([old, new], evaluator=ev, archive=archive, budget_evals=6, progress=False,
                         measured_after=after)  # fmt: skip
        assert [r["status"] for r in rows] == ["optimized", "resumed"]
        assert len(ev.calls) > calls
        assert rows[0]["kernel"] != kernel_hash(stale_source)  # the old figure did not win the row
        assert sweep.archived_row(archive, old, gpu, "both", after)["kernel"] == rows[0]["kernel"]


def test_measured_after_is_read_as_utc_and_bad_input_is_refused():
    from hgemm.agent.sweep_cli import record_time

    from hgemm.core.errors import BadInput

    assert record_time("2026-11-26") == "2026-11-26T00:00:00+00:00"
    assert record_time("2026-11-26T09:30Z") == "2026-11-26T09:30:00+00:00"
    assert record_time("2026-11-26T10:30+01:00") == "2026-11-26T09:30:00+00:00"
    assert record_time(None) is None
    with pytest.raises(BadInput, match="not a date"):
        record_time("yesterday")
    # a time still to come: no record of the run would count, and a rerun would resume nothing
    with pytest.raises(BadInput, match="is after now"):
        record_time("2999-01-01T00:00")


class FailsOn(StandinEvaluator):
    """The stand-in, except that evaluating `shape` raises as a GPU worker does when it cannot prepare it."""

    def __init__(self, shape):
        super().__init__()
        self.shape = shape

    def evaluate(self, sources, shape, **kwargs):
        if shape == self.shape:
            raise RuntimeError("worker prepare failed: TimingDisturbed: only 4 of 10 samples were clean")
        return super().evaluate(sources, shape, **kwargs)


def test_a_shape_whose_search_raises_ends_only_its_own_search(tmp_path):
    from hgemm.archive import Archive

    with Archive() as archive:
        first = run_sweep([Shape(256, 256, 256)], evaluator=StandinEvaluator(), archive=archive, budget_evals=6,
                          progress=False)  # fmt: skip
        seen = []
        shapes = [Shape(128, 128, 128), Shape(256, 256, 256), Shape(512, 512, 512)]
        rows = run_sweep(shapes, evaluator=FailsOn(Shape(256, 256, 256)), archive=archive, budget_evals=6,
                         resume=False, progress=False, on_row=lambda r: seen.append(len(r)))  # fmt: skip
    assert [r["status"] for r in rows] == ["optimized", "kept", "optimized"]
    failed = rows[1]
    assert failed["kernel"] == first[0]["kernel"] and failed["evals"] == 0  # the archive's kernel stays reported
    assert "TimingDisturbed" in failed["error"] and "error" not in rows[0]
    assert seen == [1, 2, 3]  # the report is rewritten after the failed shape too
    assert "256×256×256: RuntimeError: worker prepare failed" in sweep.render_markdown(rows, summarize(rows), "x")
    with Archive(tmp_path / "empty.db") as empty:
        (row,) = run_sweep([Shape(256, 256, 256)], evaluator=FailsOn(Shape(256, 256, 256)), archive=empty, budget_evals=6,
                           progress=False)  # fmt: skip
    assert row["status"] == "no_kernel" and row["kernel"] is None and row["error"]
