"""hgemm.bench.confirm_report: a real sweep with the stand-in evaluator and a real archive, then the
confirmation of its report by fresh measurements (figures from the new records only), resume, a failed
re-measurement and a kernel missing from the archive."""

from __future__ import annotations

import json
import math

import pytest
from hgemm.agent.sweep import run_sweep, write_report
from hgemm.bench import confirm_report
from standin import StandinEvaluator

from hgemm.core.shape import Shape

SHAPES = [Shape(256, 256, 256), Shape(512, 128, 1024)]


class Remeasure:
    """The stand-in evaluator with every candidate time multiplied by `slower` (so a fresh measurement
    differs from the one the sweep selected on) and, with `fail`, every record failed with that kind.
    Keeps the records it returned and counts its calls."""

    def __init__(self, slower: float = 1.0, fail: str | None = None):
        self.inner = StandinEvaluator()
        self.slower = slower
        self.fail = fail
        self.records = []
        self.calls = 0

    def gpu_info(self):
        return self.inner.gpu_info()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def evaluate(self, sources, shape, **kwargs):
        self.calls += 1
        records = self.inner.evaluate(sources, shape, **kwargs)
        for rec in records:
            for m in rec.modes.values():
                m.candidate.median_us *= self.slower
                m.finish(rec.shape)
            if self.fail:
                rec.fail(self.fail, "max relative error 5.0e-01 above the bound 4.0e-03")
        self.records.extend(records)
        return records


@pytest.fixture
def swept(tmp_path):
    """A sweep report of two shapes, written to tmp_path, and the archive holding its kernels."""
    from hgemm.archive import Archive

    archive = Archive()
    rows = run_sweep(SHAPES, evaluator=StandinEvaluator(), archive=archive, budget_evals=8, progress=False)
    paths = write_report(rows, tmp_path / "sweep", "mini", plot_png=False)
    yield paths["json"], archive
    archive.close()


def run_confirm(report, out_dir, evaluator, archive, name="mini-confirmed") -> int:
    argv = [str(report), "--name", name, "--out-dir", str(out_dir)]
    return confirm_report.main(argv, evaluator=evaluator, archive=archive)


def records_in(archive) -> int:
    return archive.execute("SELECT count(*) AS n FROM records")[0]["n"]


def test_confirmed_report_comes_from_the_fresh_measurements(swept, tmp_path, capsys):
    report, archive = swept
    selected = json.loads(report.read_text())
    archived = records_in(archive)
    ev = Remeasure(slower=1.25)
    out = tmp_path / "confirmed"

    assert run_confirm(report, out, ev, archive) == 0
    assert ev.calls == len(SHAPES) and records_in(archive) == archived  # nothing written to the archive
    data = json.loads((out / "mini-confirmed.json").read_text())
    assert (out / "mini-confirmed.md").exists() and (out / "mini-confirmed.png").exists()
    assert [(r["M"], r["N"], r["K"], r["kernel"]) for r in data["rows"]] == [
        (r["M"], r["N"], r["K"], r["kernel"]) for r in selected["rows"]
    ]
    fresh = {(rec.M, rec.N, rec.K): rec for rec in ev.records}
    for before, after in zip(selected["rows"], data["rows"], strict=True):
        rec = fresh[(after["M"], after["N"], after["K"])]
        assert rec.kernel_hash == after["kernel"] and rec.stage == "full"
        assert after["status"] == "confirmed" and "confirm_failure" not in after
        assert after["family"] == before["family"] and after["evals"] == before["evals"]
        assert before["params"] and after["params"] == before["params"]
        for mode in ("offline", "server"):
            assert before[f"{mode}_speedup_best"] is not None
            assert after[f"selected_{mode}_speedup_best"] == before[f"{mode}_speedup_best"]
            assert after[f"{mode}_us"] == pytest.approx(rec.median_us(mode))
            assert after[f"{mode}_speedup_best"] == pytest.approx(rec.speedup_best(mode))
            # the fresh measurement is 1.25x slower than the one the sweep selected on
            assert after[f"{mode}_speedup_best"] == pytest.approx(before[f"{mode}_speedup_best"] / 1.25)
    for mode in ("offline", "server"):
        geo = data["summary"][mode]["geomean_speedup_best"]
        assert geo is not None and math.isfinite(geo)
        assert geo == pytest.approx(selected["summary"][mode]["geomean_speedup_best"] / 1.25)
    printed = capsys.readouterr().out
    assert "2 of 2 shapes confirmed" in printed and "offline: geomean speedup" in printed
    meta = data["meta"]  # where and how it was measured, in the JSON and the markdown's header
    assert meta["gpu"] == ev.records[0].gpu and meta["date"] and "2 of 2 shapes re-measured" in meta["how"]
    assert f"gpu: {meta['gpu']}" in (out / "mini-confirmed.md").read_text()

    # a second run with the same name re-measures nothing and leaves the rows as they were
    again = Remeasure(slower=2.0)
    assert run_confirm(report, out, again, archive) == 0
    assert again.calls == 0
    assert json.loads((out / "mini-confirmed.json").read_text())["rows"] == data["rows"]


