"""Worker supervision: hangs, aborts, segfaults and sticky errors become typed failures,
the caller survives, and the next request gets a fresh worker."""

from __future__ import annotations

import pytest
from hgemm.evaluator.worker import Worker, WorkerFailed


@pytest.fixture
def worker():
    w = Worker(session="workerprobe:ProbeSession")
    yield w
    w.close()


def test_answers(worker):
    assert worker.request("ping", 30, value=41) == 42


@pytest.mark.parametrize("op", ["abort", "segfault", "broken_context", "cuda_error"])
def test_death_is_a_typed_crash_and_worker_is_replaced(worker, op):
    assert worker.request("ping", 30, value=1) == 2
    with pytest.raises(WorkerFailed) as e:
        worker.request(op, 30)
    assert e.value.kind == "crash"
    assert not worker.alive
    assert worker.request("ping", 30, value=2) == 3  # a fresh worker


def test_hang_is_killed_at_its_time_limit(worker):
    with pytest.raises(WorkerFailed) as e:
        worker.request("hang", 1.5)
    assert e.value.kind == "timeout"
    assert "1 s limit" in str(e.value) or "2 s limit" in str(e.value)
    assert worker.request("ping", 30, value=5) == 6


def test_a_bug_in_the_session_is_reported_not_hidden(worker):
    with pytest.raises(RuntimeError, match="a bug in the session"):
        worker.request("fail", 30)
    assert worker.request("ping", 30, value=7) == 8  # the worker survives its own exceptions


def test_quit_lets_the_session_end_what_it_started(hgemm_home):
    w = Worker(session="workerprobe:ProbeSession")
    assert w.request("ping", 30, value=1) == 2
    w.close()
    assert (hgemm_home / "closed").read_text() == "closed"
