"""Feedback loops, novelty and several models, against the scripted OpenAI-compatible server: a failed
kernel's structured failure comes back in its own conversation, the repair is an edit of the failed kernel
(lineage and applied diff archived), a correct one gets an improvement turn with its times, duplicates
never reach the evaluator, and a bandit shares requests between models by improvement per dollar."""

from __future__ import annotations

import random

from hgemm.agent.llm import LLMProposer, OpenAIBackend
from hgemm.agent.llm.bandit import ModelBandit
from hgemm.agent.loop import Budget, optimize
from hgemm.archive import Archive
from hgemm.evaluator.kernels import get_family
from standin import StandinEvaluator

from hgemm.core.record import kernel_hash
from hgemm.core.shape import Shape
from hgemm.testing.replay_server import ReplayServer, Step, reply

SMALL = get_family("small")
BROKEN = "int standin_probe = STANDIN_COMPILE_ERROR;\n"


def kernel(speed: float, warps_k: int = 1, prefix: str = "") -> str:
    body = SMALL.render(dict(BM=32, BN=32, WARPS_M=1, WARPS_N=1, WARPS_K=warps_k))
    return f"{prefix}// STANDIN_SPEED {speed:.3f}\n{body}"


def whole(source: str) -> str:
    return f"A new kernel.\n```cuda\n{source}```\n"


def block(search: str, replace: str) -> str:
    return f"The probe line is wrong.\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def backend(server, model: str = "replay-model") -> OpenAIBackend:
    return OpenAIBackend(model, base_url=server.base_url, timeout_s=2.0, retries=1, backoff_s=0.01)


