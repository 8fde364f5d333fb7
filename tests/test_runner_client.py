"""The judge's side of the runner protocol, against scripted runners (no GPU): a runner that lies, hangs,
floods or dies costs its candidate a typed failure, never the judge. Runners start ahead of their candidates
and create their CUDA context only between timings; a runner's exit is noticed when it happens; the check's
graph is timed where the timing would capture the same single launch again."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hgemm.evaluator import judge, runner_client
from hgemm.evaluator.phases import Phases
from hgemm.evaluator.runner import derive

from hgemm.core.shape import Shape

TESTS = str(Path(__file__).parent)


def runner(behaviour: str = "honest") -> judge.RunnerProcess:
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


def test_a_descriptor_sent_with_a_request_reaches_the_sandboxed_runner(hgemm_home):
    """The arena travels as a file descriptor over the runner's socket, through namespaces and seccomp."""
    r = runner("reads_fd")
    read_end, write_end = os.pipe()
    os.write(write_end, b"the arena")
    os.close(write_end)
    reply = r.request("open", 20, fds=(read_end,))
    os.close(read_end)
    assert reply["count"] == 1 and reply["text"] == "the arena"
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
    assert judge.slots_for(2.0, Shape(64, 64, 64)) == judge.timing.reps_for(2.0)
    assert judge.slots_for(0.1, Shape(64, 64, 64)) == judge.MAX_SLOTS
    assert judge.slots_for(5.0, Shape(16384, 16384, 128)) == 1  # one A and C exceed what a ring may hold ...
    per_slot = 2 * (4096 * 1024 + 4096 * 4096)
    assert judge.slots_for(1.0, Shape(4096, 4096, 1024)) * per_slot <= judge.RING_BYTES


def said_something(r: judge.RunnerProcess, within_s: float) -> bool:
    return bool(select.select([r.replies], [], [], within_s)[0])


def test_a_runner_has_one_hardware_connection(hgemm_home):
    r = runner("env")
    assert r.request("call", 10)["connections"] == str(runner_client.RUNNER_CONNECTIONS) == "1"
    r.kill()


def test_a_runner_boots_without_cuda_and_waits_to_be_told(hgemm_home):
    r = runner()
    assert not said_something(r, 1.0)  # booted, but no context until `init`
    r.wait_ready(10)
    assert r.init_sent and r.ready
    assert 0 < r.phases["runner_boot"] < 60 and r.phases["runner_cuda"] == 0.25
    r.kill()


def test_spares_boot_ahead_and_initialise_only_between_timings(hgemm_home):
    j = judge.Judge()
    j.new_runner = runner
    try:
        j._fill_spares()
        for s in j.spares:  # what `prepare` does
            s.init()
        first, second = j.spares
        assert j._runner("a") is first
        third = j.spares[1]
        assert j.spares == [second, third] and second.init_sent and not third.init_sent
        ph = Phases()
        j._quiet(ph)  # before timing: the initialising spare is waited for, the booting one left alone
        assert second.ready and not third.init_sent and not said_something(third, 0.3)
        assert {"retire_wait", "spare_wait"} <= set(ph)
        j.forget("a")  # after timing: every spare may initialise now
        assert third.init_sent and j.retiring == [first]
        j._quiet(ph)
        assert j.retiring == [] and first.proc.poll() is not None and third.ready
    finally:
        started = j.spares + j.retiring + list(j.runners.values())
        j.close()
    assert all(r.proc.poll() is not None and not r.folder.exists() for r in started) and j.spares == []


def test_a_quick_stage_timing_waits_for_no_context_and_a_full_stage_one_does(hgemm_home):
    j = judge.Judge()
    j.new_runner = runner
    try:
        j._fill_spares()
        for s in j.spares:
            s.init()
        j._runner("a")
        j.spares[0].wait_ready(10)
        j._runner("b")  # the spare that serves a third candidate is initialising now (0.25 s)
        j.forget("a")  # and a's runner is retiring
        initialising = j.spares[0]
        ph = Phases()
        started = time.monotonic()
        j._settle(ph, "quick")
        assert time.monotonic() - started < 0.2 and not initialising.ready
        assert not {"retire_wait", "spare_wait"} & set(ph)
        j._settle(ph, "full")
        assert initialising.ready and j.retiring == [] and {"retire_wait", "spare_wait"} <= set(ph)
    finally:
        j.close()


def retired_stubborn_runner() -> tuple[judge.Judge, judge.RunnerProcess]:
    """A judge whose candidate "a" was forgotten while its runner hangs in a request (it never reads quit)."""
    j = judge.Judge()
    stubborn = runner("hang")
    stubborn.wait_ready(10)
    stubborn.requests.write('{"op": "call", "args": {}}\n')
    stubborn.requests.flush()
    j.runners["a"] = stubborn
    j.forget("a")
    return j, stubborn


