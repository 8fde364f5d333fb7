"""Baseline timings are cached per (GPU, driver, shape, mode); `hgemm bench` reuses them unless --fresh.

The GPU worker is replaced by a recording stand-in (orchestration only); the real path runs on a GPU."""

from __future__ import annotations

import json

from hgemm.evaluator import baseline_cache
from hgemm.evaluator.local import LocalEvaluator

from hgemm.core.record import GpuInfo
from hgemm.core.shape import Shape

FACTS = {"peak_tflops": 760.0, "bandwidth_gbs": 4300.0, "launch_us": 0.7}
TIMES = {"torch_nn": {"median_us": 2.5, "p10_us": 2.4, "p90_us": 2.6, "n": 15}}


class RecordingWorker:
    alive = True

    def __init__(self):
        self.calls = []

    def request(self, op, timeout_s, **args):
        self.calls.append((op, args))
        return {m: TIMES for m in args["modes"]}


def evaluator_without_gpu(name="NVIDIA H200") -> LocalEvaluator:
    ev = object.__new__(LocalEvaluator)
    ev.worker = RecordingWorker()
    ev._info = GpuInfo(name=name, cc="9.0", driver="580.159.04", sm_count=132, l2_bytes=60 << 20,
                       smem_per_block_optin=232448)
    ev._shape = Shape(128, 128, 128)
    ev.prepared = {"facts": FACTS, "missing": {}}
    return ev


def test_store_and_load_by_gpu_shape_and_mode():
    shape = Shape(64, 64, 64)
    assert baseline_cache.load("gpu-a", shape, "offline") is None
    baseline_cache.store("gpu-a", shape, "offline", TIMES)
    assert baseline_cache.load("gpu-a", shape, "offline") == TIMES
    assert baseline_cache.load("gpu-a", shape, "server") is None
    assert baseline_cache.load("gpu-a", Shape(64, 64, 128), "offline") is None
    assert baseline_cache.load("gpu-b", shape, "offline") is None
    assert list(json.loads(baseline_cache._path("gpu-a").read_text())) == ["64x64x64:offline"]  # the file's keys


def test_bench_times_once_then_reads_the_cache_unless_fresh():
    ev = evaluator_without_gpu()
    first = ev.baseline_table(Shape(128, 128, 128))
    assert [op for op, _ in ev.worker.calls] == ["time_baselines"] and first["cached"] == []
    second = ev.baseline_table(Shape(128, 128, 128))
    assert len(ev.worker.calls) == 1 and second["cached"] == ["offline", "server"]
    assert second["modes"]["offline"]["baselines"] == TIMES
    ev.baseline_table(Shape(128, 128, 128), fresh=True)
    assert len(ev.worker.calls) == 2


def test_another_driver_does_not_share_the_cache():
    ev = evaluator_without_gpu()
    ev.baseline_table(Shape(128, 128, 128))
    other = evaluator_without_gpu()
    other._info.driver = "590.1"
    other.baseline_table(Shape(128, 128, 128))
    assert len(other.worker.calls) == 1


def test_autotuning_falls_back_to_back_to_back_timing_when_the_host_disturbs_server_samples(monkeypatch):
    from hgemm.evaluator import baselines, timing

    from hgemm.core.record import Stats

    def disturbed(*args, **kwargs):
        raise timing.TimingDisturbed("1: only 4 of 10 samples were clean")

    def offline(contenders, stream, samples=15, reps=None):
        return {name: Stats(median_us=10.0 - i, p10_us=9.0, p90_us=11.0, n=samples) for i, name in enumerate(contenders)}

    algos = {"0": None, "1": None, "2": None}
    monkeypatch.setattr(timing, "time_server", disturbed)
    monkeypatch.setattr(timing, "time_offline", offline)
    assert baselines.pick_fastest(algos, None, 50 << 20) == (2, 8.0, "offline")

    def server(contenders, stream, l2_bytes, samples=30, mean_gap_us=200.0):
        return {name: Stats(median_us=5.0 + abs(1 - i), p10_us=5.0, p90_us=6.0, n=samples)
                for i, name in enumerate(contenders)}  # fmt: skip

    monkeypatch.setattr(timing, "time_server", server)
    assert baselines.pick_fastest(algos, None, 50 << 20) == (1, 5.0, "server")
