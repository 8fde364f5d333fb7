"""LocalEvaluator: the real Evaluator on this machine's GPU.

Compile every source (parallel, cached, static check first); then for each library, in a supervised worker,
check (the correctness suite) and time (interleaved with the four baselines); optional NCU metrics and
compute-sanitizer runs go in their own processes; one EvalRecord per source comes back.

- A candidate that hangs or crashes costs one worker, never the caller: the worker is replaced and
  re-prepared for the shape, and the remaining candidates go on.
- Every record says where its time went (`phases`, seconds per phase; see evaluator/phases.py).
"""

from __future__ import annotations

import shutil
import time

from hgemm.evaluator.worker import Worker, WorkerFailed

from hgemm.core.errors import NoGpu
from hgemm.core.record import EvalRecord, GpuInfo, ModeResult, Resources, Stats, kernel_hash
from hgemm.core.shape import Shape

PREPARE_TIMEOUT_S = 600.0  # first use measures GPU facts and autotunes cuBLASLt


def _check_timeout(shape: Shape) -> float:
    return 30.0 + shape.flops / 2e11  # float64 references of the largest shapes take seconds


class LocalEvaluator:
    def __init__(self, baselines: bool = True):
        _require_gpu()
        self.worker = Worker()
        self.baselines = baselines
        self._info: GpuInfo | None = None
        self._shape: Shape | None = None
        self.prepared: dict | None = None
        self._empty_lib: str | None = None
        self._runner_shim: str | None = None

    def __enter__(self) -> LocalEvaluator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.worker.close()

    # -- Evaluator protocol --------------------------------------------------------------------
    def gpu_info(self) -> GpuInfo:
        if self._info is None:
            self._prepare(Shape(64, 64, 64))
        return self._info

    def evaluate(self, sources, shape, *, stage="full", modes=("offline", "server"), ncu=False, sanitize=False):
        from hgemm.evaluator.compile import compile_sources

        shape = Shape.of(shape)
        modes = tuple(modes)
        compiled = compile_sources(list(sources))
        records: list[EvalRecord] = []
        for source, comp in zip(sources, compiled):
            rec = EvalRecord(kernel_hash=kernel_hash(source), M=shape.M, N=shape.N, K=shape.K, stage=stage)
            records.append(rec)
            rec.compiled = comp.ok
            rec.resources = _resources(comp)
            rec.phases["compile"] = round(comp.seconds, 4)
            if not comp.ok:
                rec.fail(comp.failure_kind or "compile_error", comp.message or comp.log)
                continue
            started = time.perf_counter()
            self._evaluate_one(rec, comp.lib_path, shape, stage, modes)
            if rec.ok and (ncu or sanitize):
                from hgemm.evaluator import profile

                if ncu:
                    t = time.perf_counter()
                    rec.ncu = profile.ncu_metrics(comp.lib_path, shape)
                    rec.phases["ncu"] = round(time.perf_counter() - t, 4)
                if sanitize:
                    t = time.perf_counter()
                    problem = profile.sanitize(comp.lib_path, shape)
                    rec.phases["sanitize"] = round(time.perf_counter() - t, 4)
                    if problem:
                        rec.fail("sanitizer", problem)
            rec.eval_seconds = time.perf_counter() - started
        for rec in records:
            if self._info:
                rec.gpu, rec.cc, rec.driver = self._info.name, self._info.cc, self._info.driver
        return records

    # -- steps ----------------------------------------------------------------------------------
    def _prepare(self, shape: Shape) -> bool:
        """Make the worker ready for the shape; whether that took any work."""
        if self._shape == shape and self.worker.alive:
            return False
        if self._empty_lib is None:
            self._empty_lib = _compile_shim("empty.cu")
            self._runner_shim = _compile_shim("runner.cu", trusted=True)
        reply = self.worker.request("prepare", PREPARE_TIMEOUT_S, M=shape.M, N=shape.N, K=shape.K,
                                    empty_lib=self._empty_lib, runner_shim=self._runner_shim,
                                    baselines=self.baselines)
        self._info = GpuInfo(**reply["gpu"])
        self.prepared = reply
        self._shape = shape
        return True

    def _evaluate_one(self, rec: EvalRecord, lib: str, shape: Shape, stage: str, modes) -> None:
        from hgemm.evaluator.gpu_facts import floor_us

        cid = rec.kernel_hash
        try:
            t = time.perf_counter()
            if self._prepare(shape):
                rec.phases["prepare"] = round(time.perf_counter() - t, 4)
            result = self.worker.request("check", 60.0 + 8 * _check_timeout(shape), cid=cid, lib=lib, stage=stage)
            rec.phases.update(result.get("phases") or {})
            rec.max_rel_err = result.get("max_rel_err")
            rec.ref_rel_err = result.get("ref_rel_err")
            if result["failure"]:
                rec.fail(*result["failure"])
                return
            rec.correct = True
            times = self.worker.request("time", 300.0 + 4 * _check_timeout(shape), cid=cid, modes=list(modes), stage=stage)
            rec.phases.update(times.pop("phases", None) or {})  # the check's phases again, and the timing's
            t = time.perf_counter()
            self.worker.request("forget", 10.0, cid=cid)
            rec.phases["teardown"] = round(time.perf_counter() - t, 4)
            if times.get("failure"):  # a timed launch did not do its work, or the runner died
                rec.correct = False
                rec.fail(*times["failure"])
                return
            if "disturbed" in times:  # a correct kernel left without an honest time (a busy host)
                rec.fail("timing_disturbed", times["disturbed"])
                return
        except WorkerFailed as e:
            self._shape = None  # the next candidate gets a fresh, re-prepared worker
            rec.correct = False
            rec.fail(e.kind, str(e))
            return
        facts, l2 = self.prepared["facts"], self._info.l2_bytes
        for mode, stats in times.items():
            cand = Stats(**stats.pop("candidate"))
            floor = floor_us(facts, shape, mode, l2)
            rec.modes[mode] = ModeResult(mode=mode, candidate=cand, baselines={b: Stats(**s) for b, s in stats.items()},
                                         floor_us=floor).finish(shape)
            if cand.median_us < floor:
                rec.fail("suspicious_speed", f"{mode}: {cand.median_us:.2f} us is below the physical floor {floor:.2f} us")

    def baseline_table(self, shape: Shape, modes=("offline", "server"), fresh: bool = False) -> dict:
        """Baselines and floors alone, for `hgemm bench`; cached per (GPU, driver, shape, mode) unless `fresh`."""
        from hgemm.evaluator import baseline_cache
        from hgemm.evaluator.gpu_facts import floor_us, gpu_key

        shape = Shape.of(shape)
        self._prepare(shape)
        key = gpu_key(self._info)
        times = {m: None if fresh else baseline_cache.load(key, shape, m) for m in modes}
        todo = [m for m, t in times.items() if t is None]
        if todo:
            measured = self.worker.request("time_baselines", 300.0, modes=todo)
            for m, t in measured.items():
                baseline_cache.store(key, shape, m, t)
                times[m] = t
        facts, l2 = self.prepared["facts"], self._info.l2_bytes
        return {
            "M": shape.M, "N": shape.N, "K": shape.K, "gpu": self._info.name, "driver": self._info.driver,
            "facts": facts, "missing": self.prepared.get("missing", {}),
            "cached": [m for m in modes if m not in todo],
            "modes": {m: {"floor_us": floor_us(facts, shape, m, l2), "baselines": times[m]} for m in modes},
        }


