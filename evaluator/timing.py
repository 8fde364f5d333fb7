"""The one timing module: every contender, candidate or baseline, is sampled by the loops here.

A sampling loop drives a `Device`: one stream on which it records events, replays a contender's graph
and enqueues the evaluator's own work between samples. The judge (baselines) and each runner (one
candidate) use the same loops on the same seeds; the runner imports this module without torch.

- offline: each sample is one replay of a graph of back-to-back launches, divided by its launch count;
  contenders rotate sample by sample. Samples are enqueued without waiting; a short spin before each start
  event gives the host a head start, and a sample the host fell behind on is dropped, as in server mode.
- server: before each sample, with the GPU idle, lines a kernel marked evict_last go back to normal priority
  (they outlast any amount of writing otherwise; `Device.reset_l2`, which returns once the GPU has done it), the
  host idles for an exponential random gap, the GPU spins to give the host a head start, the L2 is flushed (at
  least twice its size written), then one single-launch replay is timed. The reset is not part of the flush:
  called there, with the spin still running, it slowed the timed launch after it by about 1 us (H100,
  experiments/2026-11-28-shapes-real-worst). A sample counts only if the host had enqueued the whole timed
  section before the GPU reached its start event; otherwise it is dropped, taken again (up to RETRIES times) and
  the head start grows.
  A contender left with fewer than half its samples raises TimingDisturbed.
- Before every sample, `Device.refresh(seed)` gives the inputs new values and poisons the outputs, outside
  the timed window; after it, `Device.after(...)` may record what the judge needs to check that sample.
- Reported: median, p10 and p90 of the samples, in microseconds.
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # imported where used: a runner needs none of hgemm.core
    from hgemm.core.record import Stats

RETRIES = 3  # attempts per server sample, at most, before giving up on it
HEAD_START_CYCLES = 100_000  # a one-thread spin (about 50-100 us) before each flush: the host's head start
OFFLINE_HEAD_START_CYCLES = 30_000  # the spin before each offline sample (about 15-20 us), grown the same way
MAX_HEAD_START_CYCLES = 1_600_000  # what the head start grows to, at most, once samples are dropped (~1 ms)
dropped_samples = 0  # samples dropped in this process because the host fell behind (for probes and tests)


class TimingDisturbed(RuntimeError):
    """The host could not keep ahead of the GPU for enough samples: no honest time to report."""


class Device(Protocol):
    """One stream and what a sampling loop enqueues on it."""

    def event(self) -> object: ...
    def record(self, event: object) -> None: ...
    def done(self, event: object) -> bool: ...
    def elapsed_us(self, start: object, end: object) -> float: ...
    def wait(self, event: object) -> None: ...
    def sync(self) -> None: ...
    def spin(self, cycles: int) -> None: ...
    def reset_l2(self) -> None: ...  # with the GPU idle; returns once done
    def flush(self) -> None: ...
    def replay(self, name: str) -> None: ...
    def refresh(self, seed: int) -> None: ...
    def after(self, name: str, sample: int, seed: int) -> None: ...


def quantiles(samples: Sequence[float]) -> Stats:
    """Median, p10 and p90 (linear interpolation, as numpy and torch compute them)."""
    from hgemm.core.record import Stats

    v = sorted(samples)
    if not v:
        raise ValueError("no samples")

    def q(p: float) -> float:
        x = p * (len(v) - 1)
        lo = int(x)
        hi = min(lo + 1, len(v) - 1)
        return v[lo] + (v[hi] - v[lo]) * (x - lo)

    return Stats(median_us=q(0.5), p10_us=q(0.1), p90_us=q(0.9), n=len(v))


def _enough(name: str, got: int, wanted: int) -> None:
    if got < max(1, (wanted + 1) // 2):
        raise TimingDisturbed(
            f"{name}: only {got} of {wanted} samples were clean: the host fell behind the GPU "
            "inside the timed window (is the machine busy?)"
        )


def offline_samples(dev: Device, names: Sequence[str], seeds: Sequence[int], launches: dict[str, int],
                    first: int = 0) -> dict[str, list[float]]:
    """One sample per seed for each contender, rotating the order; microseconds per launch.
    `first` numbers the samples (the witness slot of sample i is first + i). Nothing waits between samples;
    a spin before each start event keeps the GPU busy while the host enqueues the timed section, so the
    window never holds the host's launch latency. A sample whose start event had completed when its replay
    was enqueued is dropped (the host fell behind) and the head start grows."""
    global dropped_samples
    names = list(names)
    pending: dict[str, list[tuple[object, object]]] = {n: [] for n in names}
    head_start = OFFLINE_HEAD_START_CYCLES
    for i, seed in enumerate(seeds):
        k = i % len(names)
        for name in names[k:] + names[:k]:
            dev.refresh(seed)
            dev.spin(head_start)  # touches no memory: the L2 keeps what the last sample left there
            start, end = dev.event(), dev.event()
            dev.record(start)
            dev.replay(name)
            dev.record(end)
            clean = not dev.done(start)
            dev.after(name, first + i, seed)
            if clean:
                pending[name].append((start, end))
            else:
                dropped_samples += 1
                head_start = min(4 * head_start, MAX_HEAD_START_CYCLES)
    dev.sync()
    return {n: [dev.elapsed_us(s, e) / launches[n] for s, e in ev] for n, ev in pending.items()}


def server_samples(dev: Device, names: Sequence[str], seeds: Sequence[int], rng: random.Random,
                   mean_gap_us: float = 200.0, first: int = 0, require: bool = True) -> dict[str, list[float]]:
    """One clean single-launch sample per seed for each contender, after an L2 flush and a random gap."""
    global dropped_samples
    names = list(names)
    out: dict[str, list[float]] = {n: [] for n in names}
    head_start = HEAD_START_CYCLES
    collecting = gc.isenabled()
    gc.disable()
    try:
        for i, seed in enumerate(seeds):
            order = names[:]
            rng.shuffle(order)
            for name in order:
                for _attempt in range(RETRIES):
                    dev.sync()
                    dev.reset_l2()  # no line the last contender marked evict_last outlasts the flush
                    time.sleep(rng.expovariate(1.0 / mean_gap_us) * 1e-6)  # GPU idle, at random intervals
                    dev.refresh(seed)
                    dev.spin(head_start)  # touches no memory
                    dev.flush()
                    start, end = dev.event(), dev.event()
                    dev.record(start)
                    dev.replay(name)
                    dev.record(end)
                    clean = not dev.done(start)
                    dev.after(name, first + i, seed)
                    dev.wait(end)
                    if clean:
                        out[name].append(dev.elapsed_us(start, end))
                        break
                    dropped_samples += 1
                    head_start = min(4 * head_start, MAX_HEAD_START_CYCLES)  # the host needs longer
    finally:
        if collecting:
            gc.enable()
    if require:
        for n, v in out.items():
            _enough(n, len(v), len(seeds))
    return out


def reps_for(estimate_us: float, target_us: float = 300.0, max_reps: int = 200) -> int:
    """Launches per offline graph so one replay lasts about target_us."""
    return int(max(1, min(max_reps, target_us // max(estimate_us, 0.5))))


def seeds_for(count: int, rng: random.Random) -> list[int]:
    return [rng.getrandbits(63) for _ in range(count)]


# -- trusted callables through torch (GPU facts, autotuning, probes) -----------------------------------

Contender = Callable[[], None]


class TorchDevice:
    """A Device over a torch stream whose contenders are captured torch callables; inputs never change
    (for the evaluator's own measurements and probes, not for candidates)."""

    def __init__(self, stream, graphs: dict[str, object], flush: Contender | None = None):
        import torch

        self.torch, self.stream, self.graphs, self._flush = torch, stream, graphs, flush
        self._rt = None

    def event(self):
        return self.torch.cuda.Event(enable_timing=True)

    def record(self, event) -> None:
        event.record(self.stream)

    def done(self, event) -> bool:
        return event.query()

    def elapsed_us(self, start, end) -> float:
        return start.elapsed_time(end) * 1000.0

    def wait(self, event) -> None:
        event.synchronize()

    def sync(self) -> None:
        self.stream.synchronize()

    def spin(self, cycles: int) -> None:
        self.torch.cuda._sleep(cycles)

    def reset_l2(self) -> None:
        if self._rt is None:
            from hgemm.evaluator.cudart import Runtime

            self._rt = Runtime()  # torch's libcudart, already loaded
        self._rt.reset_persisting_l2()
        self._rt.device_sync()

    def flush(self) -> None:
        self._flush()

    def replay(self, name: str) -> None:
        self.graphs[name].replay()

    def refresh(self, seed: int) -> None:
        pass

    def after(self, name: str, sample: int, seed: int) -> None:
        pass


def capture(fn: Contender, reps: int, stream):
    """Capture `reps` back-to-back calls of fn into one graph on `stream`, after one eager warm-up call
    (library handles and workspaces are created outside the capture)."""
    import torch

    with torch.cuda.stream(stream):
        fn()
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(reps):
                fn()
    return graph


def estimate_us(fn: Contender, stream) -> float:
    """A rough single-call time (eager, events), used only to size graphs."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        fn()
        start.record(stream)
        for _ in range(3):
            fn()
        end.record(stream)
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / 3


class Flusher:
    """Evicts the L2: a buffer of at least twice its size written. Lines marked evict_last outlast it; in
    `server_samples` they are reset before (`Device.reset_l2`), used alone it leaves them."""

    def __init__(self, l2_bytes: int):
        import torch

        self.buf = torch.empty(max(2 * l2_bytes, 64 << 20) // 4, dtype=torch.int32, device="cuda")

    def __call__(self) -> None:
        self.buf.fill_(random.randrange(1 << 30))


def time_offline(contenders: dict[str, Contender], stream, samples: int = 15, reps: int | None = None
                 ) -> dict[str, Stats]:
    """Back-to-back replays of trusted callables on fixed inputs (a warm-up replay first)."""
    import torch

    launches = {n: reps or reps_for(estimate_us(fn, stream)) for n, fn in contenders.items()}
    graphs = {n: capture(fn, launches[n], stream) for n, fn in contenders.items()}
    dev = TorchDevice(stream, graphs)
    with torch.cuda.stream(stream):
        for g in graphs.values():
            g.replay()
        raw = offline_samples(dev, list(graphs), [0] * samples, launches)
    return {n: quantiles(v) for n, v in raw.items()}


def time_server(contenders: dict[str, Contender], stream, l2_bytes: int, samples: int = 30,
                mean_gap_us: float = 200.0, seed: int = 0, flush: Contender | None = None) -> dict[str, Stats]:
    """Single launches of trusted callables after an L2 flush (`flush` replaces it, for probes)."""
    import torch

    graphs = {name: capture(fn, 1, stream) for name, fn in contenders.items()}
    dev = TorchDevice(stream, graphs, flush or Flusher(l2_bytes))
    with torch.cuda.stream(stream):
        for g in graphs.values():
            g.replay()
        raw = server_samples(dev, list(graphs), [0] * samples, random.Random(seed), mean_gap_us)
    return {n: quantiles(v) for n, v in raw.items()}