def test_a_failed_remeasurement_and_a_missing_kernel_are_reported(swept, tmp_path):
    report, archive = swept
    doc = json.loads(report.read_text())
    doc["rows"][1]["kernel"] = "f" * 64  # not in the archive
    doc["rows"].append({**doc["rows"][0], "M": 64, "N": 64, "K": 64, "kernel": None, "status": "no_kernel"})
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    out = tmp_path / "confirmed"

    ev = Remeasure(fail="incorrect")
    assert run_confirm(edited, out, ev, archive, name="edited") == 1
    assert ev.calls == 1  # only the kernel the archive holds was evaluated
    failed, missing, carried = json.loads((out / "edited.json").read_text())["rows"]
    assert failed["status"] == "no_kernel" and failed["confirm_failure"] == "incorrect"
    assert failed["kernel"] == doc["rows"][0]["kernel"] and failed["offline_speedup_best"] is None
    assert failed["selected_offline_speedup_best"] == doc["rows"][0]["offline_speedup_best"]
    assert missing == {**doc["rows"][1], "status": "not_confirmed"}
    assert carried == doc["rows"][2]

    # the failure counts as done on a rerun; the missing kernel is looked up again but never evaluated
    again = Remeasure()
    assert run_confirm(edited, out, again, archive, name="edited") == 1
    assert again.calls == 0


def test_render_measures_a_configuration_the_archive_does_not_hold(swept, tmp_path):
    from hgemm.archive import Archive
    from hgemm.evaluator.kernels import get_family

    from hgemm.core.record import kernel_hash

    report, _ = swept
    doc = json.loads(report.read_text())
    doc["rows"][0]["kernel"] = "e" * 16  # an older template's kernel: its hash is not today's rendering
    edited = tmp_path / "older.json"
    edited.write_text(json.dumps(doc))
    out = tmp_path / "confirmed"
    empty = Archive(tmp_path / "other.db")  # the older sweep's archive is not at hand
    try:
        assert run_confirm(edited, out, Remeasure(), empty, name="older") == 1  # without --render: not confirmed
        assert {r["status"] for r in json.loads((out / "older.json").read_text())["rows"]} == {"not_confirmed"}

        ev = Remeasure(slower=1.25)
        argv = [str(edited), "--name", "older-rendered", "--out-dir", str(out), "--render", "--archive"]
        assert confirm_report.main(argv, evaluator=ev, archive=empty) == 0
        assert ev.calls == len(SHAPES)
        rows = json.loads((out / "older-rendered.json").read_text())["rows"]
        fresh = {(rec.M, rec.N, rec.K): rec for rec in ev.records}
        for before, after in zip(doc["rows"], rows, strict=True):
            source = get_family(before["family"]).render(before["params"])
            rec = fresh[(after["M"], after["N"], after["K"])]
            assert after["status"] == "confirmed" and after["params"] == before["params"]
            assert after["kernel"] == rec.kernel_hash == kernel_hash(source)  # the kernel that was measured
            # rendered from the row's kernel; a later row whose kernel an earlier one's rendering put in the
            # archive (two shapes that chose the same configuration) takes it from there
            assert after.get("rendered_from", before["kernel"]) == before["kernel"]
            assert after["offline_us"] == pytest.approx(rec.median_us("offline"))
            kept = empty.kernel(after["kernel"])  # archived with its configuration, for a later search
            assert kernel_hash(kept["source"]) == after["kernel"] and kept["params"] == before["params"]

        assert rows[0]["rendered_from"] == "e" * 16
        again = Remeasure()  # a rerun finds every row by the input's kernel and measures nothing
        assert confirm_report.main(argv, evaluator=again, archive=empty) == 0 and again.calls == 0
    finally:
        empty.close()