def _compile_shim(name: str, trusted: bool = False) -> str:
    """Build one of the evaluator's own libraries (`trusted`: not a candidate, so not held to the contract)."""
    from importlib import resources

    from hgemm.evaluator.compile import compile_source, compile_trusted

    src = resources.files("hgemm.evaluator").joinpath("shims", name).read_text()
    result = compile_trusted(src) if trusted else compile_source(src)
    if not result.ok:
        raise RuntimeError(f"evaluator shim {name} failed to compile:\n{result.log}")
    return result.lib_path


def _resources(comp) -> Resources | None:
    res = getattr(comp, "resources", None) or {}
    if not res:
        return None
    for arch in ("sm_90a", "sm_90", "sm_80"):
        if arch in res:
            r = res[arch]
            break
    else:
        r = next(iter(res.values()))
    r.compile_seconds = comp.compile_seconds  # the nvcc run that built it, also on a cache hit
    return r


def _require_gpu() -> None:
    try:
        import torch
    except ImportError as e:
        raise NoGpu(f"torch is not installed: {e}") from None
    if not torch.cuda.is_available():
        raise NoGpu("no CUDA GPU is visible to torch on this machine")
    if shutil.which("nvcc") is None:
        from hgemm.core.errors import NoCompiler

        raise NoCompiler("nvcc is not on PATH (install the CUDA toolkit)")
