"""The judge: the process that owns the buffers, the references, the baselines and every verdict.

It never loads candidate code. Each candidate runs in its own runner process (evaluator/runner.py),
started fresh for it (a spare waits, initialised), which reaches the judge's buffers through a CUDA IPC
handle and answers with return codes and raw times only.

- Check: fresh draws (randn; uniform and large-magnitude in the full suite) at slot 0 with C poisoned
  and the workspace garbage-filled; C compared once the stream's event completed and once the device
  is idle; a call right after a kernel that lets dependents launch early and writes the inputs late;
  the call captured in a graph and replayed twice on new values.
- Time: the candidate's graph (offline: one launch per slot, each on its own inputs and output) and
  the baselines' graphs are sampled on the same seeds, in alternating rounds; every candidate sample's
  outputs are checked through their witnesses, and the guard bands and inputs afterwards.
- Nothing a runner sends is trusted beyond its type: a malformed reply is a crash.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict

from hgemm.evaluator import timing
from hgemm.evaluator.runner import EARLY_WRITER_CYCLES, Buffers, Shim, StreamDevice, refresh

from hgemm.core.paths import state_dir

MAX_SLOTS = 200
RING_BYTES = 1 << 30  # the offline ring's A and C slots together, at most
WITNESS_SAMPLES = 40  # samples per timing request, warm-up included (offline 16, server 31)
ROUNDS = 3  # the samples of each mode are split into this many rounds, alternating runner and judge
OFFLINE_SAMPLES = {"quick": 7, "full": 15}
SERVER_SAMPLES = 30
WITNESS_TOLERANCE = 8 * 2.0**-11  # per row: error of the row sum over sqrt(sum of squared terms)
REPLY_LIMIT = 1 << 20


class RunnerFailed(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # "crash" or "timeout"


def slots_for(estimate_us: float, M: int, N: int, K: int) -> int:
    """Launches per offline graph, each with its own A and C: enough for about 300 us, within RING_BYTES."""
    per_slot = 2 * (M * K + M * N)
    return max(1, min(timing.reps_for(estimate_us), RING_BYTES // per_slot, MAX_SLOTS))


class RunnerProcess:
    """A runner, as the judge sees it: a sandboxed process, two pipes, a log file for its output, and a
    private folder removed when it ends. `module` and `env_extra` let tests start scripted runners."""

    def __init__(self, module: str = "hgemm.evaluator.runner", args: tuple[str, ...] = (),
                 env_extra: dict[str, str] | None = None) -> None:
        from hgemm.evaluator import sandbox

        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        self.log = state_dir("logs") / f"runner-{os.getpid()}-{time.time_ns()}.log"
        self.folder = sandbox.private_folder("runner-")
        argv = ["-m", module, *args, "--requests", str(req_r), "--replies", str(rep_w)]
        with open(self.log, "ab") as log:
            self.proc = sandbox.popen(argv, "runner", self.folder, env_extra, pass_fds=(req_r, rep_w),
                                      stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        os.close(req_r)
        os.close(rep_w)
        self.requests = os.fdopen(req_w, "w")
        self.replies = rep_r
        self.pending = b""
        self.ready = False
        self.graphs: set[str] = set()  # graphs captured in this runner
        self.spent: dict[str, float] = {}  # seconds waited on each request kind (for the judge's log)

    def _line(self, timeout_s: float, during: str) -> dict:
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise RunnerFailed("timeout", f"{during} ran past its {timeout_s:.0f} s limit; runner killed")
            ready, _, _ = select.select([self.replies], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.replies, 65536)
            if not chunk:
                raise RunnerFailed("crash", f"runner died during {during} ({self._exit()})")
            self.pending += chunk
            if len(self.pending) > REPLY_LIMIT:
                self.kill()
                raise RunnerFailed("crash", f"runner reply to {during} exceeded {REPLY_LIMIT} bytes")
        line, self.pending = self.pending.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except ValueError:
            self.kill()
            raise RunnerFailed("crash", f"runner reply to {during} was not JSON") from None
        if not isinstance(reply, dict):
            self.kill()
            raise RunnerFailed("crash", f"runner reply to {during} was not an object")
        return reply

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        if not self.ready:
            reply = self._line(timeout_s, "start-up")
            if reply.get("ready") is not True:
                self.kill()
                raise RunnerFailed("crash", "runner could not initialise CUDA")
            self.ready = True

    def request(self, op: str, timeout_s: float, **args) -> dict:
        self.wait_ready()
        try:
            self.requests.write(json.dumps({"op": op, "args": args}) + "\n")
            self.requests.flush()
        except (BrokenPipeError, OSError):
            raise RunnerFailed("crash", f"runner died before {op} ({self._exit()})") from None
        started = time.perf_counter()
        reply = self._line(timeout_s, op)
        self.spent[op] = self.spent.get(op, 0.0) + time.perf_counter() - started
        if reply.get("ok") is not True:
            name = reply.get("cuda_error")
            self.kill()
            if isinstance(name, str) and re.fullmatch(r"cuda[A-Za-z]{1,60}|launch failed", name):
                raise RunnerFailed("crash", f"{op}: CUDA error {name}")
            raise RunnerFailed("crash", f"{op} failed")
        return reply

    def _exit(self) -> str:
        try:
            code = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        signum = -code if code is not None and code < 0 else code - 128 if code is not None and code > 128 else 0
        if signum:  # killed here, or inside the sandbox's PID namespace (reported as 128 + the signal)
            try:
                return f"signal {signal.Signals(signum).name}"
            except ValueError:
                return f"signal {signum}"
        return f"exit {code}"

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
            self.proc.wait(10)
        for f in (self.requests,):
            try:
                f.close()
            except OSError:
                pass
        try:
            os.close(self.replies)
        except OSError:
            pass
        self.replies = -1
        shutil.rmtree(self.folder, ignore_errors=True)


def _number_list(reply: dict, key: str, most: int) -> list[float]:
    v = reply.get(key)
    if not isinstance(v, list) or len(v) > most or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0 for x in v):
        raise RunnerFailed("crash", f"runner reply carried no valid {key}")
    return [float(x) for x in v]


def _rc(reply: dict) -> int:
    rc = reply.get("rc")
    if not isinstance(rc, int) or isinstance(rc, bool):
        raise RunnerFailed("crash", "runner reply carried no return code")
    return rc


class Judge:
    """The judge's side of the worker protocol (evaluator/worker.py starts it in its own process)."""

    def __init__(self) -> None:
        self.info = None
        self.facts = None
        self.problem = None
        self.baselines = None
        self.rt = None
        self.shim = None
        self.shim_path = ""
        self.runners: dict[str, RunnerProcess] = {}
        self.spare: RunnerProcess | None = None
        self.retiring: list[RunnerProcess] = []  # told to quit, not yet reaped
        self.rng = random.SystemRandom()

    # -- set-up ---------------------------------------------------------------------------------
    def prepare(self, M: int, N: int, K: int, empty_lib: str, runner_shim: str, baselines: bool = True) -> dict:
        import torch
        from hgemm.evaluator import gpu_facts
        from hgemm.evaluator.baselines import Baselines
        from hgemm.evaluator.cudart import Runtime
        from hgemm.evaluator.problem import Problem

        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        torch.cuda.init()
        self.rt = self.rt or Runtime()
        if self.shim_path != runner_shim:
            self.shim, self.shim_path = Shim(runner_shim), runner_shim
        self.info = self.info or gpu_facts.gpu_info()
        for cid in list(self.runners):
            self.forget(cid)
        if self.problem is not None:
            self.baselines = None
            self.problem.close()
        stream = torch.cuda.Stream()
        self.facts = self.facts or gpu_facts.facts(self.info, stream, empty_lib)
        slots = slots_for(Problem.estimate_us(M, N, K, stream), M, N, K)
        self.problem = Problem(self.rt, self.shim, M, N, K, slots, WITNESS_SAMPLES, self.info.l2_bytes,
                               self.rng.getrandbits(62), stream)
        self.baselines = None
        if baselines:
            self.problem.draw("randn")
            self.baselines = Baselines(self.problem, gpu_facts.gpu_key(self.info), self.info.l2_bytes)
        torch.cuda.synchronize()
        self._spare()
        return {"gpu": asdict(self.info), "facts": self.facts, "slots": slots,
                "missing": self.baselines.missing if self.baselines else {}}

    def _spare(self) -> None:
        if self.spare is None or self.spare.proc.poll() is not None:
            self.spare = RunnerProcess()

    def _runner(self, cid: str) -> RunnerProcess:
        self._spare()
        runner, self.spare = self.spare, None
        self.runners[cid] = runner
        self._spare()
        return runner

    def forget(self, cid: str) -> None:
        """Let the candidate's runner go: it is told to quit and reaped later, so its CUDA context comes down
        while the next candidate is checked, not while anything is timed."""
        runner = self.runners.pop(cid, None)
        if runner is None:
            return
        spent = ", ".join(f"{op} {s:.3f}" for op, s in runner.spent.items())
        print(f"runner {cid}: seconds waited per request: {spent}", file=sys.stderr, flush=True)
        try:
            runner.requests.write(json.dumps({"op": "quit"}) + "\n")
            runner.requests.flush()
        except (OSError, ValueError):
            runner.kill()
        self.retiring.append(runner)
        self._reap()

    def _reap(self, wait_s: float = 0.0) -> None:
        """Kill runners that were told to quit and have not (after `wait_s`), and forget the exited ones."""
        still = []
        for runner in self.retiring:
            try:
                runner.proc.wait(wait_s)
                runner.kill()
            except subprocess.TimeoutExpired:
                still.append(runner)
        self.retiring = still

    # -- the correctness suite ------------------------------------------------------------------
    def check(self, cid: str, lib: str, stage: str) -> dict:
        from hgemm.evaluator.harness import CheckFailed

        p = self.problem
        started = time.perf_counter()
        runner = self._runner(cid)
        runner.spent["judge:take runner"] = time.perf_counter() - started
        worst = [0.0, 0.0]
        ref_worst = [0.0, 0.0]
        try:
            opened = runner.request("open", 120.0, arena=p.arena.handle, layout=p.layout, shim=self.shim_path,
                                    lib=lib, M=p.M, N=p.N, K=p.K, l2_bytes=self.info.l2_bytes, slots=p.slots)
            if isinstance(opened.get("load_error"), str):
                self.forget(cid)
                return {"failure": ("load_error", opened["load_error"])}
            if opened.get("supports") is not True:
                self.forget(cid)
                return {"failure": ("unsupported_shape", f"hgemm_supports({p.M}, {p.N}, {p.K}) returned 0")}
            timeout = p.check_timeout()
            previous = None
            for kind in ["randn"] if stage == "quick" else ["randn", "uniform", "large"]:
                ref, ref_err, inputs = p.prepare_check(kind)
                rc = _rc(runner.request("call", timeout, slot=0))
                if rc:
                    raise CheckFailed("launch_error", f"hgemm_run returned CUDA error {rc}")
                if not p.early_matches():
                    raise CheckFailed("incomplete_on_event",
                                      f"{kind}: C changed after the event recorded on the stream had completed")
                fro, mx = p.verify(ref, ref_err, inputs, kind, previous)
                previous = p.c[0].clone()
                worst = [max(worst[0], fro), max(worst[1], mx)]
                ref_worst = [max(ref_worst[0], ref_err[0]), max(ref_worst[1], ref_err[1])]
            ref, ref_err, inputs = p.prepare_late_inputs()
            rc = _rc(runner.request("call_after_writer", timeout, slot=0, cycles=EARLY_WRITER_CYCLES))
            if rc:
                raise CheckFailed("launch_error", f"hgemm_run returned CUDA error {rc}")
            try:
                p.verify(ref, ref_err, inputs, "inputs written by the preceding kernel", None)
            except CheckFailed as f:
                if f.kind != "incorrect":
                    raise
                raise CheckFailed("early_read", "the result misses inputs that the kernel before it on the stream "
                                  "wrote late: it read them before that kernel finished (a dependent launch "
                                  "without griddepcontrol.wait?)") from None
            captured = runner.request("capture", timeout, name="check", slots=[0])
            rc = _rc(captured)
            if rc:
                raise CheckFailed("not_capturable", f"hgemm_run returned CUDA error {rc} under graph capture")
            if "capture_error" in captured:
                raise CheckFailed("not_capturable", "capture on the given stream failed")
            previous = p.c[0].clone()
            for replay in range(2):
                ref, ref_err, inputs = p.prepare_check("randn")
                runner.request("replay", timeout, name="check")
                fro, mx = p.verify(ref, ref_err, inputs, f"graph replay {replay + 1} on new values", previous)
                previous = p.c[0].clone()
                worst = [max(worst[0], fro), max(worst[1], mx)]
        except RunnerFailed as e:
            self.forget(cid)
            return {"failure": (e.kind, str(e)), "max_rel_err": worst[0] or None}
        except CheckFailed as f:
            self.forget(cid)
            return {"failure": (f.kind, str(f)), "max_rel_err": worst[0] or None}
        runner.spent["judge:check"] = time.perf_counter() - started
        return {"failure": None, "max_rel_err": worst[0], "max_abs_rel": worst[1], "ref_rel_err": ref_worst[0]}

    # -- timing ---------------------------------------------------------------------------------
    def time(self, cid: str, modes: list[str], stage: str) -> dict:
        from hgemm.evaluator.harness import CheckFailed

        runner = self.runners[cid]
        out = {}
        try:
            for mode in modes:
                out[mode] = self._time_mode(runner, mode, stage)
        except RunnerFailed as e:
            self.forget(cid)
            return {"failure": (e.kind, str(e))}
        except CheckFailed as f:
            self.forget(cid)
            return {"failure": (f.kind, str(f))}
        except timing.TimingDisturbed as e:
            return {"disturbed": str(e)}
        return out

    def _time_mode(self, runner: RunnerProcess, mode: str, stage: str) -> dict:
        from hgemm.evaluator.harness import CheckFailed

        self._reap(wait_s=5.0)  # no other candidate's context is coming down while this one is timed
        if self.spare is not None:
            try:
                self.spare.wait_ready()  # nor is the next one's coming up
            except RunnerFailed:
                self.spare = None
        p = self.problem
        slots = p.slots if mode == "offline" else 1
        name = f"{mode}-graph"
        if name not in runner.graphs:
            captured = runner.request("capture", p.check_timeout(), name=name, slots=list(range(slots)))
            rc = _rc(captured)
            if rc:
                raise CheckFailed("launch_error", f"hgemm_run returned CUDA error {rc} while captured for timing")
            if "capture_error" in captured:
                raise CheckFailed("not_capturable", "capture on the given stream failed")
            runner.graphs.add(name)
        count = OFFLINE_SAMPLES.get(stage, 15) if mode == "offline" else SERVER_SAMPLES
        seeds = [self.rng.getrandbits(63) for _ in range(count + 1)]  # the first is a warm-up, not reported
        b_seed = self.rng.getrandbits(63)
        p.start_timing(b_seed, slots)
        size = -(-len(seeds) // ROUNDS)
        candidate: list[float] = []
        baselines: dict[str, list[float]] = {}
        timeout = 120.0 + 4 * p.check_timeout()
        for first in range(0, len(seeds), size):
            chunk = seeds[first : first + size]
            reply = runner.request("time", timeout, name=name, mode=mode, seeds=chunk, first=first,
                                   rng_seed=self.rng.getrandbits(32))
            candidate += _number_list(reply, "us", len(chunk))
            p.check_inputs(chunk[-1], slots, b_seed)  # before the baselines' samples give the inputs new values
            if self.baselines is not None:
                started = time.perf_counter()
                for b, us in self._time_baselines(mode, slots, chunk).items():
                    baselines.setdefault(b, []).extend(us)
                runner.spent["judge:baselines"] = runner.spent.get("judge:baselines", 0.0) + time.perf_counter() - started
        started = time.perf_counter()
        p.check_witnesses(seeds, slots, b_seed)
        runner.spent["judge:witnesses"] = runner.spent.get("judge:witnesses", 0.0) + time.perf_counter() - started
        timing._enough("candidate", len(candidate) - 1, count)
        stats = {"candidate": asdict(timing.quantiles(candidate[1:]))}
        for b, us in baselines.items():
            timing._enough(b, len(us) - 1, count)
            stats[b] = asdict(timing.quantiles(us[1:]))
        return stats

    def _time_baselines(self, mode: str, slots: int, seeds: list[int]) -> dict[str, list[float]]:
        import torch

        p = self.problem
        graphs = self.baselines.graphs(slots)
        buf = Buffers(p.arena.base, p.layout)

        def on_refresh(seed: int) -> None:
            refresh(self.shim, buf, p.M, p.K, slots, seed, p.stream.cuda_stream)

        dev = StreamDevice(self.rt, p.stream.cuda_stream, self.shim, {n: g.replay for n, g in graphs.items()},
                           p.flush_ptr, p.flush_bytes, on_refresh)
        try:
            with torch.cuda.stream(p.stream):
                if mode == "offline":
                    raw = timing.offline_samples(dev, list(graphs), seeds, {n: slots for n in graphs})
                else:
                    raw = timing.server_samples(dev, list(graphs), seeds, random.Random(self.rng.getrandbits(32)),
                                                require=False)
        finally:
            dev.close()
        return raw

    def time_baselines(self, modes: list[str]) -> dict:
        """Baselines alone (for `hgemm bench`), sampled exactly as they are beside a candidate."""
        p = self.problem
        out = {}
        for mode in modes:
            slots = p.slots if mode == "offline" else 1
            count = OFFLINE_SAMPLES["full"] if mode == "offline" else SERVER_SAMPLES
            seeds = [self.rng.getrandbits(63) for _ in range(count + 1)]
            p.start_timing(self.rng.getrandbits(63), slots)
            raw = self._time_baselines(mode, slots, seeds)
            for b, us in raw.items():
                timing._enough(b, len(us) - 1, count)
            out[mode] = {b: asdict(timing.quantiles(us[1:])) for b, us in raw.items()}
        return out
