"""The search loop with the stand-in evaluator, a real SQLite archive and (where noted) the real FAISS
index: entries land with lineage, successive halving promotes only the best, budgets and convergence
stop the run, LLM calls are archived, and nothing crashes on bad replies."""

from __future__ import annotations

import pytest
from hgemm.agent.llm import LLMProposer, OpenAIBackend, Unreachable
from hgemm.agent.loop import Budget, optimize
from hgemm.agent.proposer import Candidate
from hgemm.archive import Archive
from hgemm.evaluator.kernels import get_family
from standin import StandinEvaluator

from hgemm.core.errors import BadInput
from hgemm.core.shape import Shape
from hgemm.testing.replay_server import ReplayServer, Step, reply

SMALL = get_family("small")


def kernel(speed: float, warps_k: int = 1, marker: str = "") -> str:
    body = SMALL.render(dict(BM=32, BN=32, WARPS_M=1, WARPS_N=1, WARPS_K=warps_k))
    return f"// STANDIN_SPEED {speed:.3f}\n{marker}{body}"


def edit(speed: float, marker: str = "") -> str:
    return f"Compared with the slower variants this one pipelines better.\n```cuda\n{kernel(speed, 2, marker)}```"


class ListProposer:
    """A plain proposer handing out fixed sources in rounds (the GPU-free stand-in for the templates)."""

    name = "list"

    def __init__(self, sources: list[str], per_round: int = 4):
        self.sources, self.per_round, self.observed = list(sources), per_round, []

    def propose(self, ctx, n):
        out, self.sources = self.sources[: min(n, self.per_round)], self.sources[min(n, self.per_round) :]
        return [Candidate(s, "list") for s in out]

    def observe(self, results):
        self.observed.extend(results)


def _llm(server, **kw):
    """One model, no follow-up turns; near-duplicates by layout only (the stand-in's markers are comments)."""
    backend = OpenAIBackend(
        "replay-model", base_url=server.base_url, timeout_s=1.0, retries=1, backoff_s=0.01
    )
    kw = {"repair_turns": 0, "improve_turns": 0, "near_duplicates": "layout", **kw}
    return LLMProposer(backend, **kw)


def test_every_attempt_is_archived_and_only_the_best_go_full():
    sources = [kernel(0.8 + 0.05 * i) for i in range(8)] + [kernel(0.7, marker="// STANDIN_WRONG\n")]
    proposer = ListProposer(sources)
    evaluator = StandinEvaluator()
    with Archive() as archive:
        result = optimize(
            Shape(256, 256, 256),
            proposers=[proposer],
            evaluator=evaluator,
            archive=archive,
            budget=Budget(evals=100),
            progress=False,
            finalists=2,
            batch=4,
            patience=2,
        )
        assert result.stop_reason == "converged"
        assert result.quick == 9 and result.failed == 1 and result.correct == 8
        assert 1 <= result.full <= 2 * 3  # at most `finalists` per round, never everything
        stages = [s for s, _ in evaluator.calls]
        assert stages[0] == "quick" and "full" in stages
        assert result.best_record.stage == "confirmed" and result.best_record.ok
        assert result.best.source == sources[0]  # the fastest correct (0.8)
        assert result.evals == result.quick + result.full
        confirmed = result.confirmation["finalists"]  # plus each finalist's repetitions and median record
        assert archive.record_count() == result.evals + result.confirm_evals + confirmed
        failures = archive.failures(Shape(256, 256, 256))
        assert failures == {"incorrect": 1}
        run = archive.run(result.run_id)
        assert run["status"] == "done" and run["command"] == "optimize"
        assert proposer.observed and all(c.source in sources for c, _ in proposer.observed)


def test_budget_on_evaluations_and_minutes():
    sources = [kernel(0.8 + 0.01 * i) for i in range(40)]
    result = optimize(
        Shape(128, 128, 128),
        proposers=[ListProposer(sources)],
        evaluator=StandinEvaluator(),
        budget=Budget(evals=10),
        progress=False,
        batch=4,
    )
    assert result.stop_reason == "evals" and result.evals == 10
    assert result.best is not None  # room was kept for a full evaluation
    result = optimize(
        Shape(128, 128, 128),
        proposers=[ListProposer(sources)],
        evaluator=StandinEvaluator(),
        budget=Budget(minutes=0.0),
        progress=False,
    )
    assert result.stop_reason == "minutes" and result.evals == 0


