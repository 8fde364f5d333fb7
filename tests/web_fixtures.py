"""A filled archive for the web view's tests: synthetic runs with LLM calls, plus one hostile kernel whose
text must show as text, a child of a real kernel (so it has a parent diff) and evaluated on a shape."""

from __future__ import annotations

from pathlib import Path

from hgemm.archive import Archive

from hgemm.core.record import EvalRecord, ModeResult, Stats
from hgemm.testing.web_archive import HOSTILE, add_hostile, fill


def build(path: Path, n: int = 1500) -> dict:
    with Archive(path) as a:
        added = fill(a, n, seed=3, per_run=300, kernels=300)
        parent = a.execute("SELECT parent FROM kernel_parents ORDER BY child, parent LIMIT 1")[0][0]
        hostile = add_hostile(a, parent)
        r = EvalRecord(hostile, 1024, 1024, 2048, gpu="NVIDIA H100", cc="9.0", stage="full", compiled=True,
                       correct=True)  # fmt: skip
        for mode in ("offline", "server"):
            base = {"lt_autotuned": Stats(10.0, 9.9, 10.2, 20), "torch_nn": Stats(11.0, 10.9, 11.2, 20)}
            r.modes[mode] = ModeResult(mode, Stats(4.0, 3.9, 4.1, 20), base, floor_us=3.0).finish(r.shape)
        r.ncu = {"sm_throughput_pct": 91.5, "dram_throughput_pct": 33.0}
        a.add_evaluation(hostile, r)
        a.add_llm_call(None, "test-model", 100, 50, 0.01, 1.0, "kernel", kernel_hash=hostile,
                       prompt="make it <fast>", reply=HOSTILE)  # fmt: skip
    return {"path": path, "parent": parent, "hostile": hostile, **added}