def test_render_refuses_parameters_its_family_does_not_take(swept, tmp_path, capsys):
    """A report is input: a value outside the family's space would go into the source as text."""
    from hgemm.archive import Archive

    report, _ = swept
    doc = json.loads(report.read_text())
    doc["rows"][0]["kernel"] = "e" * 16
    first = sorted(doc["rows"][0]["params"])[0]
    doc["rows"][0]["params"] = {**doc["rows"][0]["params"], first: "64\n#include <unistd.h>"}
    doc["rows"][1]["kernel"], doc["rows"][1]["family"] = "f" * 16, "no-such-family"
    edited = tmp_path / "crafted.json"
    edited.write_text(json.dumps(doc))
    empty = Archive(tmp_path / "other.db")
    try:
        ev = Remeasure()
        argv = [str(edited), "--name", "crafted", "--out-dir", str(tmp_path / "o"), "--render"]
        assert confirm_report.main(argv, evaluator=ev, archive=empty) == 1
        assert ev.calls == 0  # nothing was rendered, so nothing was measured
        rows = json.loads((tmp_path / "o" / "crafted.json").read_text())["rows"]
        assert [r["status"] for r in rows] == ["not_confirmed", "not_confirmed"]
        out = capsys.readouterr().out
        assert f"{first}=64\n#include <unistd.h> not in (" in out and "unknown kernel family 'no-such-family'" in out
    finally:
        empty.close()


def test_archived_remeasurements_resume_a_sweep_measured_after_them(swept, tmp_path):
    """With --archive, each re-measurement becomes its kernel's confirmed record: a sweep that ignores the
    figures from before it (--measured-after) resumes those shapes from the re-measurement, searching nothing;
    without the re-measurement, the same sweep would search them again."""
    import time

    from hgemm.agent import sweep

    report, archive = swept
    gpu = StandinEvaluator().gpu_info().name
    since = archive.execute("SELECT max(json_extract(record, '$.created')) AS t FROM records")[0]["t"]
    assert all(sweep.resumable_row(archive, s, gpu, "both", since) is None for s in SHAPES)
    time.sleep(1.1)  # records keep their time to the second: the re-measurements come strictly after `since`
    before = records_in(archive)
    ev = Remeasure(slower=1.1)
    argv = [str(report), "--name", "archived", "--out-dir", str(tmp_path), "--archive"]
    assert confirm_report.main(argv, evaluator=ev, archive=archive) == 0
    assert records_in(archive) == before + len(SHAPES)
    for rec in ev.records:
        row = sweep.resumable_row(archive, rec.shape, gpu, "both", since)
        assert row is not None and row["measured"] == "confirmed" and row["kernel"] == rec.kernel_hash
        assert row["offline_us"] == pytest.approx(rec.median_us("offline"))
    again = Remeasure()
    rows = sweep.run_sweep(SHAPES, evaluator=again, archive=archive, budget_evals=8, progress=False,
                           measured_after=since)  # fmt: skip
    assert again.calls == 0 and [r["status"] for r in rows] == ["resumed"] * len(SHAPES)


