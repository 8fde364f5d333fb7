"""A stand-in for the GPU evaluator: the `Evaluator` protocol, deterministic, no GPU needed.

Used by orchestration tests (the loop, the CLI, the archive and index tests). It runs the real
static check and then, instead of compiling and timing, derives everything from the source text:
- pseudo-times: a roofline-ish base time for the shape times a factor in [0.8, 1.4) taken from the
  kernel hash, or exactly the factor a `// STANDIN_SPEED <x>` line gives; a `// STANDIN_SERVER_SPEED <y>`
  line further multiplies the server-mode time by y (a kernel that suffers more from a cold cache);
- `// STANDIN_LUCKY <z>`: the kernel's first full-stage evaluation is z times its usual time (a lucky
  sample that a fresh measurement does not repeat);
- markers: `STANDIN_WRONG` → incorrect, `STANDIN_COMPILE_ERROR` → compile_error,
  `STANDIN_CRASH` → crash, `STANDIN_UNSUPPORTED` → unsupported_shape, `STANDIN_RACE` → sanitizer (only
  when the call asks for compute-sanitizer);
- a source without `hgemm_run` → bad_source.
Baselines are fixed multiples of the base time (best: lt_autotuned at 0.97), so speedups exist;
quick stage times offline only, full stage both modes; `ncu=True` adds a few NCU-style metrics.
Every call is logged in `calls` (stage, number of sources) for assertions.
"""

from __future__ import annotations

import re

from hgemm.core.record import EvalRecord, GpuInfo, ModeResult, Resources, Stats, kernel_hash
from hgemm.core.shape import Shape

STANDIN_GPU = GpuInfo(
    name="NVIDIA H100 80GB HBM3 (stand-in)",
    cc="9.0",
    driver="0.0",
    sm_count=132,
    l2_bytes=50 * 1024 * 1024,
    smem_per_block_optin=227 * 1024,
    memory_bytes=80 * 1024**3,
)
BASELINE_FACTORS = {"torch_nn": 1.00, "torch_tn": 1.02, "lt_heuristic": 0.99, "lt_autotuned": 0.97}
SERVER_FACTOR = 1.15  # server-mode times are this much slower than offline
FLOOR_FACTOR = 0.55

_SPEED = re.compile(r"//\s*STANDIN_SPEED\s+([0-9.]+)")
_SERVER_SPEED = re.compile(r"//\s*STANDIN_SERVER_SPEED\s+([0-9.]+)")
_LUCKY = re.compile(r"//\s*STANDIN_LUCKY\s+([0-9.]+)")


def base_us(shape: Shape) -> float:
    """A plausible cuBLAS-class time: 600 TFLOP/s compute or 3 TB/s traffic, plus 3 us launch."""
    M, N, K = shape
    compute = shape.flops / 600e12
    traffic = 2.0 * (M * K + K * N + M * N) / 3e12
    return max(compute, traffic) * 1e6 + 3.0


def speed_factor(source: str) -> float:
    match = _SPEED.search(source)
    if match:
        return float(match.group(1))
    return 0.8 + 0.6 * (int(kernel_hash(source)[:8], 16) / 0xFFFFFFFF)


def _stats(us: float, n: int = 50) -> Stats:
    return Stats(median_us=us, p10_us=us * 0.98, p90_us=us * 1.03, n=n)


