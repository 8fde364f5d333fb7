"""The judge's side of the runner protocol, against scripted runners (no GPU): a runner that lies, hangs,
floods or dies costs its candidate a typed failure, never the judge."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hgemm.evaluator import judge
from hgemm.evaluator.runner import derive

TESTS = str(Path(__file__).parent)


def runner(behaviour: str) -> judge.RunnerProcess:
    """A scripted runner, started in the sandbox exactly as a real one is."""
    path = os.pathsep.join(p for p in (TESTS, os.environ.get("PYTHONPATH", "")) if p)
    return judge.RunnerProcess(module="scripted_runner", args=(behaviour,), env_extra={"PYTHONPATH": path})


def test_an_honest_reply_is_read_and_checked(hgemm_home):
    r = runner("honest")
    reply = r.request("time", 10, seeds=[1, 2])
    assert judge._number_list(reply, "us", 2) == [1.5, 2.5]
    assert judge._rc(reply) == 0
    r.kill()


@pytest.mark.parametrize(
    "behaviour, kind, words",
    [
        ("garbage", "crash", "not JSON"),
        ("list", "crash", "not an object"),
        ("huge", "crash", "exceeded"),
        ("segfault", "crash", "SIGSEGV"),
        ("cuda_error", "crash", "cudaErrorIllegalAddress"),
    ],
)
def test_a_misbehaving_runner_is_a_typed_failure(hgemm_home, behaviour, kind, words):
    r = runner(behaviour)
    with pytest.raises(judge.RunnerFailed) as failed:
        r.request("call", 20, slot=0)
    assert failed.value.kind == kind and words in str(failed.value)
    r.kill()
    assert r.proc.poll() is not None


def test_a_hanging_runner_is_killed_at_its_limit(hgemm_home):
    r = runner("hang")
    with pytest.raises(judge.RunnerFailed) as failed:
        r.request("call", 1.0, slot=0)
    assert failed.value.kind == "timeout"
    assert r.proc.poll() is not None  # killed, with its process group


def test_replies_carry_numbers_of_the_right_kind_only(hgemm_home):
    r = runner("bad_numbers")
    reply = r.request("time", 10)
    with pytest.raises(judge.RunnerFailed):
        judge._number_list(reply, "us", 3)  # NaN and negative times are refused
    with pytest.raises(judge.RunnerFailed):
        judge._rc(reply)  # a bool is not a return code
    with pytest.raises(judge.RunnerFailed):
        judge._number_list({"us": [1.0, 2.0, 3.0]}, "us", 2)  # more samples than asked for
    r.kill()


def test_a_runner_that_cannot_start_is_a_crash(hgemm_home):
    r = runner("not_ready")
    with pytest.raises(judge.RunnerFailed, match="could not initialise"):
        r.wait_ready(10)


def test_a_finished_runner_leaves_no_private_folder(hgemm_home):
    r = runner("honest")
    folder = r.folder
    assert folder.is_dir()
    r.kill()
    assert not folder.exists()


def test_seeds_derive_the_same_everywhere_and_differ_by_tag():
    assert derive(42, 1) == derive(42, 1)
    assert len({derive(42, 1), derive(42, 2), derive(43, 1), derive(42, 1, 0)}) == 4
    assert 0 <= derive(2**63 + 5, 7) < 2**63


def test_offline_rings_stay_within_their_memory_and_launch_limits():
    assert judge.slots_for(2.0, 64, 64, 64) == judge.timing.reps_for(2.0)
    assert judge.slots_for(0.1, 64, 64, 64) == judge.MAX_SLOTS
    assert judge.slots_for(5.0, 16384, 16384, 128) == 1  # one A and C exceed what a ring may hold ...
    per_slot = 2 * (4096 * 1024 + 4096 * 4096)
    assert judge.slots_for(1.0, 4096, 4096, 1024) * per_slot <= judge.RING_BYTES
