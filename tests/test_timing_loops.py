"""The sampling loops of evaluator/timing.py on a scripted device (no GPU): order, refreshes before every
sample, witnesses after it, dropped server samples taken again, and too few clean samples refused."""

from __future__ import annotations

import random

import pytest
from hgemm.evaluator import timing


class ScriptedDevice:
    """A timing.Device whose events carry scripted times; `late` names the samples whose start event had
    already completed when the host finished enqueuing them (the host fell behind)."""

    def __init__(self, times: dict[str, float], late=lambda n: False):
        self.times, self.late = times, late
        self.log: list[tuple] = []
        self.clock = 0.0
        self.samples = 0
        self.current: str | None = None

    def event(self):
        return {"t": None}

    def record(self, event) -> None:
        if self.current is not None and event.get("start") is None and self.log and self.log[-1][0] == "replay":
            self.clock += self.times[self.current]
        event["t"] = self.clock
        self.log.append(("record",))

    def done(self, event) -> bool:
        return self.late(self.samples)

    def elapsed_us(self, start, end) -> float:
        return end["t"] - start["t"]

    def wait(self, event) -> None:
        pass

    def sync(self) -> None:
        self.log.append(("sync",))

    def spin(self, cycles: int) -> None:
        self.log.append(("spin", cycles))

    def reset_l2(self) -> None:
        self.log.append(("reset_l2",))

    def flush(self) -> None:
        self.log.append(("flush",))

    def replay(self, name: str) -> None:
        self.current = name
        self.samples += 1
        self.log.append(("replay", name))

    def refresh(self, seed: int) -> None:
        self.log.append(("refresh", seed))

    def after(self, name: str, sample: int, seed: int) -> None:
        self.log.append(("after", name, sample, seed))


def test_offline_samples_refresh_before_and_witness_after_every_sample():
    dev = ScriptedDevice({"a": 30.0, "b": 60.0})
    out = timing.offline_samples(dev, ["a", "b"], [11, 12, 13], {"a": 3, "b": 2}, first=5)
    assert out == {"a": [10.0] * 3, "b": [30.0] * 3}  # per launch
    replays = [e for e in dev.log if e[0] == "replay"]
    assert [r[1] for r in replays] == ["a", "b", "b", "a", "a", "b"]  # rotated sample by sample
    for i, entry in enumerate(dev.log):
        if entry[0] == "replay":
            assert [e[0] for e in dev.log[i - 3:i]] == ["refresh", "spin", "record"]  # refresh, head start, start
            assert dev.log[i + 2][0] == "after"  # replay, end event, witness
    afters = [e for e in dev.log if e[0] == "after"]
    assert {(e[2], e[3]) for e in afters} == {(5, 11), (6, 12), (7, 13)}


def test_offline_samples_drop_late_samples_and_grow_the_head_start():
    late = {2, 3}  # the host fell behind on the second and third samples
    dev = ScriptedDevice({"a": 30.0}, late=lambda n: n in late)
    before = timing.dropped_samples
    out = timing.offline_samples(dev, ["a"], [1, 2, 3, 4, 5], {"a": 3})
    assert out == {"a": [10.0] * 3}
    assert timing.dropped_samples - before == 2
    spins = [e[1] for e in dev.log if e[0] == "spin"]
    assert spins[:2] == [timing.OFFLINE_HEAD_START_CYCLES] * 2
    assert spins[2] == 4 * spins[1] and spins[3] == 4 * spins[2] == spins[4]
    assert sum(1 for e in dev.log if e[0] == "after") == 5  # every sample's witness, the dropped ones too


def test_server_samples_drop_late_samples_and_grow_the_head_start():
    late = {1, 2}  # the first two attempts: the host fell behind
    dev = ScriptedDevice({"a": 7.0}, late=lambda n: n in late)
    out = timing.server_samples(dev, ["a"], [1, 2, 3], random.Random(0), mean_gap_us=1.0)
    assert out == {"a": [7.0] * 3}
    spins = [e[1] for e in dev.log if e[0] == "spin"]
    assert spins[0] == timing.HEAD_START_CYCLES and spins[2] > spins[1] > spins[0]
    flushes = sum(1 for e in dev.log if e[0] == "flush")
    assert flushes == 5  # every attempt flushes, the two dropped ones too


def test_a_host_that_is_always_late_gets_no_time():
    dev = ScriptedDevice({"a": 7.0}, late=lambda n: True)
    with pytest.raises(timing.TimingDisturbed):
        timing.server_samples(dev, ["a"], [1, 2, 3, 4], random.Random(0), mean_gap_us=1.0)
    dev = ScriptedDevice({"a": 7.0}, late=lambda n: True)
    assert timing.server_samples(dev, ["a"], [1, 2], random.Random(0), mean_gap_us=1.0, require=False) == {"a": []}


def test_quantiles_interpolate_like_numpy():
    s = timing.quantiles([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (s.median_us, s.p10_us, s.p90_us, s.n) == (3.0, 1.4, 4.6, 5)
    with pytest.raises(ValueError):
        timing.quantiles([])


def test_server_samples_reset_l2_marks_with_the_gpu_idle_before_every_attempt():
    """Lines a kernel marked evict_last outlast any amount of writing: every server attempt, the dropped ones too,
    resets them right after the GPU went idle, before the gap, the refresh, the head-start spin and the flush."""
    late = {1}
    dev = ScriptedDevice({"a": 7.0, "b": 9.0}, late=lambda n: n in late)
    timing.server_samples(dev, ["a", "b"], [1, 2], random.Random(0), mean_gap_us=1.0)
    kinds = [e[0] for e in dev.log]
    attempts = [i for i, k in enumerate(kinds) if k == "sync"]
    assert len(attempts) == 5  # two samples of each contender, one taken again
    for i in attempts:
        assert kinds[i:i + 6] == ["sync", "reset_l2", "refresh", "spin", "flush", "record"]


def test_the_runner_device_resets_then_waits_and_its_flush_only_writes():
    """The reset returns once the GPU has done it (a device-wide sync): run behind the head-start spin, inside
    the flush, it had slowed the timed launch after it by about 1 us."""
    from hgemm.evaluator.runner import StreamDevice

    class Recorder:
        def __init__(self):
            self.calls = []

        def reset_persisting_l2(self):
            self.calls.append(("reset",))

        def device_sync(self):
            self.calls.append(("device_sync",))

        def memset_async(self, ptr, value, nbytes, stream):
            self.calls.append(("memset", ptr, nbytes, stream))

    rt = Recorder()
    dev = StreamDevice(rt, 7, None, {}, flush_ptr=4096, flush_bytes=1 << 27)
    dev.reset_l2()
    dev.flush()
    dev.flush()
    assert rt.calls == [("reset",), ("device_sync",)] + [("memset", 4096, 1 << 27, 7)] * 2
