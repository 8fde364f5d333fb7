"""Sweeps on Dask: one worker per GPU, the search on the driver, evaluations on the workers.

- `open_cluster(gpus)`: on one host, one single-threaded worker per GPU, pinned to it through
  `CUDA_VISIBLE_DEVICES` (dask-cuda's `LocalCUDACluster` where it is installed, else a `SpecCluster` of
  `Nanny` workers with that variable set per worker); `--scheduler ADDRESS` connects to a running Dask
  scheduler instead (several hosts; Slurm through dask-jobqueue). Workers run as non-daemon processes (the
  evaluator starts its own GPU worker process) and a task whose worker dies is not rerun by Dask
  (`allowed-failures` 0): the sweep decides.
- The driver runs one search thread per worker ("slot", named by the worker's name). Each search is
  `agent.loop.optimize` with a `RemoteEvaluator` that sends every `evaluate` call to its slot's worker; the
  records come back and the driver writes them: it is the archive's only writer. Archive and index calls from
  the slot threads are serialised by one lock (`Locked`).
- A worker evaluates through one evaluator it opens on first use (`open_evaluator`, or the factory the
  driver passes) and keeps for its life. A call that fails (the worker died: illegal address, out of memory,
  lost GPU; or it hung past `eval_timeout`, when the driver kills it) fails the shape's search; the Nanny
  starts a fresh worker under the same name; the shape is retried once, then its row is marked failed with
  the reason, and the sweep goes on.
- Ctrl-C (or SIGTERM) stops every slot at its next evaluation; what was evaluated is already committed.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import CancelledError
from typing import Any

from hgemm.core.errors import BadInput, HgemmError
from hgemm.core.shape import Shape

RETRIES = 1  # a shape whose search failed is searched once more, then marked failed
EVAL_TIMEOUT_S = 900.0  # an evaluate call with no answer by then is a hung worker
WORKER_WAIT_S = 120.0  # how long a slot waits for its worker to come back after a restart


class WorkerLost(HgemmError):
    """A worker died or hung during a call; the call's shape fails (and is retried once)."""


# ----- choosing GPUs and starting the cluster ---------------------------------------------------------


def gpu_count() -> int:
    """GPUs this host shows (`nvidia-smi -L`), within `CUDA_VISIBLE_DEVICES` when that is set."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([v for v in visible.split(",") if v.strip()])
    if shutil.which("nvidia-smi") is None:
        return 0
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines()) if out.returncode == 0 else 0


def parse_gpus(text: str) -> list[str]:
    """`--gpus all` or a comma-separated list of device numbers, as `CUDA_VISIBLE_DEVICES` entries."""
    text = text.strip()
    if text == "all":
        n = gpu_count()
        if n == 0:
            raise BadInput("--gpus all: no GPU found on this host (nvidia-smi -L lists none)")
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        return [v.strip() for v in visible.split(",") if v.strip()] if visible else [str(i) for i in range(n)]
    parts = [p.strip() for p in text.split(",")]
    if not parts or not all(p.isdigit() for p in parts):
        raise BadInput(f"--gpus is 'all' or device numbers such as 0,1; got {text!r}")
    if len(set(parts)) != len(parts):
        raise BadInput(f"--gpus {text}: a device is named twice")
    return parts


WORKER_CONFIG = {"distributed.worker.daemon": False, "distributed.scheduler.allowed-failures": 0}


def quiet() -> None:
    """Dask's own INFO lines would bury the sweep's progress: warnings and errors only."""
    import logging

    for name in ("distributed", "dask_cuda"):
        logging.getLogger(name).setLevel(logging.WARNING)


def open_cluster(gpus: list[str]) -> Any:
    """A cluster on this host with one single-threaded worker per entry of `gpus`, each pinned to it."""
    import dask

    quiet()
    dask.config.set(WORKER_CONFIG)
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError:
        LocalCUDACluster = None
    if LocalCUDACluster is not None:
        return LocalCUDACluster(
            CUDA_VISIBLE_DEVICES=",".join(gpus),
            threads_per_worker=1,
            dashboard_address=None,
            silence_logs=40,
            host="127.0.0.1",
        )
    return pinned_cluster(gpus)


def pinned_cluster(gpus: list[str]) -> Any:
    """The cluster without dask-cuda: a `SpecCluster` of Nanny workers named by position, each with
    `CUDA_VISIBLE_DEVICES` set to its own entry of `gpus` (tests give CPU workers stand-in entries)."""
    import dask
    from distributed import Nanny, Scheduler, SpecCluster

    dask.config.set(WORKER_CONFIG)
    scheduler = {"cls": Scheduler, "options": {"host": "127.0.0.1", "dashboard": False}}
    workers = {
        f"gpu{g}": {
            "cls": Nanny,
            "options": {
                "nthreads": 1,
                "host": "127.0.0.1",
                "env": {"CUDA_VISIBLE_DEVICES": g},
                "config": WORKER_CONFIG,
                "silence_logs": 40,
                "memory_limit": 0,
            },
        }
        for g in gpus
    }
    return SpecCluster(workers=workers, scheduler=scheduler, name="hgemm-sweep")


# ----- on the workers ---------------------------------------------------------------------------------

_WORKER: dict[str, Any] = {"token": None, "evaluator": None}


def _close_evaluator() -> None:
    ev, _WORKER["evaluator"], _WORKER["token"] = _WORKER["evaluator"], None, None
    if ev is not None and hasattr(ev, "__exit__"):
        ev.__exit__(None, None, None)


def _evaluator(token: str, factory: Callable[[], Any] | None) -> Any:
    """This worker's evaluator for the sweep `token`, opened on first use and kept."""
    if _WORKER["token"] != token:
        _close_evaluator()
        if factory is None:
            from hgemm.agent.commands import open_evaluator as factory
        ev = factory()
        if hasattr(ev, "__enter__"):
            ev = ev.__enter__() or ev
        _WORKER["token"], _WORKER["evaluator"] = token, ev
        atexit.register(_close_evaluator)
    return _WORKER["evaluator"]


