"""The evaluator the experiment's Dask workers open: the test suite's stand-in, under a real GPU's name (so the
driver's archive and index queries meet the committed archive's rows of that GPU), each call taking
`SWEEP_EVAL_DELAY` seconds of the worker's time (what compiling and timing cost on a GPU host). The worker's
own CPU work is that sleep alone: the stand-in's static check (about 60 ms a source here, on the two cores the
driver needs too) is skipped, so only the driver's work competes for this machine's CPUs.

Importable by the worker processes: they inherit the driver's sys.path."""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from standin import STANDIN_GPU, StandinEvaluator  # noqa: E402

GPU = dataclasses.replace(STANDIN_GPU, name=os.environ.get("SWEEP_GPU_NAME", "NVIDIA H200"))


class DelayedStandin(StandinEvaluator):
    def __init__(self):
        super().__init__(GPU)
        from hgemm.evaluator import static_check

        static_check.check_source = lambda source: []  # template kernels pass it; its cost is in the delay

    def evaluate(self, sources, shape, **kw):
        delay = float(os.environ.get("SWEEP_EVAL_DELAY", "0") or 0)
        if delay:
            time.sleep(delay)
        return super().evaluate(sources, shape, **kw)
