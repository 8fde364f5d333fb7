"""The GPU report of the proposer's cycle, run on the stand-in evaluator: the scripted model edits the parent
through the replay server, repair and improvement turns happen, and md + JSON + PNG name GPU, driver, date
and the model."""

from __future__ import annotations

import json

from hgemm.agent.llm import LLMProposer, OpenAIBackend
from hgemm.archive import Archive
from hgemm.bench import llm_turns
from standin import StandinEvaluator

from hgemm.testing.replay_server import ReplayServer, Step
from hgemm.testing.scripted_model import ParamTweaker


def test_the_report_shows_rates_and_best_speedup_per_turn(tmp_path):
    tweaker = ParamTweaker(seed=3)
    evaluator = StandinEvaluator()
    with ReplayServer([], then=Step(respond=tweaker)) as server, Archive() as archive:

        def make():
            backend = OpenAIBackend(tweaker.name, base_url=server.base_url, timeout_s=5.0, retries=1)
            return LLMProposer(backend, seed=3, near_duplicates="layout")

        report = llm_turns.run([(512, 512, 512), (96, 200, 64)], make, evaluator, archive=archive,
                               budget_evals=16, warmup=2)  # fmt: skip
        edits = archive.execute("SELECT count(*) AS n FROM kernels WHERE note LIKE 'edit of %'")[0]["n"]
    assert edits >= 2
    rows = report["requests"]
    assert rows and {r["kind"] for r in rows} >= {"new", "improve"}
    assert all(
        r["outcome"] in ("kernel", "edit_failed", "duplicate", "no_code", "static_check") for r in rows
    )
    first = [r for r in rows if r["shape"] == [512, 512, 512]]
    assert [r["request"] for r in first] == list(range(1, len(first) + 1))
    assert any(r["best_speedup_so_far"] for r in rows)
    turns = report["by_turn"]
    assert "0" in turns and turns["0"]["requests"] >= 1 and "1" in turns
    report.update(gpu={"name": "Standin GPU", "driver": "0.0", "cc": "9.0", "sm_count": 132}, date="2026-01-01",
                  model=tweaker.name, model_note=llm_turns.SCRIPTED_NOTE, command="test")  # fmt: skip
    paths = llm_turns.write_report(tmp_path, report)
    md = paths["md"].read_text()
    assert (
        "Standin GPU" in md
        and "driver 0.0" in md
        and "scripted:param-tweaker" in md
        and "Not a language model" in md
    )
    assert "| 0 |" in md and "compile rate" in md
    assert json.loads(paths["json"].read_text())["model"] == tweaker.name
    assert paths["png"].stat().st_size > 10_000