def test_a_failed_kernel_is_repaired_in_its_own_conversation_then_improved():
    broken = kernel(0.9, 2, prefix=BROKEN)
    steps = [
        reply(whole(broken)),  # turn 0: does not compile
        reply(block(BROKEN, "")),  # turn 1 (repair): an edit of its own kernel
        reply("Nothing more to gain here."),  # turn 2 (improvement): no code
    ]
    with ReplayServer(steps, then=Step(texts=["No ideas."])) as server, Archive() as archive:
        proposer = LLMProposer(backend(server), repair_turns=2, improve_turns=1, near_duplicates="layout")
        result = optimize(Shape(512, 512, 512), proposers=[proposer], evaluator=StandinEvaluator(),
                          archive=archive, budget=Budget(evals=20), progress=False, patience=2, confirm=0,
                          ncu=True)  # fmt: skip
        requests = list(server.requests)
        fixed = kernel(0.9, 2)
        note = archive.execute("SELECT note FROM kernels WHERE hash = ?", [kernel_hash(fixed)])[0]["note"]
        outcomes = [r["outcome"] for r in archive.execute(
            "SELECT outcome FROM llm_calls WHERE run_id = ? ORDER BY id", [result.run_id])]  # fmt: skip
    failed = [r for c, r in result.results if c.hash == kernel_hash(broken)]
    assert failed and failed[0].failure_kind == "compile_error"
    # the repair request continues the first conversation and shows the failure on the kernel's own line
    roles = [m["role"] for m in requests[1]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert requests[1]["messages"][2]["content"] == steps[0].texts[0]
    repair = requests[1]["messages"][3]["content"]
    assert f"Your kernel {kernel_hash(broken)} failed" in repair and "nvcc could not compile" in repair
    assert (
        "line 1 of your kernel: an identifier is undefined: `int standin_probe = STANDIN_COMPILE_ERROR;`"
        in repair
    )
    assert "turn 1 of at most 3" in repair
    # the repaired kernel is the failed one minus the probe line, with the failed kernel as its parent
    repaired = next(c for c, _ in result.results if c.hash == kernel_hash(fixed))
    assert repaired.parents == [kernel_hash(broken)]
    assert (
        note.startswith(f"edit of {kernel_hash(broken)}:")
        and "-int standin_probe = STANDIN_COMPILE_ERROR;" in note
    )
    assert result.best is not None and result.best.hash == kernel_hash(fixed)
    # then an improvement turn in the same conversation, with its measured times
    roles = [m["role"] for m in requests[2]["messages"]]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    improve = requests[2]["messages"][-1]["content"]
    assert (
        f"Your kernel {kernel_hash(fixed)} was measured" in improve
        and "offline" in improve
        and " us" in improve
    )
    assert (
        "Nsight Compute: sm__throughput.avg.pct_of_peak_sustained_elapsed=" in improve
    )  # full stage (finalist)
    assert outcomes[:3] == ["kernel", "kernel", "no_code"]


def test_failed_edits_get_a_repair_turn_that_names_the_failure_kind():
    steps = [reply(block("this text is not in any kernel\n", "x\n")), reply("Giving up.")]
    with ReplayServer(steps, then=Step(texts=["No ideas."])) as server, Archive() as archive:
        archive.record(_candidate(kernel(0.9)), _records([kernel(0.9)])[0])
        proposer = LLMProposer(backend(server), repair_turns=1, improve_turns=0, near_duplicates="layout")
        result = optimize(Shape(512, 512, 512), proposers=[proposer], evaluator=StandinEvaluator(),
                          archive=archive, budget=Budget(evals=5), progress=False, patience=2, confirm=0)  # fmt: skip
        requests = list(server.requests)
    assert result.llm.outcomes.get("edit_failed") == 1
    follow = requests[1]["messages"][-1]["content"]
    assert "Your edit could not be applied" in follow and "Block 1: its SEARCH text does not occur" in follow


def _candidate(source: str):
    from hgemm.agent.proposer import Candidate

    return Candidate(source, "template")


def _records(sources: list[str]):
    return StandinEvaluator().evaluate(sources, Shape(512, 512, 512), stage="full")


def test_duplicates_of_any_earlier_run_and_near_duplicates_never_reach_the_evaluator():
    old = kernel(0.9)
    reindented = old.replace("\n    ", "\n        ")
    recommented = "// a comment the model added\n" + kernel(0.9, 2)
    steps = [
        reply(whole(old)),
        reply(whole(reindented)),
        reply(whole(kernel(0.9, 2))),
        reply(whole(recommented)),
    ]
    with ReplayServer(steps, then=Step(texts=["No ideas."])) as server, Archive() as archive:
        archive.record(_candidate(old), _records([old])[0])  # an earlier run tried it
        proposer = LLMProposer(backend(server), repair_turns=0, improve_turns=0)  # near-duplicates by code
        result = optimize(Shape(512, 512, 512), proposers=[proposer], evaluator=StandinEvaluator(),
                          archive=archive, budget=Budget(evals=20), progress=False, patience=3, confirm=0)  # fmt: skip
    evaluated = {c.hash for c, _ in result.results}
    assert kernel_hash(old) not in evaluated and kernel_hash(reindented) not in evaluated
    assert kernel_hash(kernel(0.9, 2)) in evaluated and kernel_hash(recommented) not in evaluated
    assert result.llm.outcomes["duplicate"] == 3


def test_the_bandit_prefers_the_model_with_more_improvement_per_dollar():
    bandit = ModelBandit(["cheap", "strong"], seed=1)
    rng = random.Random(0)
    picks = []
    for _ in range(300):
        model = bandit.choose()
        picks.append(model)
        cost, gain = (0.001, 0.02) if model == "cheap" else (0.05, 0.05)
        bandit.spend(model, cost, 100, 50, kernels=1)
        bandit.credit(model, gain if rng.random() < 0.5 else 0.0, correct=True)
    assert picks[:2] == ["cheap", "strong"]  # each arm once first
    assert picks.count("cheap") > 0.8 * len(picks) and picks.count("strong") >= 2
    stats = bandit.stats()
    assert stats["cheap"]["gain_per_usd"] > stats["strong"]["gain_per_usd"]
    assert stats["strong"]["cost_usd"] > 0 and stats["cheap"]["prompt_tokens"] == 100 * picks.count("cheap")


def test_two_models_in_one_run_are_chosen_by_yield_and_reported_per_model():
    good = [reply(whole(kernel(0.95 - 0.01 * i, 1 << (i % 3)) + f"int variant_{i};\n")) for i in range(30)]
    with ReplayServer(good) as a, ReplayServer([], then=Step(texts=["Only prose."])) as b:
        proposer = LLMProposer([backend(a, "good"), backend(b, "idle")], prices=lambda m: (1.0, 1.0),
                               repair_turns=0, improve_turns=0, near_duplicates="layout")  # fmt: skip
        result = optimize(Shape(512, 512, 512), proposers=[proposer], evaluator=StandinEvaluator(),
                          budget=Budget(evals=24), progress=False, patience=30, confirm=0)  # fmt: skip
    from hgemm.agent.commands import model_yield

    per_model = model_yield(result)
    assert set(per_model) == {"good", "idle"}
    assert per_model["good"]["calls"] > 2 * per_model["idle"]["calls"] >= 2
    assert per_model["good"]["correct"] >= 1 and per_model["idle"]["kernels"] == 0
    assert per_model["good"]["cost_usd"] > 0 and per_model["good"]["prompt_tokens"] > 0
    stats = proposer.bandit.stats()
    assert stats["good"]["gain"] > 0 and stats["idle"]["gain"] == 0


def test_the_cli_runs_two_models_and_prompt_prints_its_token_count(monkeypatch, tmp_path):
    import json

    from hgemm.agent import commands
    from hgemm.agent.cli import app
    from typer.testing import CliRunner

    monkeypatch.setattr(commands, "open_evaluator", StandinEvaluator)
    monkeypatch.chdir(tmp_path)
    summary = tmp_path / "run.json"
    steps = [reply(whole(kernel(0.9 - 0.01 * i, 1 << (i % 3)) + f"int v{i};\n")) for i in range(6)]
    runner = CliRunner()
    with ReplayServer(steps, then=Step(texts=["nothing"])) as server:
        result = runner.invoke(app, ["optimize", "512", "512", "512", "--proposer", "llm", "--llm-base-url",
                                     server.base_url, "--llm-model", "small-model,large-model", "--budget-evals", "12",
                                     "--json", str(summary), "--quiet", "--no-ncu"])  # fmt: skip
    assert result.exit_code == 0, result.output
    models = json.loads(summary.read_text())["llm"]["models"]
    assert set(models) == {"small-model", "large-model"} and all(m["calls"] >= 1 for m in models.values())
    assert "small-model:" in result.output and "large-model:" in result.output
    result = runner.invoke(app, ["prompt", "512", "512", "512", "--budget", "3000"])
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("=== ") and " tokens (" in x)
    used = int(line.split()[1])
    assert "budget 3000" in line and (used <= 3000 or "OVER BUDGET" in line)
    result = runner.invoke(app, ["prompt", "512", "512", "512", "--budget", "0"])
    assert "no budget" in result.output


def test_an_edit_of_an_archived_parent_is_measured_against_the_parent_in_its_improvement_turn():
    parent = kernel(0.9)
    edit = block("#define HG_WARPS_K 1\n", "#define HG_WARPS_K 2\n")
    with (
        ReplayServer([reply(edit), reply("Enough.")], then=Step(texts=["No ideas."])) as server,
        Archive() as archive,
    ):
        archive.record(_candidate(parent), _records([parent])[0])
        proposer = LLMProposer(backend(server), repair_turns=0, improve_turns=1, near_duplicates="layout")
        result = optimize(Shape(512, 512, 512), proposers=[proposer], evaluator=StandinEvaluator(),
                          archive=archive, budget=Budget(evals=6), progress=False, patience=2, confirm=0)  # fmt: skip
        requests = list(server.requests)
    child = next(c for c, _ in result.results if c.proposer == "llm:replay-model")
    assert child.parents == [kernel_hash(parent)] and "#define HG_WARPS_K 2" in child.source
    improve = requests[1]["messages"][-1]["content"]
    assert f"Your kernel {child.hash} was measured" in improve and "Its parent: offline" in improve
