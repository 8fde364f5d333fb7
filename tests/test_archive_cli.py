"""`hgemm archive ...` against an archive filled here: every command, ids by prefix, errors as one line."""

from __future__ import annotations

import json

import pytest
import typer
from hgemm.archive import Archive
from hgemm.archive import cli as archive_cli
from typer.testing import CliRunner

from hgemm.core.record import EvalRecord, ModeResult, Stats
from hgemm.testing.synthetic import kernel_source


@pytest.fixture
def app():
    root = typer.Typer()
    archive_cli.register(root)

    @root.callback()
    def _root() -> None:  # keep `archive` a sub-command
        pass

    return root


def _rec(h, M, N, K, us, stage="full"):
    r = EvalRecord(h, M, N, K, gpu="NVIDIA H100", cc="9.0", stage=stage, compiled=True, correct=True)
    for mode in ("offline", "server"):
        base = {"lt_autotuned": Stats(10.0, 9.9, 10.2, 20), "torch_nn": Stats(11.0, 10.9, 11.2, 20)}
        r.modes[mode] = ModeResult(mode, Stats(us, us, us, 20), base, floor_us=6.0).finish(r.shape)
    return r


@pytest.fixture
def filled():
    with Archive() as a:
        p = a.add_kernel(kernel_source("simt_tiled", {"bm": 64}, 0), family="simt_tiled", params={"bm": 64},
                         proposer="template")  # fmt: skip
        c = a.add_kernel(kernel_source("wgmma_tma", {"bm": 128}, 1), family="wgmma_tma", params={"bm": 128},
                         parents=[p], proposer="llm:some-model")  # fmt: skip
        a.add_evaluation(p, _rec(p, 1024, 1024, 1024, 12.0))
        a.add_evaluation(c, _rec(c, 1024, 1024, 1024, 9.0))
        a.add_evaluation(c, _rec(c, 4096, 4096, 4096, 9.5))
        a.add_evaluation(
            p, EvalRecord(p, 4096, 4096, 4096, gpu="NVIDIA H100").fail("incorrect", "max error 0.3")
        )
    return p, c


def run(app, *args):
    return CliRunner().invoke(app, ["archive", *args], catch_exceptions=False)


def test_list_best_show(app, filled):
    p, c = filled
    out = run(app, "list", "--top", "2")
    assert out.exit_code == 0, out.output
    assert c in out.output and p in out.output and "1.111x" in out.output
    out = run(app, "list", "--shape", "4096,4096,4096")
    assert c in out.output and p not in out.output
    out = run(app, "best", "1024", "1024", "1024", "--source")
    assert out.exit_code == 0 and c in out.output and "synthetic wgmma_tma" in out.output
    assert run(app, "best", "8", "8", "8").exit_code == 1
    out = run(app, "show", p[:6])
    assert out.exit_code == 0 and "incorrect" in out.output and f"children: {c}" in out.output


def test_lineage_diff_history_attempts_stats(app, filled):
    p, c = filled
    out = run(app, "lineage", c[:7])
    assert "ancestor" in out.output and p in out.output
    out = run(app, "diff", p[:8], c[:8])
    assert out.output.startswith(f"--- {p}\n+++ {c}\n") and "-// synthetic simt_tiled" in out.output
    out = run(app, "history", "1024", "1024", "1024")
    assert p in out.output and c in out.output
    out = run(app, "attempts", "4096", "4096", "4096")
    assert "incorrect" in out.output and "failures: incorrect=1" in out.output
    out = run(app, "stats", "--check")
    assert out.exit_code == 0 and "integrity" in out.output and "ok" in out.output


def test_export_import_roundtrip(app, filled, tmp_path):
    out = run(app, "export", "--format", "jsonl")
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert lines[0]["type"] == "hgemm-archive" and sum(line["type"] == "record" for line in lines) == 4
    assert run(app, "export", "--format", "csv", "--out", str(tmp_path / "a.csv")).exit_code == 0
    assert (tmp_path / "a.csv").read_text().count("\n") == 1 + 6  # header + 3 records x 2 modes
    (tmp_path / "a.jsonl").write_text(out.stdout)
    other = tmp_path / "other.db"
    out = run(app, "--db", str(other), "import", str(tmp_path / "a.jsonl"))
    assert "kernels=2, records=4" in out.output
    out = run(app, "--db", str(other), "import", str(tmp_path / "a.jsonl"))
    assert "kernels=0, records=0" in out.output


def test_errors_are_hgemm_errors(app, filled, tmp_path):
    from hgemm.core.errors import HgemmError

    with pytest.raises(HgemmError, match="no kernel"):
        run(app, "show", "ffff")
    with pytest.raises(HgemmError, match="M,N,K"):
        run(app, "list", "--shape", "1,2")
    bad = tmp_path / "bad.db"
    bad.write_text("hello")
    with pytest.raises(HgemmError, match="not an SQLite database"):
        run(app, "--db", str(bad), "stats")


def test_console_script_prints_one_line_and_exits_2(filled, tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "bad.db"
    bad.write_text("hello")
    code = "from hgemm.agent.cli import main; main()"
    r = subprocess.run(
        [sys.executable, "-c", code, "archive", "--db", str(bad), "stats"], capture_output=True, text=True
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().startswith("hgemm: ") and len(r.stderr.strip().splitlines()) == 1
