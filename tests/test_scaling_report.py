"""The sweep scaling report (`python -m hgemm.bench.scaling_report`): two runs' folders in, ratios, phases and
the report's three files out; bad input is a one-line error."""

from __future__ import annotations

import json
import lzma
import math

import pytest
from hgemm.bench import scaling_report

SHAPES = [(256, 256, 256), (512, 512, 512), (1024, 1024, 1024)]


def write_run(folder, workers, walls, waits, *, meta_extra=None, log=None, util=None, records=None, speed=1.1):
    """A run's folder as `hgemm sweep --out` and its caller leave it."""
    folder.mkdir(parents=True)
    rows = [
        {"M": M, "N": N, "K": K, "status": "optimized", "evals": 8, "wall_seconds": w, "worker_seconds": ws,
         "offline_speedup_best": speed, "server_speedup_best": speed / 1.1}  # fmt: skip
        for (M, N, K), w, ws in zip(SHAPES, walls, waits)
    ]
    meta = {"gpu": "NVIDIA H200", "driver": "580.1", "date": "2026-11-27 08:19 UTC", "workers": workers,
            "run_wall_seconds": 100.0 / workers, **(meta_extra or {})}  # fmt: skip
    (folder / "scale.json").write_text(json.dumps({"name": "scale", "meta": meta, "rows": rows}))
    if log is not None:
        (folder / "run.log").write_text(log)
    if util is not None:
        (folder / "util.csv").write_text(util)
    if records is not None:
        with lzma.open(folder / "run.jsonl.xz", "wt") as f:
            for rec in records:
                f.write(json.dumps({"record": rec}) + "\n")
    return folder


def record(created, boot, cuda, evals=0.3):
    return {"created": created, "eval_seconds": evals,
            "phases": {"compile": 0.02, "runner_boot": boot, "runner_cuda": cuda, "spare_wait": cuda / 2}}  # fmt: skip


def test_two_runs_give_the_ratios_the_phases_and_three_files(tmp_path):
    seed = record("2026-11-24T10:00:00+00:00", 9.0, 9.0)  # an imported seed's record: not this run's
    one = write_run(
        tmp_path / "1", 1, [10.0, 20.0, 30.0], [9.0, 18.0, 27.0],
        log="1 worker(s) on NVIDIA H200: gpu0 (CUDA_VISIBLE_DEVICES=0, pid 1) [28.7 s]\n"
            "searched 3 shapes in 60 s on 1 worker(s) [90.0 s]\n",
        util="0, 6\n0, 8\n1, 0\n",
        records=[seed, record("2026-11-27T08:20:00+00:00", 0.2, 0.2), record("2026-11-27T08:21:00+00:00", 0.4, 0.3)],
    )  # fmt: skip
    many = write_run(
        tmp_path / "4", 4, [15.0, 30.0, 45.0], [14.0, 28.0, 42.0],
        meta_extra={"search_seconds": 25.0, "workers_up_seconds": 50.0},
        records=[seed, record("2026-11-27T08:30:00+00:00", 0.7, 0.6, 0.7)], speed=1.0,
    )  # fmt: skip
    notes = tmp_path / "notes.md"
    notes.write_text("What the figures mean.\n")
    out = tmp_path / "out"
    assert scaling_report.main([str(one), str(many), "--name", "s", "--out-dir", str(out), "--notes", str(notes)]) == 0

    rep = json.loads((out / "s.json").read_text())
    assert rep["gpus"] == 4 and rep["target_ratio"] == 3.6
    assert rep["one_gpu"]["search_s"] == 60.0 and rep["one_gpu"]["workers_up_s"] == 28.7  # from the log
    assert rep["many_gpus"]["search_s"] == 25.0 and rep["many_gpus"]["workers_up_s"] == 50.0  # from the meta
    assert rep["throughput_ratio_search"] == 2.4  # 60 / 25
    assert rep["throughput_ratio_run"] == 4.0  # 100 / 25
    assert rep["throughput_ratio_busy"] == round(4 * 60 / 90, 2)
    assert rep["one_gpu"]["sum_worker_wait_s"] == 54.0 and rep["one_gpu"]["median_shape_wall_s"] == 20.0
    assert rep["one_gpu"]["gpu_util_pct"] == {"gpu0": 7.0, "gpu1": 0.0}
    assert rep["one_gpu"]["geomean_offline"] == 1.1 and math.isclose(rep["many_gpus"]["geomean_server"], 0.909)
    p1, p4 = rep["one_gpu"]["per_evaluation_s"], rep["many_gpus"]["per_evaluation_s"]
    assert p1["records"] == 2 and p1["runner_boot"] == pytest.approx(0.3) and p1["runner_cuda"] == 0.25  # seed left out
    assert p4["records"] == 1 and p4["runner_cuda"] == 0.6 and p4["eval_median"] == 0.7
    md = (out / "s.md").read_text()
    assert "# Sweep scaling, 1 vs 4 GPUs" in md and "**2.4×**" in md and "## Notes\n\nWhat the figures mean." in md
    assert (out / "s.png").read_bytes()[:4] == b"\x89PNG"

    # the phases are kept beside each archive and stand in for it once it is gone
    for run in (one, many):
        next(run.glob("*.jsonl.xz")).unlink()
    assert scaling_report.main([str(one), str(many), "--name", "t", "--out-dir", str(out)]) == 0
    again = json.loads((out / "t.json").read_text())
    assert again["one_gpu"]["per_evaluation_s"] == p1 and p1["since"] == "2026-11-27T08:19"  # the run's start
    assert again["many_gpus"]["per_evaluation_s"]["runner_cuda"] == 0.6


