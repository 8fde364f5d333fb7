"""The four baselines, each captured in graphs over the same slots, inputs and outputs as the candidate.

- torch_nn: torch.matmul(A, B)             (cuBLAS, both operands row-major)
- torch_tn: torch.matmul(A, Bt.T)          (cuBLAS on the transposed copy of B)
- lt_heuristic: cuBLASLt's top-1 heuristic algorithm (nvmath-python, real workspace)
- lt_autotuned: the fastest of up to 100 cuBLASLt heuristic algorithms, timed here with
  L2 flushes (back to back when a busy host disturbs those samples); the winner's index is cached
  per (GPU, driver, shape).

Planning happens once, before any timing; only `execute` is captured and replayed, so
no contender pays for host work. Without nvmath-python the two cuBLASLt baselines are
absent and `missing` says why.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from types import SimpleNamespace

import torch

from hgemm.core.paths import state_dir, write_text_atomic
from hgemm.core.shape import Shape

LT_CANDIDATES = 100


class Baselines:
    """The baselines on a judge Problem: `graphs(slots)` captures each of them over slots 0..slots-1 (one
    launch per slot, each on that slot's A and output), as the candidate's timing graph does."""

    def __init__(self, problem, gpu_key: str, l2_bytes: int):
        p = problem
        stream = p.stream
        self.problem = p
        self.calls: dict[str, Callable[[int], None]] = {
            "torch_nn": lambda i: torch.mm(p.a_ring[i], p.b, out=p.c[i]),
            "torch_tn": lambda i: torch.mm(p.a_ring[i], p.bt.t(), out=p.c[i]),
        }
        self._graphs: dict[tuple[int, bool], dict[str, torch.cuda.CUDAGraph]] = {}
        self.missing: dict[str, str] = {}
        self._mm = None
        try:
            from nvmath.linalg.advanced import Matmul, MatmulPlanPreferences
        except ImportError as e:
            self.missing = {b: f"nvmath-python not importable: {e}" for b in ("lt_heuristic", "lt_autotuned")}
            return
        with torch.cuda.stream(stream):
            mm = Matmul(p.a, p.b, stream=stream)
            algos = mm.plan(preferences=MatmulPlanPreferences(limit=LT_CANDIDATES), stream=stream)
        self._mm = mm
        self.lt_count = len(algos)

        def lt(algorithm):
            def call(i: int) -> None:
                mm.reset_operands_unchecked(a=p.a_ring[i], b=p.b, stream=stream)
                mm.execute(algorithm=algorithm, stream=stream)

            return call

        self.calls["lt_heuristic"] = lt(algos[0])
        contenders = {str(i): (lambda a=a: mm.execute(algorithm=a, stream=stream)) for i, a in enumerate(algos)}
        best = self._autotuned_index(contenders, gpu_key, p.shape, stream, l2_bytes)
        self.lt_best_index = best
        self.calls["lt_autotuned"] = lt(algos[best])

    @property
    def contenders(self) -> dict[str, Callable[[], None]]:
        """Zero-argument calls at slot 0 (for probes that time the baselines on fixed inputs)."""
        return {name: (lambda call=call: call(0)) for name, call in self.calls.items()}

    @classmethod
    def on_tensors(cls, A, B, Bt, gpu_key: str, stream, l2_bytes: int) -> Baselines:
        """Baselines on plain tensors (one slot), for probes outside the judge."""
        (M, K), N = A.shape, B.shape[1]
        out = torch.empty(M, N, dtype=torch.float16, device="cuda")
        return cls(SimpleNamespace(shape=Shape(M, N, K), stream=stream, a=A, b=B, bt=Bt, a_ring=[A], c=[out]),
                   gpu_key, l2_bytes)

    def graphs(self, slots: int, one_slot: bool = False) -> dict[str, torch.cuda.CUDAGraph]:
        """One graph per baseline calling it once per slot (captured once per slot count); with `one_slot`,
        as many calls, all on slot 0 (the judge's benchmark of the timing rules)."""
        from hgemm.evaluator.timing import capture

        key = (slots, one_slot)
        if key not in self._graphs:
            stream = self.problem.stream
            index = [0] * slots if one_slot else list(range(slots))
            self._graphs[key] = {
                name: capture(lambda call=call: [call(i) for i in index], 1, stream)
                for name, call in self.calls.items()
            }
        return self._graphs[key]

    def _autotuned_index(self, contenders, gpu_key: str, shape: Shape, stream, l2_bytes: int) -> int:
        cache = state_dir("baselines") / f"{gpu_key}.json"
        table = json.loads(cache.read_text()) if cache.exists() else {}
        key = str(shape)
        hit = table.get(key)
        if hit and hit.get("count") == len(contenders) and hit["index"] < len(contenders):
            return hit["index"]
        best, median_us, mode = pick_fastest(contenders, stream, l2_bytes)
        table[key] = {"index": best, "count": len(contenders), "median_us": median_us, "mode": mode}
        write_text_atomic(cache, json.dumps(table, indent=1))
        return best


def pick_fastest(contenders: dict[str, Callable[[], None]], stream, l2_bytes: int) -> tuple[int, float, str]:
    """(index, median us, mode) of the fastest contender (keys "0", "1", ...): timed alone after an L2 flush,
    or back to back in a graph when the host cannot keep ahead of the GPU for enough server samples (a busy
    machine). Autotuning only chooses an algorithm: it reports no time, so the fallback costs no honesty."""
    from hgemm.evaluator import timing

    try:
        stats, mode = timing.time_server(contenders, stream, l2_bytes, samples=10, mean_gap_us=20.0), "server"
    except timing.TimingDisturbed:
        stats, mode = timing.time_offline(contenders, stream, samples=5), "offline"
    best = min(stats, key=lambda i: stats[i].median_us)
    return int(best), stats[best].median_us, mode
