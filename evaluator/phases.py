"""Where an evaluation's time goes: seconds per phase, kept in every `EvalRecord` as `phases`.

Parts of the GPU worker's time for the record (`eval_seconds`), each summed over the modes:
- prepare: buffers, GPU facts and baselines of the shape, when this record was the first on it
- runner_wait: taking the candidate's runner, waiting for it where it was not ready yet
- open: the runner maps the judge's buffers and loads the candidate
- references: the correctness suite's draws, float64 references and cuBLAS errors (judge)
- calls: the candidate's calls, capture and replays in the correctness suite (runner)
- verify: comparing what those calls wrote (judge)
- retire_wait: before a full-stage timing, waiting for earlier runners to exit
- spare_wait: before a full-stage timing, waiting for the next candidates' runners to finish initialising CUDA
- capture: capturing the offline timing graph
- timing_setup: new B values, poisoned outputs and cleared witnesses before a mode's samples
- time_candidate: the candidate's timed samples, with their input refreshes and witnesses (runner)
- time_baselines: the four baselines' samples on the same seeds (judge)
- input_checks: inputs and guard bands after each round of samples
- witnesses: checking every timed output's witnesses
- teardown: telling the runner to go
- ncu, sanitize: the optional profiles

Outside `eval_seconds`:
- compile: this source's static check, nvcc, audit and link (a cache lookup when it was built before)
- runner_boot: the candidate's runner, from its start to ready for CUDA (sandbox, interpreter, imports, the
  driver's `cuInit`)
- runner_cuda: that runner's CUDA context creation. Both happen while earlier candidates are evaluated, and
  only the part not hidden there is paid, as runner_wait or spare_wait.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

OUTSIDE = ("compile", "runner_boot", "runner_cuda")  # not parts of eval_seconds


class Phases(dict):
    """Seconds per phase name, summed over repeats."""

    def add(self, name: str, seconds: float) -> None:
        self[name] = self.get(name, 0.0) + seconds

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - started)

    def rounded(self) -> dict[str, float]:
        return {name: round(s, 4) for name, s in self.items()}