def test_a_run_without_an_archive_or_log_still_reports(tmp_path):
    one = write_run(tmp_path / "1", 1, [1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    data = json.loads((one / "scale.json").read_text())
    data["rows"].append({"M": 64, "N": 64, "K": 64, "status": "kept", "evals": 0, "wall_seconds": None})  # resumed
    (one / "scale.json").write_text(json.dumps(data))
    many = write_run(tmp_path / "2", 2, [1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    data = json.loads((many / "scale.json").read_text())
    data["rows"].append({"M": 64, "N": 64, "K": 64, "status": "kept", "evals": 0, "wall_seconds": 0.5})
    (many / "scale.json").write_text(json.dumps(data))
    assert scaling_report.main([str(one), str(many), "--name", "s", "--out-dir", str(tmp_path / "o")]) == 0
    rep = json.loads((tmp_path / "o" / "s.json").read_text())
    assert rep["throughput_ratio_search"] is None and rep["throughput_ratio_busy"] == round(2 * 6.0 / 6.5, 2)
    assert rep["one_gpu"]["per_evaluation_s"] is None
    assert "| 1 GPU | 4 | 0 | 24 | — | — |" in (tmp_path / "o" / "s.md").read_text()
    assert (tmp_path / "o" / "s.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    "case, message",
    [
        ("shapes", "searched different shapes"),
        ("two_reports", "more than one *.json"),
        ("empty", "no *.json"),
        ("not_a_report", "is not a sweep report's JSON"),
        ("both_one_gpu", "want a 1-GPU run and a run on several GPUs"),
        ("other_gpu", "on different GPUs"),
        ("bad_archive", "is not an exported archive"),
    ],
)
def test_bad_input_is_a_one_line_error(tmp_path, capsys, case, message):
    one = write_run(tmp_path / "1", 1, [1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    many = write_run(tmp_path / "2", 1 if case == "both_one_gpu" else 2, [1.0, 2.0, 3.0], [1.0, 2.0, 3.0],
                     meta_extra={"gpu": "NVIDIA H100 80GB HBM3"} if case == "other_gpu" else None)  # fmt: skip
    report = many / "scale.json"
    if case == "shapes":
        data = json.loads(report.read_text())
        data["rows"][0]["K"] = 64
        report.write_text(json.dumps(data))
    elif case == "two_reports":
        (many / "other.json").write_text("{}")
    elif case == "empty":
        report.unlink()
    elif case == "not_a_report":
        report.write_text("[1, 2]")
    elif case == "bad_archive":
        (many / "run.jsonl.xz").write_bytes(b"not xz")
    assert scaling_report.main([str(one), str(many), "--name", "s", "--out-dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_missing_notes_file_is_an_error(tmp_path, capsys):
    one = write_run(tmp_path / "1", 1, [1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    many = write_run(tmp_path / "2", 2, [1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    args = [str(one), str(many), "--name", "s", "--out-dir", str(tmp_path / "o"), "--notes", str(tmp_path / "x.md")]
    assert scaling_report.main(args) == 2
    assert "cannot read the notes" in capsys.readouterr().err
