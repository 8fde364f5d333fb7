"""The sweep report's groupings: FLOP decades, shape classes, shares won, worst shapes, failures, GPU-hours,
and the sorted-speedup plot, on rows built from real `EvalRecord`s."""

from __future__ import annotations

import json
import math

import pytest
from hgemm.agent.sweep_grid import flop_decade, full_grid, shape_class
from hgemm.agent.sweep_report import main, render_markdown, row_from_record, summarize, write_report

from hgemm.core.record import BASELINES, EvalRecord, ModeResult, Stats
from hgemm.core.shape import Shape


def stats(us: float) -> Stats:
    return Stats(median_us=us, p10_us=us, p90_us=us, n=10)


def row(shape: Shape, speedup: float | None, seconds: float = 3.6, family: str = "mma_ms") -> dict:
    """A row whose kernel is `speedup` times faster than the best baseline (None: no kernel)."""
    if speedup is None:
        return row_from_record(shape, None, gpu_seconds=seconds, evals=4)
    M, N, K = shape
    base = 10.0 + shape.flops / 5e8
    rec = EvalRecord(kernel_hash=f"{M:05x}{N:05x}{K:05x}", M=M, N=N, K=K, gpu="H100 test", stage="full")
    rec.compiled = rec.correct = True
    for mode, scale in (("offline", 1.0), ("server", 1.3)):
        baselines = {b: stats(base * scale * (1 + 0.02 * i)) for i, b in enumerate(BASELINES)}
        rec.modes[mode] = ModeResult(mode, stats(base * scale / speedup), baselines, floor_us=0.1).finish(
            shape
        )
    return row_from_record(shape, rec, family=family, gpu_seconds=seconds, evals=10)


def test_shape_classes_and_decades():
    assert shape_class((1024, 1024, 1024)) == "square"
    assert shape_class((64, 4096, 4096)) == "small-M"
    assert shape_class((256, 512, 8192)) == "K-heavy"
    assert shape_class((12288, 4096, 1024)) == "odd"
    assert shape_class((4096, 1024, 2048)) == "other"
    assert flop_decade((64, 64, 64)) == 5 and flop_decade((16384, 16384, 16384)) == 12
    classes = {shape_class(s) for s in full_grid()}
    assert classes == {"square", "small-M", "K-heavy", "odd", "other"}  # every class occurs in the full grid


def test_summary_groups_by_decade_and_class():
    rows = [
        row(Shape(64, 64, 64), 1.25),
        row(Shape(128, 128, 128), 0.8),
        row(Shape(64, 4096, 4096), 1.1, family="wgmma"),
        row(Shape(256, 512, 8192), 1.05, family="wgmma"),
        row(Shape(12288, 4096, 1024), None),
    ]
    rows[-1] = {**rows[-1], "status": "failed", "error": "WorkerLost: worker gpu0 died during the call"}
    s = summarize(rows)
    assert s["shapes"] == 5 and s["failed"] == 1 and s["no_kernel"] == 1
    assert s["gpu_hours"] == pytest.approx(5 * 3.6 / 3600)
    off = s["offline"]
    assert off["geomean_speedup_best"] == pytest.approx(
        math.exp(sum(map(math.log, [1.25, 0.8, 1.1, 1.05])) / 4)
    )
    assert off["share_won"] == pytest.approx(3 / 5)  # a shape without a kernel is not won
    assert off["share_below_1"] == pytest.approx(2 / 5)  # ... and counts below 1.0
    assert [w["speedup_best"] for w in off["worst_shapes"]] == pytest.approx([0.8, 1.05, 1.1, 1.25])
    # over each baseline: the first baseline is the fastest, the others 2 % and 4 % slower
    assert off["geomean_speedup"][BASELINES[1]] == pytest.approx(off["geomean_speedup_best"] * 1.02)
    decades = off["by_decade"]
    assert set(decades) == {"5", "6", "9", "11"}
    assert decades["5"]["shapes"] == 1 and decades["5"]["geomean_speedup_best"] == pytest.approx(1.25)
    assert decades["6"]["share_won"] == 0.0 and decades["6"]["min_speedup_best"] == pytest.approx(0.8)
    assert decades["11"]["geomean_speedup_best"] is None  # only the failed shape
    by_class = off["by_class"]
    assert by_class["square"]["shapes"] == 2
    assert by_class["square"]["geomean_speedup_best"] == pytest.approx(1.0)  # sqrt(1.25 * 0.8)
    assert by_class["small-M"]["share_won"] == 1.0 and by_class["K-heavy"]["shapes"] == 1
    assert by_class["odd"]["shapes"] == 1 and "other" not in by_class
    assert s["server"]["by_class"]["square"]["geomean_speedup_best"] == pytest.approx(1.0)
    # the families of the reported kernels; a shape without a kernel counts for none
    assert by_class["square"]["families"] == {"mma_ms": 2} and by_class["odd"]["families"] == {}
    assert decades["9"]["families"] == {"wgmma": 2}
    assert summarize(rows[:4])["offline"]["by_decade"]["5"]["families"] == {"mma_ms": 1}

    md = render_markdown(rows, s, "unit")
    assert "By FLOP decade" in md and "| 1e5 | 1 | 1.250×" in md
    assert "By shape class" in md and "| small-M | 1 |" in md
    assert md.count("| mma_ms 2 |") == 1 and "| wgmma 1 |" in md  # square: two mma_ms shapes; small-M: wgmma
    assert "Geomean speedup over each baseline" in md and "best of them" in md
    assert "Worst shapes" in md and "128×128×128 0.800×" in md
    assert "Failures" in md and "12288×4096×1024: WorkerLost" in md
    assert "GPU-hours" in md


