"""The judge: the process that owns the buffers, the references, the baselines and every verdict.

It never loads candidate code. Each candidate runs in its own runner process (evaluator/runner.py),
started fresh for it, which maps the judge's buffers (evaluator/arena.py) and answers with return codes and raw
times only.

- Runners start ahead of their candidates (SPARES of them): a runner boots (sandbox, interpreter, imports)
  at any time, but creates its CUDA context only when told to, between timings; no context comes up or
  down while a full-stage timing or a baseline's own is taken. A quick-stage timing, which only chooses what
  the full stage measures, does not wait for them (QUIET_STAGES).

- Check: fresh draws (randn; uniform and large-magnitude in the full suite) at slot 0 with C poisoned
  and the workspace garbage-filled; C compared once the stream's event completed and once the device
  is idle; a call right after a kernel that lets dependents launch early and writes the inputs late;
  the call captured in a graph and replayed twice on new values.
- Time: the candidate's graph (offline: one launch per slot, each on its own inputs and output) and
  the baselines' graphs are sampled on the same seeds, in alternating rounds; every candidate sample's
  outputs are checked through their witnesses, and the guard bands and inputs after each round.
- Nothing a runner sends is trusted beyond its type: a malformed reply is a crash.
"""

from __future__ import annotations

import json
import math
import random
import sys
import time
from dataclasses import asdict

from hgemm.evaluator import timing
from hgemm.evaluator.phases import Phases
from hgemm.evaluator.runner import EARLY_WRITER_CYCLES, Buffers, Shim, StreamDevice, refresh
from hgemm.evaluator.runner_client import RunnerFailed, RunnerProcess, wait_exit

from hgemm.core.shape import Shape

MAX_SLOTS = 200
RING_BYTES = 1 << 30  # the offline ring's A and C slots together, at most
WITNESS_SAMPLES = 40  # samples per timing request, warm-up included (offline 16, server 31)
ROUNDS = 3  # the samples of each mode are split into this many rounds, alternating runner and judge
OFFLINE_SAMPLES = {"quick": 7, "full": 15}
SERVER_SAMPLES = 30
WITNESS_TOLERANCE = 8 * 2.0**-11  # per row: error of the row sum over sqrt(sum of squared terms)
# How `time` samples. "rules" is what every evaluation uses. The other two exist for the benchmark that shows
# what the rules change (bench/timing_rules.py): "bare" times the same graphs on inputs given once (no new values
# between samples, no witnesses, no input checks); "one_slot" is bare with every launch of the offline graph on
# slot 0's A and C, the offline meaning before the rules.
PROTOCOLS = ("rules", "bare", "one_slot")
SPARES = 2  # runners started ahead of the candidate being evaluated: one initialised, one booting
RETIRE_WAIT_S = 5.0  # how long a runner told to quit may take to exit before it is killed
# Stages whose timings wait until no runner's CUDA context is coming up or down. A quick-stage timing overlaps the
# next runner's context creation and a retired one's teardown: on an H100, 30 candidates timed both ways kept
# their ranks (Spearman 1.0 per shape), moved no more than between two quiet passes (medians 0.08-0.21%), none was
# refused as disturbed, and an evaluation took 0.09-0.12 s instead of 0.23-0.24 s
# (experiments/2026-11-27-quick-overlap). The full stage, the confirmation and the baselines alone stay quiet.
QUIET_STAGES = ("full",)


