"""`hgemm optimize` and `hgemm prompt` through the real CLI (Typer), with the stand-in evaluator in place
of the GPU, the real archive and FAISS index, and a loopback LLM server."""

from __future__ import annotations

import json
import subprocess
import sys

from hgemm.agent import commands
from hgemm.agent.cli import app
from hgemm.archive import Archive
from hgemm.evaluator.kernels import get_family
from standin import StandinEvaluator
from typer.testing import CliRunner

from hgemm.testing.replay_server import ReplayServer, Step, reply

SMALL = get_family("small")


def edit(speed: float, warps_k: int) -> str:
    body = SMALL.render(dict(BM=32, BN=32, WARPS_M=1, WARPS_N=1, WARPS_K=warps_k))
    return f"Deeper K split.\n```cuda\n// STANDIN_SPEED {speed}\n{body}```"


def test_optimize_with_llm_then_prompt_for_a_neighbour_shows_exemplars(monkeypatch, tmp_path):
    monkeypatch.setattr(commands, "open_evaluator", StandinEvaluator)
    monkeypatch.chdir(tmp_path)
    out, summary = tmp_path / "best.cu", tmp_path / "run.json"
    steps = [reply(edit(0.9, 1)), reply(edit(0.8, 2)), reply("no code"), reply(edit(0.85, 4))]
    runner = CliRunner()
    with ReplayServer(steps, then=Step(texts=["nothing"])) as server:
        result = runner.invoke(
            app,
            [
                "optimize",
                "1024",
                "1024",
                "1024",
                "--proposer",
                "llm",
                "--llm-base-url",
                server.base_url,
                "--llm-model",
                "replay-model",
                "--budget-evals",
                "30",
                "--out",
                str(out),
                "--json",
                str(summary),
                "--quiet",
            ],
        )
    assert result.exit_code == 0, result.output
    assert "Best kernel" in result.output and "lt_autotuned" in result.output
    data = json.loads(summary.read_text())
    assert data["stop_reason"] == "converged" and data["llm"]["calls"] >= 4
    assert data["best"]["proposer"] == "llm:replay-model" and data["best"]["speedup_best"]["server"] > 1
    assert "// STANDIN_SPEED 0.8" in out.read_text()
    with Archive() as archive:
        confirmed = data["confirmation"]["finalists"]  # the confirmation's repetitions and median records too
        assert archive.record_count() == data["evals"] + data["confirm_evals"] + confirmed
        assert archive.kernel(data["best"]["kernel_hash"])["parents"]
    # the neighbouring shape's prompt shows those kernels as scored exemplars
    result = runner.invoke(app, ["prompt", "1024", "1024", "2048", "--exemplars", "2"])
    assert result.exit_code == 0, result.output
    assert (
        "on 1024x1024x1024" in result.output
        and "Variant 2" in result.output
        and "Parent kernel" in result.output
    )
    assert "NVIDIA H100 80GB HBM3 (stand-in)" in result.output


def test_config_file_and_template_proposer(monkeypatch, tmp_path):
    monkeypatch.setattr(commands, "open_evaluator", StandinEvaluator)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hgemm.toml").write_text("[budget]\nevals = 6\n[search]\nbatch = 3\nfinalists = 1\n")
    result = CliRunner().invoke(app, ["optimize", "256", "256", "256", "--quiet", "--json", "s.json"])
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "s.json").read_text())
    assert data["stop_reason"] == "evals" and data["evals"] == 6 and data["llm"]["calls"] == 0
    with Archive() as archive:  # the quick stage timed offline only
        quick = _quick_modes(archive)
        assert quick and all(r["modes"] == ["offline"] for r in quick)
    result = CliRunner().invoke(app, ["optimize", "512", "512", "512", "--quiet", "--quick-server"])
    assert result.exit_code == 0, result.output
    with Archive() as archive:
        assert any(r["modes"] == ["offline", "server"] for r in _quick_modes(archive, 512))


def _quick_modes(archive, M: int = 256) -> list[dict]:
    rows = archive.execute("SELECT record FROM records WHERE M = ? AND json_extract(record, '$.stage') = 'quick'", (M,))
    return [{"modes": sorted(json.loads(r["record"])["modes"])} for r in rows if json.loads(r["record"]).get("modes")]


def test_user_errors_are_one_line_and_exit_2(monkeypatch, tmp_path):
    env = {"HGEMM_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "OPENAI_API_KEY": ""}
    for args, message in (
        (["prompt", "0", "8", "8"], "M must be positive"),
        (["optimize", "8", "8", "8", "--proposer", "magic"], "--proposer must be one of"),
        (["optimize", "8", "8", "8", "--proposer", "llm"], "no API key"),
    ):
        done = subprocess.run(
            [sys.executable, "-c", "from hgemm.agent.cli import main; main()", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("hgemm: ") and message in lines[0]


def test_example_config_loads_and_unknown_keys_are_refused(tmp_path):
    from pathlib import Path

    import pytest
    from hgemm.agent.config import load_config

    from hgemm.core.errors import BadInput

    example = Path(__file__).resolve().parents[1] / "hgemm.toml.example"
    config = load_config(example)
    assert config.llm.model and config.budget.evals == 200 and config.llm.price("gpt-4o-mini") == (0.15, 0.60)
    bad = tmp_path / "bad.toml"
    bad.write_text("[llm]\nmodle = 'x'\n")
    with pytest.raises(BadInput, match="unknown key 'modle'"):
        load_config(bad)
    bad.write_text("[budget]\nevals = 'many'\n")
    with pytest.raises(BadInput, match="expected"):
        load_config(bad)
    bad.write_text("[search]\nrefresh_within = 0.5\n")
    with pytest.raises(BadInput, match="refresh_within"):
        load_config(bad)


def test_search_refresh_settings_reach_the_template_proposer(tmp_path):
    from hgemm.agent.commands import make_proposers
    from hgemm.agent.config import load_config

    path = tmp_path / "hgemm.toml"
    path.write_text("[search]\nrefresh = 5\nrefresh_within = 1\n")  # an integer factor is read as a float
    (proposer,) = make_proposers("template", load_config(path))
    assert (proposer.refresh, proposer.refresh_within) == (5, 1.0)


def test_quick_server_is_a_boolean_setting(tmp_path):
    import pytest
    from hgemm.agent.config import load_config

    from hgemm.core.errors import BadInput

    path = tmp_path / "hgemm.toml"
    path.write_text("[search]\nquick_server = true\n")
    assert load_config(path).search.quick_server is True
    path.write_text("[search]\nquick_server = 1\n")
    with pytest.raises(BadInput, match="quick_server: expected bool"):
        load_config(path)
    path.write_text("[search]\nbatch = true\n")  # a boolean is no integer
    with pytest.raises(BadInput, match="batch: expected int"):
        load_config(path)