def test_a_runner_that_ignores_quit_is_killed_once_overdue_between_quick_timings(hgemm_home, monkeypatch):
    monkeypatch.setattr(judge, "RETIRE_WAIT_S", 0.5)
    j, stubborn = retired_stubborn_runner()
    j._settle(Phases(), "quick")
    assert j.retiring == [stubborn] and stubborn.proc.poll() is None  # not overdue yet: left alone
    time.sleep(0.6)
    started = time.monotonic()
    j._settle(Phases(), "quick")
    assert j.retiring == [] and stubborn.proc.poll() is not None and time.monotonic() - started < 5


def test_a_runner_that_ignores_quit_is_killed_before_timing(hgemm_home, monkeypatch):
    monkeypatch.setattr(judge, "RETIRE_WAIT_S", 0.5)
    j, stubborn = retired_stubborn_runner()
    started = time.monotonic()
    j._quiet(Phases())
    assert j.retiring == [] and stubborn.proc.poll() is not None and time.monotonic() - started < 10


def test_an_exit_is_noticed_when_it_happens():
    quick = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    started = time.monotonic()
    assert judge.wait_exit(quick, 10)
    assert time.monotonic() - started < 5
    slow = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    started = time.monotonic()
    assert not judge.wait_exit(slow, 0.3)
    assert 0.25 < time.monotonic() - started < 5
    slow.kill()
    slow.wait()


class FakeProblem:
    M = N = K = 64

    def __init__(self, slots):
        self.slots = slots
        self.checked = []

    def check_timeout(self):
        return 10.0

    def start_timing(self, b_seed, slots):
        pass

    def check_inputs(self, seed, slots, b_seed):
        self.checked.append(slots)

    def check_witnesses(self, seeds, slots, b_seed):
        pass


class FakeRunner:
    """Answers as a runner does: a return code for a capture, one time per seed."""

    def __init__(self, graphs=("check",)):
        self.graphs = set(graphs)
        self.phases = Phases()
        self.requests = []

    def request(self, op, timeout_s, **args):
        self.requests.append((op, args.get("name")))
        return {"rc": 0} if op == "capture" else {"us": [10.0] * len(args["seeds"])}


@pytest.mark.parametrize("slots, offline_graph", [(4, "offline-graph"), (1, "check")])
def test_a_single_launch_is_timed_on_the_checks_graph(slots, offline_graph):
    j = judge.Judge()
    j.problem, j.baselines = FakeProblem(slots), None
    r = FakeRunner()
    j.runners["a"] = r
    j.forget = lambda cid: None
    reply = j.time("a", ["offline", "server"], "full")
    assert (
        set(reply) == {"offline", "server", "phases"} and reply["offline"]["candidate"]["median_us"] == 10.0
    )
    captures = [name for op, name in r.requests if op == "capture"]
    assert captures == ([] if slots == 1 else ["offline-graph"])
    timed = {name for op, name in r.requests if op == "time"}
    assert timed == {offline_graph, "check"}
    assert {"time_candidate", "input_checks", "witnesses", "timing_setup"} <= set(reply["phases"])


def test_a_runner_never_checked_still_captures_for_timing():
    j = judge.Judge()
    j.problem, j.baselines = FakeProblem(1), None
    r = FakeRunner(graphs=())
    j.runners["a"] = r
    j.time("a", ["server"], "full")
    assert [name for op, name in r.requests if op == "capture"] == ["server-graph"]


def test_timing_protocols_other_than_the_rules_are_named_ones_only():
    # "bare" and "one_slot" exist for the benchmark of what the rules change; an unknown name is refused
    # before anything is timed, and an evaluation passes none (the rules are the default).
    with pytest.raises(ValueError, match="rules, bare, one_slot"):
        judge.Judge().time("any", ["offline"], "full", protocol="fast")
    assert judge.PROTOCOLS[0] == "rules"


def test_each_round_checks_the_inputs_after_the_baselines_samples_not_between():
    # Run between the candidate's samples and the baselines', the input check slowed the baselines' samples on
    # an H100; after them it still sees what the candidate did to B, Bt and the guard bands.
    events = []
    j = judge.Judge()
    j.problem = FakeProblem(4)
    j.problem.check_inputs = lambda seed, slots, b_seed: events.append("inputs")
    j.baselines = object()
    j._time_baselines = lambda mode, slots, chunk, rules, one_slot: (
        events.append("baselines") or {"torch_nn": [12.0] * len(chunk)}
    )
    r = FakeRunner()
    r.request = lambda op, timeout_s, **args: (
        {"rc": 0} if op == "capture" else (events.append("candidate") or {"us": [10.0] * len(args["seeds"])})
    )
    j.runners["a"] = r
    reply = j.time("a", ["offline"], "full")
    assert reply["offline"]["torch_nn"]["median_us"] == 12.0
    assert events == ["candidate", "baselines", "inputs"] * judge.ROUNDS