def test_bad_shape_is_refused():
    with pytest.raises(BadInput):
        optimize(Shape(0, 1, 1), proposers=[ListProposer([])], evaluator=StandinEvaluator(), budget=Budget())


def test_llm_loop_archives_calls_lineage_and_shows_failures_in_the_next_prompt():
    steps = [
        reply(edit(0.9)),
        reply(edit(0.85, "// STANDIN_WRONG\n")),
        reply("Only prose this time."),
        Step(raw=b"{broken"),
        Step(status=429),
        reply(edit(0.8)),
    ]
    with ReplayServer(steps, then=Step(texts=["nothing new"])) as server, Archive() as archive:
        proposer = _llm(server, prices=lambda m: (1.0, 1.0))
        result = optimize(
            Shape(512, 512, 512),
            proposers=[proposer],
            evaluator=StandinEvaluator(),
            archive=archive,
            budget=Budget(evals=50),
            progress=False,
            patience=3,
        )
        requests = list(server.requests)
        usage = archive.llm_usage(result.run_id)
        rows = archive.execute(
            "SELECT outcome, kernel_hash, prompt, reply FROM llm_calls WHERE run_id = ? ORDER BY id", [result.run_id]
        )
        best = result.best
        lineage = archive.lineage(best.hash)
    assert result.stop_reason == "converged"
    assert [r["outcome"] for r in rows] == ["kernel", "kernel", "no_code", "error", "kernel"] + [
        "no_code"
    ] * 3
    assert result.llm.calls == 8 and result.llm.cost_usd > 0
    # the texts behind each answered call are kept beside the kernel they produced (shown on its kernel page)
    assert rows[2]["reply"] == "Only prose this time." and "512" in rows[2]["prompt"]
    assert rows[0]["kernel_hash"] and rows[0]["reply"].startswith("Compared with the slower variants")
    assert usage["calls"] == 8 and usage["cost_usd"] == pytest.approx(result.llm.cost_usd)
    # the first prompt had no parent; the last kernel's parent is the first (the only correct one then)
    first_hash = result.results[0][0].hash
    assert result.results[0][0].parents == []
    assert best.source == kernel(0.8, 2) and best.parents == [first_hash]
    assert first_hash in str(lineage)
    # the incorrect kernel's failure reached a later prompt (as its kind's sentence and numbers)
    later = requests[2]["messages"][1]["content"]
    assert "(incorrect): The result was wrong" in later and "worst relative error 0.5" in later
    assert first_hash in later


def test_llm_budgets_end_the_run_cleanly():
    with ReplayServer([], then=Step(texts=[edit(0.9)])) as server:
        result = optimize(
            Shape(256, 256, 256),
            proposers=[_llm(server, prices=lambda m: (1e6, 1e6))],
            evaluator=StandinEvaluator(),
            budget=Budget(llm_usd=0.01),
            progress=False,
        )
        assert result.stop_reason == "llm_usd" and result.llm.calls == 1
        result = optimize(
            Shape(256, 256, 256),
            proposers=[_llm(server)],
            evaluator=StandinEvaluator(),
            budget=Budget(llm_tokens=1),
            progress=False,
        )
        assert result.stop_reason == "llm_tokens" and result.llm.tokens > 1


def test_llm_plus_template_keeps_evaluating_while_the_llm_thinks():
    slow = [Step(delay_s=0.6, texts=[edit(0.75)])]
    sources = [kernel(0.8 + 0.02 * i) for i in range(12)]
    with ReplayServer(slow, then=Step(delay_s=0.3, texts=["no code"])) as server, Archive() as archive:
        result = optimize(
            Shape(256, 256, 256),
            proposers=[_llm(server), ListProposer(sources, per_round=2)],
            evaluator=StandinEvaluator(),
            archive=archive,
            budget=Budget(evals=60),
            progress=False,
            batch=2,
            patience=2,
        )
        proposers = {r["proposer"] for r in archive.execute("SELECT proposer FROM kernels")}
    assert proposers == {"list", "llm:replay-model"}
    order = [c.proposer for c, r in result.results if r.stage == "quick"]
    assert order.index("llm:replay-model") > 0  # list candidates were evaluated before the LLM answered
    assert result.best.proposer == "llm:replay-model"


