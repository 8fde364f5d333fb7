"""Confirmation (agent/loop.py `_Run.confirm`): after a search, its best kernels are measured again in fresh,
interleaved evaluations and the winner is the best by those figures; the archive ranks them; reports say
how each figure was measured. Stand-in evaluator, real SQLite archive."""

from __future__ import annotations

from hgemm.agent.loop import Budget, optimize
from hgemm.agent.sweep import render_markdown, run_sweep, summarize
from hgemm.archive import Archive
from standin import StandinEvaluator
from test_loop import ListProposer, kernel

from hgemm.core.shape import Shape

HONEST = kernel(0.90)  # always 0.90 of the base time
LUCKY = kernel(0.95, marker="// STANDIN_LUCKY 0.80\n")  # 0.76 once, then 0.95
OTHER = kernel(0.97)


def _search(archive, evaluator, **kw):
    return optimize(Shape(256, 256, 256), proposers=[ListProposer([LUCKY, HONEST, OTHER])], evaluator=evaluator,
                    archive=archive, budget=Budget(evals=12), progress=False, finalists=3, objective="offline", **kw)


def test_a_lucky_search_measurement_is_not_what_wins(hgemm_home):
    evaluator = StandinEvaluator()
    with Archive() as archive:
        result = _search(archive, evaluator)
        lucky_hash = next(c.hash for c in [r[0] for r in result.results] if c.source == LUCKY)
        honest_hash = next(c.hash for c in [r[0] for r in result.results] if c.source == HONEST)
        full = {c.hash: r for c, r in result.results if r.stage == "full"}
        assert full[lucky_hash].speedup_best("offline") > full[honest_hash].speedup_best("offline")  # lucky first
        assert result.best.hash == honest_hash  # ... but the confirmation crowns the honest one
        assert result.best_record.stage == "confirmed"
        conf = result.confirmation
        assert conf["finalists"] == 3 and conf["repetitions"] == 3 and len(conf["winner_scores"]) == 3
        assert result.confirm_evals == 9
        # the archive ranks the confirmed figures: the lucky kernel's search rows no longer rank
        best = archive.best(Shape(256, 256, 256), mode="offline")
        assert best["kernel"] == honest_hash and best["stage"] == "confirmed"
        ranked = archive.execute("SELECT stage FROM evaluations WHERE kernel = ? AND ranked = 1", (lucky_hash,))
        assert {r["stage"] for r in ranked} == {"confirmed"}
        reps = archive.execute("SELECT count(*) AS n FROM records WHERE stage = 'confirm-rep'")[0]["n"]
        assert reps == 9


def test_repetitions_are_interleaved(hgemm_home):
    evaluator = StandinEvaluator()
    with Archive() as archive:
        _search(archive, evaluator)
    assert evaluator.calls[-3:] == [("full", 3)] * 3  # three repetitions, each of all three finalists
    tail = evaluator.order[-9:]
    assert tail[0:3] == tail[3:6] == tail[6:9] and len(set(tail[0:3])) == 3  # A B C, A B C, A B C


def test_confirm_zero_reports_the_search_and_says_so(hgemm_home):
    evaluator = StandinEvaluator()
    with Archive() as archive:
        result = _search(archive, evaluator, confirm=0)
    assert result.confirmation is None and result.confirm_evals == 0
    assert result.best.source == LUCKY and result.best_record.stage == "full"


def test_sweep_reports_say_how_they_measured(hgemm_home):
    evaluator = StandinEvaluator()
    shapes = [Shape(256, 256, 256), Shape(512, 256, 128)]
    with Archive() as archive:
        rows = run_sweep(shapes, evaluator=evaluator, archive=archive, budget_evals=10, progress=False)
        assert all(r["measured"] == "confirmed" and len(r["confirm_scores"]) == 3 for r in rows)
        text = render_markdown(rows, summarize(rows), "t")
        assert "2 of 2 shapes confirmed" in text
        again = run_sweep(shapes, evaluator=evaluator, archive=archive, budget_evals=10, progress=False)
        assert all(r["status"] == "resumed" and r["measured"] == "confirmed" for r in again)
        assert [r["kernel"] for r in again] == [r["kernel"] for r in rows]
        unconfirmed = run_sweep([Shape(128, 128, 128)], evaluator=evaluator, archive=archive, budget_evals=10,
                                progress=False, confirm=0)
        assert unconfirmed[0]["measured"] == "unconfirmed"