def test_merged_reports_keep_each_shapes_latest_measurement(swept, tmp_path):
    """A sweep report, then the re-measurement of part of it: the merged report takes those shapes' figures
    from the re-measurement and the others' from the sweep, says so, and refuses rows of two GPUs."""
    from hgemm.bench import merge_reports

    rows = json.loads(swept[0].read_text())["rows"]
    write_report(rows, tmp_path, "grid", plot_png=False, meta={"gpu": rows[0]["gpu"], "date": "then"})
    confirmed = [{**rows[0], "offline_speedup_best": 1.5, "status": "confirmed"}]
    write_report(confirmed, tmp_path, "grid-confirmed", plot_png=False)
    out = tmp_path / "merged"
    code = merge_reports.main([str(tmp_path / "grid.json"), str(tmp_path / "grid-confirmed.json"), "--name", "all",
                               "--out-dir", str(out)])  # fmt: skip
    assert code == 0
    merged = json.loads((out / "all.json").read_text())
    by_shape = {(r["M"], r["N"], r["K"]): r for r in merged["rows"]}
    assert len(by_shape) == len(rows) == len(merged["rows"])
    first = by_shape[(rows[0]["M"], rows[0]["N"], rows[0]["K"])]
    assert first["offline_speedup_best"] == 1.5 and first["source"] == "grid-confirmed"
    assert all(r["source"] == "grid" for r in merged["rows"] if r is not first)
    assert merged["meta"]["date"] == "then"
    assert merged["meta"]["merged_from"] == [{"report": "grid", "rows": len(rows) - 1},
                                             {"report": "grid-confirmed", "rows": 1}]  # fmt: skip
    text = (out / "all.md").read_text()
    assert "Merged from grid (1 shapes), grid-confirmed (1 shapes)" in text
    assert "1 shapes were re-measured afterwards" in text

    # --confirmed-only: a later row whose figures were not confirmed (a search that kept an archived figure)
    # leaves the earlier row in place and is listed; a confirmed one replaces it
    later = [{**rows[0], "offline_speedup_best": 2.0, "status": "kept", "measured": "unconfirmed"},
             {**rows[1], "offline_speedup_best": 0.5, "status": "optimized", "measured": "confirmed"}]  # fmt: skip
    write_report(later, tmp_path, "grid-searched", plot_png=False)
    assert merge_reports.main([str(tmp_path / "grid.json"), str(tmp_path / "grid-searched.json"), "--name", "c",
                               "--out-dir", str(out), "--confirmed-only"]) == 0  # fmt: skip
    merged = json.loads((out / "c.json").read_text())
    by_source = {(r["M"], r["N"], r["K"]): r["source"] for r in merged["rows"]}
    assert by_source == {(rows[0]["M"], rows[0]["N"], rows[0]["K"]): "grid",
                         (rows[1]["M"], rows[1]["N"], rows[1]["K"]): "grid-searched"}  # fmt: skip
    shape0 = [rows[0]["M"], rows[0]["N"], rows[0]["K"]]
    assert merged["meta"]["left_out"] == [{"report": "grid-searched", "shape": shape0, "status": "kept"}]
    assert "Rows left out as unconfirmed" in (out / "c.md").read_text()
    assert merge_reports.main([str(tmp_path / "grid.json"), str(tmp_path / "grid-searched.json"), "--name", "d",
                               "--out-dir", str(out)]) == 0  # fmt: skip
    assert {r["source"] for r in json.loads((out / "d.json").read_text())["rows"]} == {"grid-searched"}

    # a merged report merged again: its rows keep the reports they came from
    assert merge_reports.main([str(out / "c.json"), str(tmp_path / "grid-confirmed.json"), "--name", "e",
                               "--out-dir", str(out)]) == 0  # fmt: skip
    again = json.loads((out / "e.json").read_text())
    by_source = {(r["M"], r["N"], r["K"]): r["source"] for r in again["rows"]}
    assert by_source == {(rows[0]["M"], rows[0]["N"], rows[0]["K"]): "grid-confirmed",
                         (rows[1]["M"], rows[1]["N"], rows[1]["K"]): "grid-searched"}  # fmt: skip
    assert again["meta"]["merged_from"] == [{"report": "grid-searched", "rows": 1}, {"report": "grid-confirmed", "rows": 1}]

    other = [{**rows[0], "gpu": "another GPU"}]
    write_report(other, tmp_path, "elsewhere", plot_png=False)
    assert merge_reports.main([str(tmp_path / "grid.json"), str(tmp_path / "elsewhere.json"), "--name", "x",
                               "--out-dir", str(out)]) == 2  # fmt: skip
    (tmp_path / "broken.json").write_text("{}")
    assert merge_reports.main([str(tmp_path / "broken.json"), "--name", "x", "--out-dir", str(out)]) == 2