class StandinEvaluator:
    """Implements `evaluator.api.Evaluator` without a GPU."""

    def __init__(self, gpu: GpuInfo = STANDIN_GPU):
        self.gpu = gpu
        self.calls: list[tuple[str, int]] = []
        self.sanitized: list[tuple[str, int]] = []  # (stage, sources) of calls that asked for compute-sanitizer
        self.order: list[str] = []  # kernel hashes in the order they were evaluated
        self._full_seen: set[str] = set()  # kernels whose first full-stage evaluation has happened
        self._times: dict[tuple[str, str], int] = {}  # (hash, stage) -> evaluations so far (a repeat differs)

    def gpu_info(self) -> GpuInfo:
        return self.gpu

    def __enter__(self) -> StandinEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def evaluate(
        self,
        sources: list[str],
        shape: Shape,
        *,
        stage: str = "full",
        modes: tuple[str, ...] = ("offline", "server"),
        ncu: bool = False,
        sanitize: bool = False,
    ) -> list[EvalRecord]:
        shape = Shape.of(shape)
        self.calls.append((stage, len(sources)))
        if sanitize:
            self.sanitized.append((stage, len(sources)))
        records = [self._one(s, shape, stage, modes, ncu) for s in sources]
        for source, rec in zip(sources, records, strict=True):
            if sanitize and rec.ok and "STANDIN_RACE" in source:
                rec.fail("sanitizer", "racecheck (stand-in): 1 hazard on shared memory")
        return records

    def _one(self, source: str, shape: Shape, stage: str, modes: tuple[str, ...], ncu: bool) -> EvalRecord:
        from hgemm.evaluator.static_check import check_source

        h = kernel_hash(source)
        rec = EvalRecord(
            kernel_hash=h,
            M=shape.M,
            N=shape.N,
            K=shape.K,
            gpu=self.gpu.name,
            cc=self.gpu.cc,
            driver=self.gpu.driver,
            stage=stage,
        )
        rec.eval_seconds = 0.01
        if "hgemm_run" not in source:
            return rec.fail("bad_source", "the source does not define hgemm_run")
        problems = check_source(source)
        if problems:
            return rec.fail("static_check", "; ".join(problems))
        if "STANDIN_COMPILE_ERROR" in source:
            return rec.fail(
                "compile_error", 'kernel.cu(1): error: identifier "STANDIN_COMPILE_ERROR" is undefined'
            )
        rec.compiled = True
        n = int(h[8:12], 16)
        rec.resources = Resources(
            arch="sm_90a",
            registers=64 + n % 128,
            shared_bytes=32768 + 1024 * (n % 160),
            stack_bytes=0,
            spill_stores=0,
            spill_loads=0,
            compile_seconds=1.0,
        )
        if "STANDIN_UNSUPPORTED" in source:
            return rec.fail("unsupported_shape", "hgemm_supports returned 0")
        if "STANDIN_CRASH" in source:
            return rec.fail("crash", "the worker died: an illegal memory access was encountered")
        if "STANDIN_WRONG" in source:
            rec.max_rel_err, rec.ref_rel_err = 0.5, 1e-3
            return rec.fail("incorrect", "max relative error 5.0e-01 above the bound 4.0e-03")
        rec.correct, rec.max_rel_err, rec.ref_rel_err = True, 1e-3, 1e-3
        self.order.append(h)
        repeat = self._times[(h, stage)] = self._times.get((h, stage), 0) + 1
        base = base_us(shape)
        lucky = _LUCKY.search(source)
        luck = 1.0
        if stage == "full" and h not in self._full_seen:
            self._full_seen.add(h)
            luck = float(lucky.group(1)) if lucky else 1.0
        used = modes
        for mode in used:
            scale = SERVER_FACTOR if mode == "server" else 1.0
            extra = _SERVER_SPEED.search(source) if mode == "server" else None
            cand_scale = scale * (float(extra.group(1)) if extra else 1.0)
            rec.modes[mode] = ModeResult(
                mode=mode,
                candidate=_stats(base * speed_factor(source) * cand_scale * luck, 49 + repeat),
                baselines={b: _stats(base * f * scale) for b, f in BASELINE_FACTORS.items()},
                floor_us=base * FLOOR_FACTOR * scale,
            ).finish(shape)
        if ncu:
            rec.ncu = {
                "sm__throughput.avg.pct_of_peak_sustained_elapsed": round(40 + n % 55, 1),
                "dram__throughput.avg.pct_of_peak_sustained_elapsed": round(20 + n % 70, 1),
                "sm__warps_active.avg.pct_of_peak_sustained_active": round(10 + n % 40, 1),
                "l2_throughput_pct": round(15 + n % 60, 1),
                "stall_long_scoreboard": round(0.1 + n % 7 / 4, 2),
                "stall_barrier": round(0.2 + n % 5 / 3, 2),
                "stall_wait": 0.35,
                "stall_mio_throttle": 0.05,
                "stall_sleeping": 0.01,
            }
        return rec
