"""bench/fit_wgmma_factors.py: archive rows, the --current filter, and a fit on the committed H100 archive."""

from __future__ import annotations

from pathlib import Path

from bench_script import load_bench

ARCHIVE = Path(__file__).resolve().parents[1] / "bench" / "results" / "archive-grid100-r8-H100-2026-11-22.jsonl.xz"
H100 = "NVIDIA H100 80GB HBM3"


def test_current_keeps_only_kernels_the_template_renders_the_same_way():
    fit = load_bench("fit_wgmma_factors")
    every = fit.archive_rows(str(ARCHIVE), H100)
    current = fit.archive_rows(str(ARCHIVE), H100, current=True)
    assert 0 < len(current) < len(every)
    def key(row):
        params, shape, us = row
        return tuple(sorted(params.items())), shape, us

    assert {key(r) for r in current} <= {key(r) for r in every}
    assert not fit.archive_rows(str(ARCHIVE), "a GPU never measured")


def test_the_fit_runs_on_the_committed_archive(capsys):
    fit = load_bench("fit_wgmma_factors")
    assert fit.main(["--gpu-name", H100, "--sweeps", "--archive", str(ARCHIVE), "--current"]) == 0
    out = capsys.readouterr().out
    assert "with factors (shape left out)" in out and "factors fitted on all shapes" in out


def test_times_measured_after_a_date_are_judged_not_fitted(capsys):
    fit = load_bench("fit_wgmma_factors")
    r9 = ARCHIVE.with_name("archive-grid100-r9-H100-2026-11-22.jsonl.xz")
    since = "2026-11-22T14:40"
    before = fit.archive_rows(str(r9), H100, current=True, before=since)
    after = fit.archive_rows(str(r9), H100, current=True, since=since)
    assert before and after and len(before) + len(after) == len(fit.archive_rows(str(r9), H100, current=True))
    assert fit.main(["--gpu-name", H100, "--l2-mib", "50", "--sweeps", "--archive", str(r9), "--current",
                     "--holdout-since", since]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert f"{len(before)} measured wgmma times" in out
    assert f"held out: {len(after)} times measured since {since}" in out
