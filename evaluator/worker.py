"""Supervised GPU worker: untrusted candidate libraries are loaded and run only here, in a spawned child.

- The parent (`Worker`) sends one request at a time over a pipe, each with a time limit: prepare(M, N, K) →
  GPU info and facts; check(id, lib, stage) → correctness; time(id, modes, stage) → interleaved timings of
  the candidate and the baselines. The child side is `_Session`.
- A request that runs out of time, or a child that dies (abort, segfault, illegal address), kills the child
  and raises `WorkerFailed(kind, message)`; the caller starts a fresh worker and carries on.
- The child's stderr goes to a log file under the state root; its tail explains a crash.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time
import traceback
from dataclasses import asdict
from pathlib import Path

from hgemm.core.paths import state_dir


class WorkerFailed(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # "timeout" or "crash"


class Worker:
    """`session` names the class (module:Class) whose methods serve requests in the child."""

    def __init__(self, session: str = "hgemm.evaluator.worker:_Session") -> None:
        self.session = session
        self.proc: mp.Process | None = None
        self.conn = None
        self.log: Path | None = None

    def start(self) -> None:
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self.log = state_dir("logs") / f"worker-{os.getpid()}-{time.time_ns()}.log"
        self.proc = ctx.Process(target=_child_main, args=(child, str(self.log), self.session), daemon=True)
        self.proc.start()
        child.close()
        self.conn = parent

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()

    def request(self, op: str, timeout_s: float, **args):
        if not self.alive:
            self.start()
        try:
            self.conn.send((op, args))
            if not self.conn.poll(timeout_s):
                self.kill()
                raise WorkerFailed("timeout", f"{op} ran past its {timeout_s:.0f} s limit; worker killed")
            status, payload = self.conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            code = self._reap()
            raise WorkerFailed("crash", f"worker died during {op} (exit {code}){self._log_tail()}") from None
        if status == "dead":  # the child replied, then exits: its CUDA context is unusable
            self._reap()
            raise WorkerFailed("crash", payload)
        if status == "error":
            raise RuntimeError(f"worker {op} failed:\n{payload}")
        return payload

    def _reap(self) -> int | None:
        if self.proc is None:
            return None
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(5)
        code = self.proc.exitcode
        self.proc = None
        return code

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.pid is not None:
                self.proc.kill()
                self.proc.join(10)
            self.proc = None

    def close(self) -> None:
        if self.alive:
            try:
                self.conn.send(("quit", {}))
                self.proc.join(10)
            except (BrokenPipeError, OSError):
                pass
        self.kill()

    def _log_tail(self, lines: int = 8) -> str:
        try:
            tail = self.log.read_text(errors="replace").strip().splitlines()[-lines:]
        except (OSError, AttributeError):
            return ""
        return ("; stderr: " + " | ".join(tail)) if tail else ""


def _child_main(conn, log_path: str, session: str) -> None:
    import importlib

    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 2)
    module, name = session.split(":")
    session = getattr(importlib.import_module(module), name)()
    while True:
        try:
            op, args = conn.recv()
        except EOFError:
            return
        if op == "quit":
            return
        try:
            conn.send(("ok", getattr(session, op)(**args)))
        except Dead as e:
            conn.send(("dead", str(e)))
            os._exit(3)
        except Exception as e:
            if _is_cuda_error(e):  # a sticky device error: this process's context is unusable
                conn.send(("dead", f"kernel crashed: {str(e).splitlines()[0]}"))
                os._exit(3)
            conn.send(("error", traceback.format_exc()))


def _is_cuda_error(e: Exception) -> bool:
    return type(e).__name__ == "AcceleratorError" or str(e).startswith("CUDA error")


class Dead(Exception):
    """The CUDA context is broken (sticky error): reply, then exit."""


class _Session:
    def __init__(self) -> None:
        self.problem = None
        self.baselines = None
        self.candidates: dict[str, object] = {}
        self.info = None
        self.facts = None

    def _healthy(self) -> None:
        import torch

        try:
            torch.cuda.synchronize()
            torch.zeros(1, device="cuda").add_(1).item()
        except Exception as e:
            raise Dead(f"CUDA context broken: {str(e).splitlines()[0]}") from None

    def prepare(self, M: int, N: int, K: int, empty_lib: str, baselines: bool = True) -> dict:
        import torch
        from hgemm.evaluator import gpu_facts
        from hgemm.evaluator.baselines import Baselines
        from hgemm.evaluator.harness import Problem

        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        self.info = self.info or gpu_facts.gpu_info()
        self.problem = Problem(M, N, K)
        self.facts = self.facts or gpu_facts.facts(self.info, self.problem.stream, empty_lib)
        self.candidates.clear()
        self.baselines = None
        if baselines:
            self.problem.draw("randn")
            self.baselines = Baselines(self.problem.a, self.problem.b, self.problem.bt, M, N, K,
                                       gpu_facts.gpu_key(self.info), self.problem.stream, self.info.l2_bytes)
        torch.cuda.synchronize()
        return {"gpu": asdict(self.info), "facts": self.facts,
                "missing": self.baselines.missing if self.baselines else {}}

    def check(self, cid: str, lib: str, stage: str) -> dict:
        import torch
        from hgemm.evaluator.harness import Candidate, CheckFailed, cublas_error

        p = self.problem
        try:
            cand = Candidate(lib)
        except (OSError, AttributeError) as e:
            return {"failure": ("load_error", str(e))}
        if not cand.supports(p.M, p.N, p.K):
            return {"failure": ("unsupported_shape", f"hgemm_supports({p.M}, {p.N}, {p.K}) returned 0")}
        draws = ["randn"] if stage == "quick" else ["randn", "uniform", "large"]
        worst = [0.0, 0.0]
        ref_worst = [0.0, 0.0]
        previous = None  # the last verified result: a later call at the same pointers must not reuse it
        try:
            for kind in draws:
                ref = p.draw(kind)
                ref_err = cublas_error(p, ref)
                inputs = p.snapshot_inputs()
                p.prepare_call()
                torch.cuda.synchronize()
                rc = p.launch(cand)
                if rc != 0:
                    self._healthy()
                    raise CheckFailed("launch_error", f"hgemm_run returned CUDA error {rc}")
                ev = torch.cuda.Event()
                ev.record(p.stream)
                ev.synchronize()
                with torch.cuda.stream(p.stream):
                    early = p.c.clone()
                p.stream.synchronize()
                self._sync_or_die()
                if not torch.equal(early.view(torch.int16), p.c.view(torch.int16)):
                    raise CheckFailed("incomplete_on_event",
                                      f"{kind}: C changed after the event recorded on the stream had completed")
                fro, mx = p.verify(ref, inputs, ref_err, kind, previous=previous)
                previous = p.c.clone()
                worst = [max(worst[0], fro), max(worst[1], mx)]
                ref_worst = [max(ref_worst[0], ref_err[0]), max(ref_worst[1], ref_err[1])]
            # Capture in a graph, then replay at the same pointers with new values.
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph, stream=p.stream):
                    rc = p.launch(cand)
            except Exception as e:
                self._healthy()
                raise CheckFailed("not_capturable", f"capture on the given stream failed: {str(e).splitlines()[0]}") from None
            if rc != 0:
                raise CheckFailed("not_capturable", f"hgemm_run returned CUDA error {rc} under graph capture")
            ref = p.draw("randn")
            ref_err = cublas_error(p, ref)
            inputs = p.snapshot_inputs()
            p.prepare_call()
            with torch.cuda.stream(p.stream):
                graph.replay()
            self._sync_or_die()
            fro, mx = p.verify(ref, inputs, ref_err, "graph replay on new values", previous=previous)
            worst = [max(worst[0], fro), max(worst[1], mx)]
        except CheckFailed as f:
            return {"failure": (f.kind, str(f)), "max_rel_err": worst[0] or None}
        self.candidates[cid] = cand
        return {"failure": None, "max_rel_err": worst[0], "max_abs_rel": worst[1], "ref_rel_err": ref_worst[0]}

    def _sync_or_die(self) -> None:
        import torch

        try:
            torch.cuda.synchronize()
        except Exception as e:
            raise Dead(f"kernel crashed: {str(e).splitlines()[0]}") from None

    def time(self, cid: str, modes: list[str], stage: str) -> dict:
        from hgemm.evaluator import timing

        p = self.problem
        cand = self.candidates[cid]
        contenders = {"candidate": lambda: p.launch(cand)}
        if self.baselines:
            contenders.update(self.baselines.contenders)
        dropped = timing.dropped_samples
        try:
            out = self._time_modes(contenders, modes, offline_samples=7 if stage == "quick" else 15)
        except timing.TimingDisturbed as e:
            out = {"disturbed": str(e)}
        self._sync_or_die()
        if timing.dropped_samples > dropped:  # to the worker's log
            print(f"timing {cid}: {timing.dropped_samples - dropped} samples dropped (host behind the GPU), "
                  f"{timing.dropped_samples} in this worker", file=sys.stderr, flush=True)  # fmt: skip
        return out

    def forget(self, cid: str) -> None:
        self.candidates.pop(cid, None)

    def time_baselines(self, modes: list[str]) -> dict:
        return self._time_modes(self.baselines.contenders, modes, offline_samples=15)

    def _time_modes(self, contenders: dict, modes: list[str], offline_samples: int) -> dict:
        """Per mode, per contender, the timing stats as dicts."""
        from hgemm.evaluator import timing

        out = {}
        for mode in modes:
            if mode == "offline":
                stats = timing.time_offline(contenders, self.problem.stream, samples=offline_samples)
            else:
                stats = timing.time_server(contenders, self.problem.stream, self.info.l2_bytes, samples=30)
            out[mode] = {k: asdict(v) for k, v in stats.items()}
        return out