def test_an_unreachable_llm_ends_the_run_with_status_error():
    with ReplayServer([]) as server:
        dead = server.base_url
    backend = OpenAIBackend("m", base_url=dead, timeout_s=0.5, retries=0)
    with Archive() as archive:
        with pytest.raises(Unreachable):
            optimize(
                Shape(64, 64, 64),
                proposers=[LLMProposer(backend)],
                evaluator=StandinEvaluator(),
                archive=archive,
                budget=Budget(evals=5),
                progress=False,
            )
        (run,) = archive.execute("SELECT status FROM runs")
        assert run["status"] == "error"


def test_sanitize_runs_on_the_winner_and_a_failing_winner_gives_way():
    racy = kernel(0.70, marker="// STANDIN_RACE\n")  # fastest, but compute-sanitizer finds a race
    sources = [racy, kernel(0.80), kernel(0.90), kernel(1.00)]
    evaluator = StandinEvaluator()
    with Archive() as archive:
        result = optimize(Shape(256, 256, 256), proposers=[ListProposer(sources)], evaluator=evaluator, archive=archive,
                          budget=Budget(evals=100), progress=False, finalists=2, batch=4, patience=2,
                          sanitize=True)  # fmt: skip
        assert result.best.source == sources[1]  # the next best, sanitized clean
        assert result.best_record.ok
        if result.best_record.stage != "confirmed":  # it was not among the confirmed finalists
            assert result.confirmation is None
        assert evaluator.sanitized == [("full", 1), ("full", 1)]  # the racy winner, then its successor
        assert archive.failures(Shape(256, 256, 256)) == {"sanitizer": 1}
        assert archive.best(Shape(256, 256, 256))["source"] == sources[1]  # the racy kernel is ranked no more


@pytest.mark.parametrize(("objective", "winner"), [("offline", 0), ("both", 1), ("server", 1)])
def test_the_objective_picks_the_winner(objective, winner):
    # kernel 0 is fastest offline but loses 50% in server mode; kernel 1 is a little slower, evenly
    sources = [kernel(0.80, marker="// STANDIN_SERVER_SPEED 1.5\n"), kernel(0.85)]
    with Archive() as archive:
        result = optimize(Shape(256, 256, 256), proposers=[ListProposer(sources)], evaluator=StandinEvaluator(),
                          archive=archive, budget=Budget(evals=20), progress=False, finalists=2, batch=4,
                          patience=2, objective=objective)  # fmt: skip
    assert result.full == 2  # both reached the full stage; the objective alone decides
    assert result.best.source == sources[winner]


@pytest.mark.parametrize(("quick_server", "promoted"), [(False, 0), (True, 1)])
def test_with_quick_server_the_finalist_is_promoted_by_the_objective(quick_server, promoted):
    # kernel 0 is fastest offline but loses 50% in server mode; only one finalist goes to the full stage
    sources = [kernel(0.80, marker="// STANDIN_SERVER_SPEED 1.5\n"), kernel(0.85)]
    evaluator = StandinEvaluator()
    with Archive() as archive:
        result = optimize(Shape(256, 256, 256), proposers=[ListProposer(sources)], evaluator=evaluator, archive=archive,
                          budget=Budget(evals=3), progress=False, finalists=1, batch=2, patience=2,
                          quick_server=quick_server)  # fmt: skip
    quick = [r for _, r in result.results if r.stage == "quick"]
    assert all(("server" in r.modes) == quick_server for r in quick)
    assert result.full == 1 and result.best.source == sources[promoted]


def test_an_unknown_objective_is_refused():
    with pytest.raises(ValueError, match="objective"):
        optimize(Shape(256, 256, 256), proposers=[ListProposer([kernel(1.0)])], evaluator=StandinEvaluator(),
                 budget=Budget(evals=2), progress=False, objective="fastest")  # fmt: skip