def worker_gpu(token: str, factory: Callable[[], Any] | None) -> tuple[Any, str, int]:
    """(GpuInfo, this worker's CUDA_VISIBLE_DEVICES, its process id)."""
    return _evaluator(token, factory).gpu_info(), os.environ.get("CUDA_VISIBLE_DEVICES", ""), os.getpid()


def worker_evaluate(token: str, factory: Callable[[], Any] | None, sources: list[str], shape: Shape,
                    options: dict[str, Any]) -> list[Any]:  # fmt: skip
    return _evaluator(token, factory).evaluate(sources, shape, **options)


# ----- on the driver ----------------------------------------------------------------------------------


class WorkerPool:
    """The sweep's workers as named slots; `call` runs a function on one slot's current worker."""

    def __init__(self, client: Any, factory: Callable[[], Any] | None = None, *, eval_timeout: float = EVAL_TIMEOUT_S,
                 stop: threading.Event | None = None):  # fmt: skip
        self.client, self.factory, self.eval_timeout = client, factory, eval_timeout
        self.stop = stop or threading.Event()
        self.token = uuid.uuid4().hex

    def workers(self) -> dict[str, str]:
        """Worker name -> address, as the scheduler knows them now."""
        info = self.client.scheduler_info(n_workers=-1).get("workers", {})
        return {str(w.get("name", addr)): addr for addr, w in info.items()}

    def slots(self, wait_s: float = WORKER_WAIT_S) -> list[str]:
        deadline = time.monotonic() + wait_s
        while not (names := self.workers()):
            if time.monotonic() > deadline:
                raise BadInput("the Dask scheduler has no workers")
            time.sleep(0.5)
        return sorted(names)

    def address(self, slot: str) -> str:
        deadline = time.monotonic() + WORKER_WAIT_S
        while (addr := self.workers().get(slot)) is None:
            if self.stop.is_set():
                raise KeyboardInterrupt
            if time.monotonic() > deadline:
                raise WorkerLost(f"worker {slot} did not come back within {WORKER_WAIT_S:.0f} s")
            time.sleep(0.5)
        return addr

    def call(self, slot: str, fn: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
        from distributed import KilledWorker

        addr = self.address(slot)
        future = self.client.submit(fn, self.token, self.factory, *args, workers=[addr], allow_other_workers=False,
                                    pure=False)  # fmt: skip
        deadline = time.monotonic() + (timeout or self.eval_timeout)
        checked = time.monotonic()
        try:
            while True:
                if self.stop.is_set():
                    raise KeyboardInterrupt
                if (
                    time.monotonic() - checked > 5.0
                ):  # a scheduler that reruns tasks would wait on a dead worker
                    checked = time.monotonic()
                    if addr not in self.workers().values():
                        raise WorkerLost(f"worker {slot} left the cluster during the call")
                try:
                    return future.result(timeout=0.5)
                except TimeoutError:
                    if time.monotonic() > deadline:
                        self.kill(addr)
                        raise WorkerLost(
                            f"worker {slot} hung: no answer in {timeout or self.eval_timeout:.0f} s; restarted"
                        ) from None
                except KilledWorker:
                    self._lost()
                    raise WorkerLost(f"worker {slot} died during the call (its process ended)") from None
                except (OSError, EOFError, CancelledError) as e:  # the worker, or its connection, went away
                    self._lost()
                    raise WorkerLost(f"worker {slot} was lost: {type(e).__name__}: {e}") from None
        finally:
            if not future.done():
                future.cancel()

    def _lost(self) -> None:
        """A worker lost while the sweep is being stopped (a SIGTERM to the whole process group, say) is part
        of the stop, not a failure of the shape: wait a moment for the stop to show, then stop."""
        if not self.stop.wait(1.0):
            return
        raise KeyboardInterrupt

    def kill(self, addr: str) -> None:
        """End a hung worker's process; its Nanny starts a fresh one under the same name."""
        try:
            self.client.run(os._exit, 1, workers=[addr], wait=False)
        except Exception:
            pass


class RemoteEvaluator:
    """The `Evaluator` protocol, served by one slot's worker."""

    def __init__(self, pool: WorkerPool, slot: str):
        self.pool, self.slot = pool, slot
        self._gpu: Any = None
        self.pin = ""

    def gpu_info(self) -> Any:
        if self._gpu is None:
            self._gpu, self.pin, _ = self.pool.call(self.slot, worker_gpu)
        return self._gpu

    def evaluate(self, sources: list[str], shape: Any, **options: Any) -> list[Any]:
        return self.pool.call(self.slot, worker_evaluate, list(sources), Shape.of(shape), options)


class Locked:
    """Every method call of `obj` under one lock (the archive and the index, shared by the slot threads)."""

    def __init__(self, obj: Any, lock: threading.RLock):
        self._obj, self._lock = obj, lock

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._obj, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        return call


def run_slots(
    order: list[Shape],
    *,
    pool: WorkerPool,
    search: Callable[[Shape, RemoteEvaluator], dict[str, Any]],
    failed: Callable[[Shape, str], dict[str, Any]],
    on_row: Callable[[dict[str, Any]], None],
    display: Any,
    limit: int | None = None,
) -> None:
    """Search `order` on every slot at once: each slot takes the next shape; a search that raises goes back
    to the front of the queue once (`RETRIES`), for the first slot with a live worker to take, then
    `failed(shape, reason)` is its row. `on_row` runs
    under a lock for each finished shape. Returns when the queue is empty, or raises KeyboardInterrupt after
    stopping every slot."""
    queue = deque(order[:limit] if limit is not None else order)
    failures: dict[Shape, int] = {}
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work(slot: str) -> None:
        evaluator = RemoteEvaluator(pool, slot)
        while not pool.stop.is_set():
            try:  # a slot whose worker died waits for its replacement; a free slot takes the retry meanwhile
                pool.address(slot)
            except WorkerLost as e:
                display.note(f"{slot}: {e}; its shapes go to the other workers")
                break
            with lock:
                shape = queue.popleft() if queue else None
            if shape is None:
                break
            display.start(slot, shape, evaluator.pin)
            try:
                row = search(shape, evaluator)
            except KeyboardInterrupt:
                break
            except Exception as e:
                if pool.stop.wait(
                    1.0
                ):  # a failure while the sweep stops (SIGTERM to the process group) is the stop
                    break
                reason = f"{type(e).__name__}: {e}"
                with lock:
                    failures[shape] = failures.get(shape, 0) + 1
                    again = failures[shape] <= RETRIES
                    if again:
                        queue.appendleft(shape)
                display.note(f"{shape}: {reason}" + ("; retrying" if again else "; marked failed"))
                if again:
                    evaluator._gpu = None  # a fresh worker may stand behind the slot
                    continue
                row = failed(shape, reason)
            row["worker"] = slot
            with lock:
                on_row(row)
            display.finish(slot, row)
        display.idle(slot)

    def guarded(slot: str) -> None:
        try:
            work(slot)
        except BaseException as e:  # a driver-side bug: stop everything and raise it in the main thread
            errors.append(e)
            pool.stop.set()

    threads = [
        threading.Thread(target=guarded, args=(s,), name=f"hgemm-slot-{s}", daemon=True) for s in pool.slots()
    ]
    for t in threads:
        t.start()
    try:
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.2)
            display.refresh()
    except KeyboardInterrupt:
        pool.stop.set()
        for t in threads:
            t.join()
        raise
    if errors and not isinstance(errors[0], KeyboardInterrupt):
        raise errors[0]
    if pool.stop.is_set():
        raise KeyboardInterrupt