def test_full_grid_report_and_plot(tmp_path):
    rows = []
    for i, shape in enumerate(full_grid()):
        rows.append(row(shape, None if i % 250 == 7 else 0.9 + 0.3 * ((i * 37) % 100) / 100, seconds=4.0))
    paths = write_report(rows, tmp_path, "full")
    data = json.loads(paths["json"].read_text())
    assert len(data["rows"]) == 1000 and data["summary"]["no_kernel"] == 4
    assert data["summary"]["gpu_hours"] == pytest.approx(4000 / 3600, abs=1e-3)
    assert sum(g["shapes"] for g in data["summary"]["offline"]["by_decade"].values()) == 1000
    assert sum(g["shapes"] for g in data["summary"]["offline"]["by_class"].values()) == 1000
    png = paths["png"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20000
    from PIL import Image

    with Image.open(paths["png"]) as im:
        assert im.size[0] > 1.5 * im.size[1]  # two panels side by side: sorted speedups, and against FLOPs


def test_live_display_shows_progress_eta_each_worker_and_running_geomeans():
    from hgemm.agent.sweep_live import SweepDisplay
    from rich.console import Console

    console = Console(record=True, width=120, force_terminal=False)
    display = SweepDisplay(4, [row(Shape(64, 64, 64), 1.25)], enabled=False, console=console)
    assert display.eta_seconds(2) is None  # nothing searched yet
    display.start("gpu0", Shape(128, 128, 128), "0")
    display.start("gpu1", Shape(256, 256, 256), "1")
    display.finish("gpu0", row(Shape(128, 128, 128), 0.8))
    display.note("256x256x256: WorkerLost: worker gpu1 died during the call; retrying")
    console.print(display.render())
    text = console.export_text()
    assert "2/4 shapes (1 resumed)" in text
    assert "offline geomean 1.000×" in text and "server geomean 1.000×" in text  # sqrt(1.25 * 0.8)
    assert "gpu0" in text and "idle" in text  # gpu0 finished its shape
    assert "256x256x256" in text and "WorkerLost" in text  # gpu1's current shape, and the last event
    eta = display.eta_seconds(2)
    assert eta is not None and eta >= 0


def test_a_report_is_written_again_from_its_json(tmp_path, capsys):
    rows = [row(Shape(64, 64, 64), 1.25), row(Shape(64, 4096, 4096), 1.1, family="wgmma")]
    paths = write_report(rows, tmp_path, "again", plot_png=False, meta={"gpu": "H100 test", "date": "2026-11-26"})
    data = json.loads(paths["json"].read_text())
    for group in data["summary"]["offline"]["by_class"].values():
        del group["families"]  # as a report of an earlier version has it
    paths["json"].write_text(json.dumps(data))
    paths["md"].write_text("old")
    assert main([str(paths["json"])]) == 0
    again = json.loads(paths["json"].read_text())
    assert again["rows"] == data["rows"] and again["meta"] == data["meta"]
    assert again["summary"]["offline"]["by_class"]["small-M"]["families"] == {"wgmma": 1}
    assert paths["md"].read_text() == render_markdown(rows, summarize(rows), "again", data["meta"])
    assert not (tmp_path / "again.png").exists()
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    assert main([str(bad)]) == 2 and "not a sweep report" in capsys.readouterr().err


def test_the_header_says_how_many_evaluations_the_shapes_had_where_they_differ():
    same = [row(Shape(64, 64, 64), 1.1), row(Shape(128, 64, 64), 1.2)]
    text = render_markdown(same, summarize(same), "same")
    assert "evaluations: 20, GPU time" in text and "per shape:" not in text
    mixed = [*same, row(Shape(256, 64, 64), None), row(Shape(512, 64, 64), None), row(Shape(64, 128, 64), 0.9)]
    text = render_markdown(mixed, summarize(mixed), "mixed")
    assert "evaluations: 38 (per shape: median 10, 4-10), GPU time" in text