def slots_for(estimate_us: float, shape: Shape) -> int:
    """Launches per offline graph, each with its own A and C: enough for about 300 us, within RING_BYTES."""
    M, N, K = shape
    per_slot = 2 * (M * K + M * N)
    return max(1, min(timing.reps_for(estimate_us), RING_BYTES // per_slot, MAX_SLOTS))


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
        self.spares: list[RunnerProcess] = []  # the next candidates' runners, oldest first
        self.retiring: list[RunnerProcess] = []  # told to quit, not yet reaped
        self.new_runner = RunnerProcess  # what starts a runner (tests start scripted ones)
        self.rng = random.SystemRandom()

    # -- set-up ---------------------------------------------------------------------------------
    def prepare(self, M: int, N: int, K: int, empty_lib: str, runner_shim: str, baselines: bool = True) -> dict:
        """M, N and K arrive as ints through the worker's pipe and become a validated Shape here."""
        import torch
        from hgemm.evaluator import gpu_facts
        from hgemm.evaluator.baselines import Baselines
        from hgemm.evaluator.cudart import Runtime
        from hgemm.evaluator.problem import Problem

        shape = Shape(M, N, K)
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
        torch.cuda.init()
        self.rt = self.rt or Runtime()
        if self.shim_path != runner_shim:
            self.shim, self.shim_path = Shim(runner_shim), runner_shim
        self.info = self.info or gpu_facts.gpu_info()
        for cid in list(self.runners):
            self.forget(cid)
        self._fill_spares()  # they boot meanwhile; no context comes up or down while the shape is measured
        self._quiet(Phases())
        if self.problem is not None:
            self.baselines = None
            self.problem.close()
        stream = torch.cuda.Stream()
        self.facts = self.facts or gpu_facts.facts(self.info, stream, empty_lib)
        slots = slots_for(Problem.estimate_us(shape, stream), shape)
        self.problem = Problem(self.rt, self.shim, shape, slots, WITNESS_SAMPLES, self.info.l2_bytes,
                               self.rng.getrandbits(62), stream)
        self.baselines = None
        if baselines:
            self.problem.draw("randn")
            self.baselines = Baselines(self.problem, gpu_facts.gpu_key(self.info), self.info.l2_bytes)
        torch.cuda.synchronize()
        for spare in self.spares:
            spare.init()
        return {"gpu": asdict(self.info), "facts": self.facts, "slots": slots,
                "missing": self.baselines.missing if self.baselines else {}}

    def _fill_spares(self) -> None:
        """Forget spares that died; start new ones up to SPARES. A new runner boots but creates no CUDA
        context until `init` is sent, which happens only between timings (`_runner`, `forget`, `prepare`)."""
        for spare in [r for r in self.spares if r.proc.poll() is not None]:
            self.spares.remove(spare)
            spare.kill()
        while len(self.spares) < SPARES:
            self.spares.append(self.new_runner())

    def _runner(self, cid: str) -> RunnerProcess:
        """The oldest spare serves `cid`; the next one may initialise now (this candidate's timing waits
        for it); the one started to replace it only boots."""
        self._fill_spares()
        runner = self.spares.pop(0)
        runner.init()
        for spare in self.spares[:1]:
            spare.init()
        self.runners[cid] = runner
        self._fill_spares()
        return runner

    def forget(self, cid: str) -> None:
        """Let the candidate's runner go: it is told to quit and reaped later, so its CUDA context comes down
        while the next candidate is checked, not while anything is timed. Its timing is over, so the spares
        may all initialise now."""
        runner = self.runners.pop(cid, None)
        if runner is None:
            return
        spent = ", ".join(f"{name} {s:.3f}" for name, s in runner.phases.items())
        print(f"runner {cid}: seconds per phase: {spent}", file=sys.stderr, flush=True)
        try:
            runner.requests.write(json.dumps({"op": "quit"}) + "\n")
            runner.requests.flush()
        except (OSError, ValueError):
            runner.kill()
        runner.quit_at = time.monotonic()
        self.retiring.append(runner)
        self._reap()
        for spare in self.spares:
            spare.init()

    def _reap(self, wait_s: float = 0.0) -> None:
        """Forget the runners told to quit that have exited; with `wait_s`, wait that long for the others, then
        kill them. Without, kill those told more than RETIRE_WAIT_S ago (a runner that ignores `quit` is not kept
        alive by a run of quick-stage timings)."""
        now = time.monotonic()
        deadline = now + wait_s
        still = []
        for runner in self.retiring:
            overdue = runner.quit_at is not None and now - runner.quit_at > RETIRE_WAIT_S
            if wait_exit(runner.proc, deadline - time.monotonic()) or wait_s > 0 or overdue:
                runner.kill()
            else:
                still.append(runner)
        self.retiring = still

    def close(self) -> None:
        """End every runner this judge started (spares included) and remove their private folders."""
        for runner in [*self.runners.values(), *self.spares, *self.retiring]:
            runner.kill()
        self.runners, self.spares, self.retiring = {}, [], []

    def _quiet(self, ph: Phases) -> None:
        """Before timing: no runner's CUDA context is coming down, nor the next one's coming up (a spare
        that only boots is left booting: it creates no context)."""
        with ph.timed("retire_wait"):
            self._reap(wait_s=RETIRE_WAIT_S)
        with ph.timed("spare_wait"):
            for spare in [r for r in self.spares if r.init_sent]:
                try:
                    spare.wait_ready()
                except RunnerFailed:
                    self.spares.remove(spare)
                    spare.kill()

    def _settle(self, ph: Phases, stage: str) -> None:
        """Before a candidate's timing: a stage in QUIET_STAGES waits (`_quiet`); any other only forgets the
        retired runners that have exited and kills the overdue ones."""
        if stage in QUIET_STAGES:
            self._quiet(ph)
        else:
            self._reap()

    # -- the correctness suite ------------------------------------------------------------------
    def check(self, cid: str, lib: str, stage: str) -> dict:
        from hgemm.evaluator.harness import CheckFailed

        p = self.problem
        started = time.perf_counter()
        runner = self._runner(cid)
        ph = runner.phases
        worst = [0.0, 0.0]
        ref_worst = [0.0, 0.0]
        try:
            runner.wait_ready()
            ph.add("runner_wait", time.perf_counter() - started)
            with ph.timed("open"):
                fds = () if p.arena.fd is None else (p.arena.fd,)
                opened = runner.request("open", 120.0, fds=fds, arena=p.arena.share, layout=p.layout,
                                        shim=self.shim_path, lib=lib, M=p.M, N=p.N, K=p.K,
                                        l2_bytes=self.info.l2_bytes, slots=p.slots)
            if isinstance(opened.get("load_error"), str):
                self.forget(cid)
                return {"failure": ("load_error", opened["load_error"]), "phases": ph.rounded()}
            if opened.get("supports") is not True:
                self.forget(cid)
                return {"failure": ("unsupported_shape", f"hgemm_supports({p.M}, {p.N}, {p.K}) returned 0"),
                        "phases": ph.rounded()}
            timeout = p.check_timeout()
            previous = None
            for kind in ["randn"] if stage == "quick" else ["randn", "uniform", "large"]:
                with ph.timed("references"):
                    ref, ref_err, inputs = p.prepare_check(kind)
                with ph.timed("calls"):
                    rc = _rc(runner.request("call", timeout, slot=0))
                if rc:
                    raise CheckFailed("launch_error", f"hgemm_run returned CUDA error {rc}")
                with ph.timed("verify"):
                    if not p.early_matches():
                        raise CheckFailed("incomplete_on_event",
                                          f"{kind}: C changed after the event recorded on the stream had completed")
                    fro, mx = p.verify(ref, ref_err, inputs, kind, previous)
                    previous = p.c[0].clone()
                worst = [max(worst[0], fro), max(worst[1], mx)]
                ref_worst = [max(ref_worst[0], ref_err[0]), max(ref_worst[1], ref_err[1])]
            with ph.timed("references"):
                ref, ref_err, inputs = p.prepare_late_inputs()
            with ph.timed("calls"):
                rc = _rc(runner.request("call_after_writer", timeout, slot=0, cycles=EARLY_WRITER_CYCLES,
                                        wait_s=timeout))
            if rc:
                raise CheckFailed("launch_error", f"hgemm_run returned CUDA error {rc}")
            try:
                with ph.timed("verify"):
                    p.verify(ref, ref_err, inputs, "inputs written by the preceding kernel", None)
            except CheckFailed as f:
                if f.kind != "incorrect":
                    raise
                raise CheckFailed("early_read", "the result misses inputs that the kernel before it on the stream "
                                  "wrote late: it read them before that kernel finished (a dependent launch "
                                  "without griddepcontrol.wait?)") from None
            with ph.timed("calls"):
                captured = runner.request("capture", timeout, name="check", slots=[0])
            rc = _rc(captured)
            if rc:
                raise CheckFailed("not_capturable", f"hgemm_run returned CUDA error {rc} under graph capture")
            if "capture_error" in captured:
                raise CheckFailed("not_capturable", "capture on the given stream failed")
            runner.graphs.add("check")
            previous = p.c[0].clone()
            for replay in range(2):
                with ph.timed("references"):
                    ref, ref_err, inputs = p.prepare_check("randn")
                with ph.timed("calls"):
                    runner.request("replay", timeout, name="check")
                with ph.timed("verify"):
                    fro, mx = p.verify(ref, ref_err, inputs, f"graph replay {replay + 1} on new values", previous)
                    previous = p.c[0].clone()
                worst = [max(worst[0], fro), max(worst[1], mx)]
        except RunnerFailed as e:
            self.forget(cid)
            return {"failure": (e.kind, str(e)), "max_rel_err": worst[0] or None, "phases": ph.rounded()}
        except CheckFailed as f:
            self.forget(cid)
            return {"failure": (f.kind, str(f)), "max_rel_err": worst[0] or None, "phases": ph.rounded()}
        return {"failure": None, "max_rel_err": worst[0], "max_abs_rel": worst[1], "ref_rel_err": ref_worst[0],
                "phases": ph.rounded()}

    # -- timing ---------------------------------------------------------------------------------
    def time(self, cid: str, modes: list[str], stage: str, protocol: str = "rules") -> dict:
        """Per mode, the candidate's and the baselines' statistics; or `failure` or `disturbed`. `phases`
        holds the candidate's seconds per phase so far, check included. `protocol`: see PROTOCOLS."""
        from hgemm.evaluator.harness import CheckFailed

        if protocol not in PROTOCOLS:
            raise ValueError(f"unknown timing protocol {protocol!r}; one of {', '.join(PROTOCOLS)}")
        runner = self.runners[cid]
        out = {}
        try:
            for mode in modes:
                out[mode] = self._time_mode(runner, mode, stage, protocol)
        except RunnerFailed as e:
            self.forget(cid)
            out = {"failure": (e.kind, str(e))}
        except CheckFailed as f:
            self.forget(cid)
            out = {"failure": (f.kind, str(f))}
        except timing.TimingDisturbed as e:
            out = {"disturbed": str(e)}
        return {**out, "phases": runner.phases.rounded()}

    def _time_mode(self, runner: RunnerProcess, mode: str, stage: str, protocol: str = "rules") -> dict:
        from hgemm.evaluator.harness import CheckFailed

        ph = runner.phases
        self._settle(ph, stage)
        p = self.problem
        rules = protocol == "rules"
        slots = p.slots if mode == "offline" else 1
        one_slot = protocol == "one_slot" and slots > 1
        # A single launch at slot 0 is what the check's graph holds: that graph is timed, not a copy of it.
        name = "check" if slots == 1 and "check" in runner.graphs else f"{mode}-graph" + ("-one-slot" * one_slot)
        if name not in runner.graphs:
            with ph.timed("capture"):
                captured = runner.request("capture", p.check_timeout(), name=name,
                                          slots=[0] * slots if one_slot else list(range(slots)))
            rc = _rc(captured)
            if rc:
                raise CheckFailed("launch_error", f"hgemm_run returned CUDA error {rc} while captured for timing")
            if "capture_error" in captured:
                raise CheckFailed("not_capturable", "capture on the given stream failed")
            runner.graphs.add(name)
        count = OFFLINE_SAMPLES.get(stage, 15) if mode == "offline" else SERVER_SAMPLES
        seeds = [self.rng.getrandbits(63) for _ in range(count + 1)]  # the first is a warm-up, not reported
        b_seed = self.rng.getrandbits(63)
        with ph.timed("timing_setup"):
            p.start_timing(b_seed, slots)
            if not rules:  # the inputs get values once, not before every sample
                refresh(self.shim, Buffers(p.arena.base, p.layout), p.M, p.K, slots, seeds[0], p.stream.cuda_stream)
        size = -(-len(seeds) // ROUNDS)
        candidate: list[float] = []
        baselines: dict[str, list[float]] = {}
        timeout = 120.0 + 4 * p.check_timeout()
        for first in range(0, len(seeds), size):
            chunk = seeds[first : first + size]
            with ph.timed("time_candidate"):
                reply = runner.request("time", timeout, name=name, mode=mode, seeds=chunk, first=first,
                                       rng_seed=self.rng.getrandbits(32), rules=rules)
            candidate += _number_list(reply, "us", len(chunk))
            if self.baselines is not None:
                with ph.timed("time_baselines"):
                    for b, us in self._time_baselines(mode, slots, chunk, rules, one_slot).items():
                        baselines.setdefault(b, []).extend(us)
            if rules:
                # After the baselines' chunk, not between the two: run there, this check slowed the baselines'
                # next samples by about 0.3 us a launch on an H100 (experiments/2026-11-26-timing-rules). B, Bt
                # and the guard bands keep what the candidate did to them; A it could only spoil for itself (every
                # sample, the baselines' included, writes new values into A first).
                with ph.timed("input_checks"):
                    p.check_inputs(chunk[-1], slots, b_seed)
        if rules:
            with ph.timed("witnesses"):
                p.check_witnesses(seeds, slots, b_seed)
        timing._enough("candidate", len(candidate) - 1, count)
        stats = {"candidate": asdict(timing.quantiles(candidate[1:]))}
        for b, us in baselines.items():
            timing._enough(b, len(us) - 1, count)
            stats[b] = asdict(timing.quantiles(us[1:]))
        return stats

    def _time_baselines(self, mode: str, slots: int, seeds: list[int], rules: bool = True,
                        one_slot: bool = False) -> dict[str, list[float]]:
        import torch

        p = self.problem
        graphs = self.baselines.graphs(slots, one_slot)
        buf = Buffers(p.arena.base, p.layout)

        def on_refresh(seed: int) -> None:
            refresh(self.shim, buf, p.M, p.K, slots, seed, p.stream.cuda_stream)

        dev = StreamDevice(self.rt, p.stream.cuda_stream, self.shim, {n: g.replay for n, g in graphs.items()},
                           p.flush_ptr, p.flush_bytes, on_refresh if rules else None)
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
        self._quiet(Phases())
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
