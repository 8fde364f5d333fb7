"""The supervised judge process: the parent (`Worker`) starts it and talks to it over a pipe.

- One request at a time, each with a time limit; a request that runs out of time, or a child that dies,
  kills the child and raises `WorkerFailed(kind, message)`; the caller starts a fresh one and goes on.
- The child serves the methods of `session` (module:Class), by default the judge (evaluator/judge.py),
  which loads no candidate code itself: candidates run in runner processes the judge starts. On `quit` the
  session's `close`, where it has one, ends what it started.
- The child's stderr goes to a log file under the state root, whose tail explains a crash.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
import traceback
from pathlib import Path

from hgemm.core.paths import state_dir


class WorkerFailed(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # "timeout" or "crash"


class Worker:
    """`session` names the class (module:Class) whose methods serve requests in the child."""

    def __init__(self, session: str = "hgemm.evaluator.judge:Judge") -> None:
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
            getattr(session, "close", lambda: None)()
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
