"""A runner, as the judge sees it: a sandboxed process, two pipes, a Unix socket that carries file descriptors
(the arena's, at `open`), a log file for its output, and a private folder removed when it ends.

- Requests and replies are JSON lines; a reply that is not one JSON object, is longer than REPLY_LIMIT, comes
  late or never, or says a request failed is a `RunnerFailed` ("crash" or "timeout"), and the runner is killed.
- A runner boots without CUDA and creates its context on `init` (sent by `init`, or by the first wait for it).
"""

from __future__ import annotations

import json
import math
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import time

from hgemm.evaluator.phases import Phases

from hgemm.core.paths import state_dir

REPLY_LIMIT = 1 << 20
# Hardware connections (work queues) of a runner's CUDA context. The driver creates contexts one at a time for the
# whole host, and a context with one connection comes up in half the time alone and a third with eight at once
# (experiments/2026-11-27-scaling-4gpu, ctx_probe.py). A runner issues all its work on one stream.
RUNNER_CONNECTIONS = 1


class RunnerFailed(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # "crash" or "timeout"


class RunnerProcess:
    """One runner process; `module` and `env_extra` let tests start scripted runners."""

    def __init__(
        self,
        module: str = "hgemm.evaluator.runner",
        args: tuple[str, ...] = (),
        env_extra: dict[str, str] | None = None,
    ) -> None:
        from hgemm.evaluator import sandbox

        self.spawned = time.monotonic()
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        self.handles, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.log = state_dir("logs") / f"runner-{os.getpid()}-{time.time_ns()}.log"
        self.folder = sandbox.private_folder("runner-")
        argv = ["-m", module, *args, "--requests", str(req_r), "--replies", str(rep_w), "--handles",
                str(theirs.fileno())]  # fmt: skip
        env = {"CUDA_DEVICE_MAX_CONNECTIONS": str(RUNNER_CONNECTIONS), **(env_extra or {})}
        with open(self.log, "ab") as log:
            self.proc = sandbox.popen(
                argv,
                "runner",
                self.folder,
                env,
                pass_fds=(req_r, rep_w, theirs.fileno()),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        os.close(req_r)
        os.close(rep_w)
        theirs.close()
        self.requests = os.fdopen(req_w, "w")
        self.replies = rep_r
        self.pending = b""
        self.init_sent = False
        self.ready = False
        self.graphs: set[str] = set()  # graphs captured in this runner
        self.phases = Phases()  # of the candidate it serves (judge and runner side)
        self.quit_at: float | None = None  # when the judge told it to quit (time.monotonic)

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

    def init(self) -> None:
        """Let the runner create its CUDA context (it boots without one, and waits for this)."""
        if not self.init_sent:
            self.init_sent = True
            try:
                self.requests.write(json.dumps({"op": "init"}) + "\n")
                self.requests.flush()
            except (OSError, ValueError):
                pass  # a runner that died shows when its reply is read

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        if not self.ready:
            self.init()
            reply = self._line(timeout_s, "start-up")
            if reply.get("ready") is not True:
                self.kill()
                raise RunnerFailed("crash", "runner could not initialise CUDA")
            self.ready = True
            booted = reply.get("booted")  # the runner's monotonic clock, which is this process's
            if isinstance(booted, (int, float)) and not isinstance(booted, bool):
                boot = _seconds(booted - self.spawned)
                if boot is not None:
                    self.phases.add("runner_boot", boot)
            cuda = _seconds(reply.get("cuda_s"))
            if cuda is not None:
                self.phases.add("runner_cuda", cuda)

    def request(self, op: str, timeout_s: float, fds: tuple[int, ...] = (), **args) -> dict:
        """`op` with `args`; `fds` go over the socket first (the runner's `op` receives them)."""
        self.wait_ready()
        try:
            if fds:
                socket.send_fds(self.handles, [b"fd"], list(fds))
            self.requests.write(json.dumps({"op": op, "args": args}) + "\n")
            self.requests.flush()
        except (BrokenPipeError, OSError):
            raise RunnerFailed("crash", f"runner died before {op} ({self._exit()})") from None
        reply = self._line(timeout_s, op)
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
        signum = (
            -code if code is not None and code < 0 else code - 128 if code is not None and code > 128 else 0
        )
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
        for f in (self.requests, self.handles):
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


def wait_exit(proc: subprocess.Popen, timeout_s: float) -> bool:
    """Whether `proc` exited within `timeout_s`, woken by the kernel through a pidfd where there is one
    (`Popen.wait` polls, sleeping up to 50 ms between looks)."""
    if proc.poll() is not None or timeout_s <= 0:
        return proc.poll() is not None
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        select.select([fd], [], [], timeout_s)
    finally:
        os.close(fd)
    return proc.poll() is not None


def _seconds(v) -> float | None:
    """A duration a runner reported, for the record's phases only: a number within an hour, else None."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= 3600:
        return float(v)
    return None
