"""The one timing module: every contender (candidate or baseline) is timed here, the same way.

A contender is a zero-argument callable that enqueues its GPU work on the current stream and can be captured
in a CUDA graph.

- Host work never counts: each contender is captured once and only graph replays are timed, with events.
  Contenders are interleaved sample by sample.
- offline: a sample is one replay of `reps` back-to-back launches (warm L2), divided by `reps`.
- server: a sample is one single-launch replay after an L2 flush (writing at least twice its size) and a
  random exponential idle gap. At least 30 samples per contender; the garbage collector is paused.
- Reported: median, p10 and p90 over samples, in microseconds.
- A server sample counts only if the host enqueued its whole timed section before the GPU reached its start
  event (else it times the host). A spin kernel before the flush gives that head start; a late sample is
  retaken up to RETRIES times with a longer spin, and a contender left with under half its samples raises
  `TimingDisturbed`. Offline replays queue back to back and need no such check.
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Callable

import torch

from hgemm.core.record import Stats

Contender = Callable[[], None]
RETRIES = 3  # attempts per server sample, at most, before giving up on it
HEAD_START_CYCLES = 100_000  # a one-thread spin (about 50-100 us) before each flush: the host's head start
MAX_HEAD_START_CYCLES = 1_600_000  # what the head start grows to, at most, once samples are dropped (~1 ms)
dropped_samples = 0  # samples dropped in this process because the host fell behind (for probes and tests)


class TimingDisturbed(RuntimeError):
    """The host could not keep ahead of the GPU for enough samples: no honest time to report."""


def _enqueue_timed(graph: torch.cuda.CUDAGraph, stream: torch.cuda.Stream):
    """Record start, replay `graph`, record end; return the two events and whether the sample is
    clean (the start event had not yet completed once everything was enqueued)."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(stream)
    graph.replay()
    e.record(stream)
    clean = not s.query()
    if not clean:
        global dropped_samples
        dropped_samples += 1
    return s, e, clean


def _enough(name: str, got: int, wanted: int) -> None:
    if got < max(1, (wanted + 1) // 2):
        raise TimingDisturbed(
            f"{name}: only {got} of {wanted} samples were clean: the host fell behind the GPU "
            "inside the timed window (is the machine busy?)"
        )


def capture(fn: Contender, reps: int, stream: torch.cuda.Stream) -> torch.cuda.CUDAGraph:
    """Capture `reps` back-to-back calls of fn into one graph on `stream`, after one eager
    warm-up call (library handles and workspaces are created outside the capture)."""
    with torch.cuda.stream(stream):
        fn()
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream):
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(reps):
                fn()
    return graph


def _stats(samples_us: list[float]) -> Stats:
    t = torch.tensor(samples_us, dtype=torch.float64)
    q = torch.quantile(t, torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)).tolist()
    return Stats(median_us=q[1], p10_us=q[0], p90_us=q[2], n=len(samples_us))


def reps_for(estimate_us: float, target_us: float = 300.0, max_reps: int = 200) -> int:
    """Launches per offline graph so one replay lasts about target_us."""
    return int(max(1, min(max_reps, target_us // max(estimate_us, 0.5))))


def estimate_us(fn: Contender, stream: torch.cuda.Stream) -> float:
    """A rough single-call time (eager, events), used only to size graphs."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        fn()
        start.record(stream)
        for _ in range(3):
            fn()
        end.record(stream)
    end.synchronize()
    return start.elapsed_time(end) * 1000.0 / 3


def time_offline(
    contenders: dict[str, Contender], stream: torch.cuda.Stream, samples: int = 15, reps: int | None = None
) -> dict[str, Stats]:
    graphs: dict[str, tuple[torch.cuda.CUDAGraph, int]] = {}
    for name, fn in contenders.items():
        r = reps or reps_for(estimate_us(fn, stream))
        graphs[name] = (capture(fn, r, stream), r)
    events = {n: [] for n in graphs}
    names = list(graphs)
    with torch.cuda.stream(stream):
        for g, _ in graphs.values():  # warm-up replay
            g.replay()
        for i in range(samples):
            order = names[i % len(names) :] + names[: i % len(names)]
            for name in order:
                g, _ = graphs[name]
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(stream)
                g.replay()
                e.record(stream)
                events[name].append((s, e))
    stream.synchronize()
    return {n: _stats([s.elapsed_time(e) * 1000.0 / graphs[n][1] for s, e in ev]) for n, ev in events.items()}


class Flusher:
    """Evicts the L2 by writing a buffer of at least twice its size."""

    def __init__(self, l2_bytes: int):
        self.buf = torch.empty(max(2 * l2_bytes, 64 << 20) // 4, dtype=torch.int32, device="cuda")

    def __call__(self) -> None:
        self.buf.fill_(random.randrange(1 << 30))


def time_server(
    contenders: dict[str, Contender],
    stream: torch.cuda.Stream,
    l2_bytes: int,
    samples: int = 30,
    mean_gap_us: float = 200.0,
    seed: int = 0,
    flush: Contender | None = None,
) -> dict[str, Stats]:
    """`flush` replaces the L2 flush before each sample (for probes of what server mode costs)."""
    rng = random.Random(seed)
    flush = flush or Flusher(l2_bytes)
    graphs = {name: capture(fn, 1, stream) for name, fn in contenders.items()}
    out: dict[str, list[float]] = {n: [] for n in graphs}
    names = list(graphs)
    head_start = HEAD_START_CYCLES
    collecting = gc.isenabled()
    gc.disable()
    try:
        with torch.cuda.stream(stream):
            for g in graphs.values():
                g.replay()
            for _ in range(samples):
                rng.shuffle(names)
                for name in names:
                    for _attempt in range(RETRIES):
                        stream.synchronize()
                        time.sleep(rng.expovariate(1.0 / mean_gap_us) * 1e-6)  # GPU idle, at random intervals
                        torch.cuda._sleep(head_start)  # touches no memory
                        flush()
                        s, e, clean = _enqueue_timed(graphs[name], stream)
                        e.synchronize()
                        if clean:
                            out[name].append(s.elapsed_time(e) * 1000.0)
                            break
                        head_start = min(4 * head_start, MAX_HEAD_START_CYCLES)  # the host needs longer
    finally:
        if collecting:
            gc.enable()
    del flush
    for n, v in out.items():
        _enough(n, len(v), samples)
    return {n: _stats(v) for n, v in out.items()}
