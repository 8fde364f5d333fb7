"""Each slot's searches in a process of its own on the driver's host, so that the driver's Python work (proposals,
the cost model, retrieval, the index, the Dask client) runs on as many cores as there are slots, not under one GIL.

- `SlotProcess` (driver side) starts one child per slot (spawn), or takes one `prestart` started earlier (the
  children warm up while the cluster starts), and hands it one shape at a time. While the child
  searches, the driver's thread for that slot commits the archive writes the child sends (`WRITES`) and answers
  each before the child goes on: the driver stays the archive's only writer, and a record is committed as soon
  as it exists, as in a search run in the driver itself.
- The child (`slot_main`) reads the archive through a read-only connection of its own, keeps its own copy of the
  retrieval index (seeded from the driver's, so nothing is rebuilt; the embedding cache is the driver's),
  evaluates on its slot's worker through a Dask client of its own (`RemoteEvaluator`), and stops at its next
  evaluation once the sweep's stop event is set.
- A child ignores SIGINT and SIGTERM (the driver stops it) and exits within a second of the driver's death, so a
  killed driver leaves no search behind.
- A search that raises comes back as `SearchFailed` carrying the original's name and message; a child that dies
  fails its shape the same way, and the slot's next shape starts a fresh child. A child that cannot start at all
  raises `SlotBroken`, which stops the sweep.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hgemm.core.errors import HgemmError
from hgemm.core.shape import Shape

WRITES = frozenset({"record", "unrank_search_rows", "start_run", "end_run", "add_llm_call"})
# A search process's thread pools, set before torch loads: one core per slot.
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
STOP_GRACE_S = 120.0  # how long a stopped slot waits for its child to end its search before ending the child


class SearchFailed(HgemmError):
    """A slot's search raised in its process, or the process died; `reason` reads as the original error."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class SlotBroken(HgemmError):
    """A slot's search process could not start: a fault of the driver's host, not of a shape (it stops the
    sweep)."""

    fatal = True


@dataclass
class SlotSpec:
    """What a slot's process needs (sent once, when it starts)."""

    slot: str
    scheduler: str  # the Dask scheduler's address
    token: str  # the pool's token: the slot's worker keeps the evaluator it opened for it
    factory: bytes  # the workers' evaluator factory, cloudpickled (a test's stand-in lives in its __main__)
    eval_timeout: float
    archive: str  # the archive's file
    index: str  # the driver's index folder, which seeds the child's copy
    sm_count: int
    gpu: str
    settings: Any  # agent.sweep.SearchSettings


# ----- on the driver ----------------------------------------------------------------------------------


def spawn(stop: Any, name: str = "hgemm-search") -> tuple[Any, Any]:
    """A search process that warms up, then waits for its slot (`SlotSpec`): (the process, the driver's end of
    its pipe). `stop` is the sweep's stop event: a multiprocessing Event reaches a child only as it starts."""
    ctx = mp.get_context("spawn")
    ours, theirs = ctx.Pipe()
    proc = ctx.Process(target=slot_main, args=(theirs, stop, os.getpid()), name=name, daemon=True)
    proc.start()
    theirs.close()  # the child's end: closed here, so the child's death reads as the end of the pipe
    return proc, ours


def prestart(count: int, stop: Any) -> list[tuple[Any, Any]]:
    """`count` search processes started now, before their slots are known: each warms up (imports, the
    embedding model) while the driver starts the cluster. `SlotProcesses` hands them to its slots."""
    return [spawn(stop) for _ in range(count)]


def end_spares(spares: list[tuple[Any, Any]]) -> None:
    """End started processes no slot took (they hold nothing yet)."""
    while spares:
        proc, conn = spares.pop()
        proc.kill()
        proc.join(5)
        conn.close()


class SlotProcess:
    """One slot's search process: started by `start` (a sweep starts every slot's at once) or on first use,
    and again after it died; `spare`, a process `prestart` started, is its first."""

    def __init__(self, spec: SlotSpec, archive: Any, stop: Any, spare: tuple[Any, Any] | None = None):
        self.spec, self.archive, self.stop = spec, archive, stop  # the driver's archive: thread-safe calls
        self.proc, self.conn = spare if spare is not None else (None, None)
        self.told = False  # whether the current child has its spec

    def start(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            return
        self.proc, self.conn = spawn(self.stop, f"hgemm-search-{self.spec.slot}")
        self.told = False

    def search(self, shape: Shape, prior: dict[str, Any] | None) -> dict[str, Any]:
        """The shape's report row, searched in the child; raises `SearchFailed`, `SlotBroken` or
        KeyboardInterrupt (the sweep stopped)."""
        self.start()
        if not self.told:
            self._send(("spec", self.spec))
            self.told = True
        self._send(("search", tuple(shape), prior))
        while True:
            msg = self._receive()
            kind = msg[0]
            if kind == "call":
                _, name, args, kwargs = msg
                try:
                    if name not in WRITES:
                        raise ValueError(f"{name} is not an archive write")
                    reply = ("ok", getattr(self.archive, name)(*args, **kwargs))
                except Exception as e:
                    reply = ("error", f"{type(e).__name__}: {e}")
                self._send(reply)
            elif kind == "row":
                return msg[1]
            elif kind == "failed":
                raise SearchFailed(msg[1])
            elif kind == "interrupted":
                raise KeyboardInterrupt
            elif kind == "broken":
                self.close()
                raise SlotBroken(f"the search process of {self.spec.slot} could not start:\n{msg[1]}")

    def _send(self, msg: tuple) -> None:
        try:
            self.conn.send(msg)
        except OSError:  # the child is gone
            self._ended()

    def _receive(self) -> Any:
        stopped_at = None
        while True:
            try:
                if self.conn.poll(0.5):
                    return self.conn.recv()
            except (EOFError, OSError):
                self._ended()
            if not self.proc.is_alive():
                self._ended()
            if self.stop.is_set():  # a child that does not end its search in time is ended
                stopped_at = stopped_at or time.monotonic()
                if time.monotonic() - stopped_at > STOP_GRACE_S:
                    self.close()
                    raise KeyboardInterrupt

    def _ended(self) -> None:
        """The child died: its shape failed (or the sweep is stopping); the slot's next shape starts another."""
        proc, conn, self.proc, self.conn = self.proc, self.conn, None, None
        proc.join(5)
        conn.close()
        if self.stop.is_set():
            raise KeyboardInterrupt
        raise SearchFailed(f"SearchProcessDied: the search process of {self.spec.slot} ended "
                           f"(exit code {proc.exitcode})")  # fmt: skip

    def quit(self) -> None:
        """Ask the child to end (it does once its current step is over); `close` waits for it."""
        try:
            if self.conn is not None:
                self.conn.send(("quit",))
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        self.quit()
        proc, conn, self.proc, self.conn = self.proc, self.conn, None, None
        if proc is None:
            return
        proc.join(10)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
        conn.close()


class SlotProcesses:
    """The sweep's slot processes by slot name; `search(slot, shape, prior)` runs on that slot's. `spares`:
    processes `prestart` started with the pool's stop event, taken by the first slots (the rest end at
    `close`)."""

    def __init__(self, pool: Any, archive: Any, *, settings: Any, gpu: str, sm_count: int, archive_path: Path,
                 index_dir: Path, spares: list[tuple[Any, Any]] | None = None):  # fmt: skip
        import cloudpickle

        self.archive, self.stop = archive, pool.stop
        self.base = dict(
            scheduler=pool.client.scheduler.address, token=pool.token, factory=cloudpickle.dumps(pool.factory),
            eval_timeout=pool.eval_timeout, archive=str(archive_path), index=str(index_dir), sm_count=sm_count,
            gpu=gpu, settings=settings,
        )  # fmt: skip
        self.spares = spares if spares is not None else []
        self.slots: dict[str, SlotProcess] = {}
        self.lock = threading.Lock()

    def _slot(self, slot: str) -> SlotProcess:
        with self.lock:
            if slot not in self.slots:
                spec, spare = SlotSpec(slot=slot, **self.base), self.spares.pop(0) if self.spares else None
                self.slots[slot] = SlotProcess(spec, self.archive, self.stop, spare)
            return self.slots[slot]

    def start(self, slots: list[str]) -> None:
        """Start these slots' processes now: they warm up while the driver finishes getting ready."""
        for slot in slots:
            self._slot(slot).start()

    def search(self, slot: str, shape: Shape, prior: dict[str, Any] | None) -> dict[str, Any]:
        return self._slot(slot).search(shape, prior)

    def close(self) -> None:
        end_spares(self.spares)
        for proc in self.slots.values():
            proc.quit()
        for proc in self.slots.values():
            proc.close()


def stop_event() -> Any:
    """An event the driver's threads and the slot processes share: the sweep's stop."""
    return mp.get_context("spawn").Event()


# ----- in the slot's process --------------------------------------------------------------------------


class ForwardedArchive:
    """The archive as a slot's process sees it: reads from its own read-only connection, writes (`WRITES`)
    sent to the driver, which commits each before it answers."""

    def __init__(self, archive: Any, conn: Any):
        self._archive, self._conn = archive, conn
        self._lock = threading.Lock()  # one call on the pipe at a time (an LLM proposer has threads)

    def __getattr__(self, name: str) -> Any:
        if name not in WRITES:
            return getattr(self._archive, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self._conn.send(("call", name, args, kwargs))
                status, value = self._conn.recv()
            if status != "ok":
                from hgemm.archive.errors import ArchiveError

                raise ArchiveError(f"the driver could not commit {name}: {value}")
            return value

        return call


def seed_index(main: Path, slot: str) -> Path:
    """The slot's own index folder, a copy of the driver's files (the driver syncs its index first): each
    process appends and saves its copy without racing the others."""
    from hgemm.index.store import FILES

    mine = main / "slots" / slot
    mine.mkdir(parents=True, exist_ok=True)
    (mine / "meta.json").unlink(missing_ok=True)  # stale until the copy is whole
    for name in (*FILES, "meta.json"):
        if (main / name).exists():
            shutil.copyfile(main / name, mine / f".{name}.tmp")
            os.replace(mine / f".{name}.tmp", mine / name)
    return mine


def _watch_driver(pid: int) -> None:
    while os.getppid() == pid:
        time.sleep(1.0)
    os._exit(1)  # the driver died (SIGKILL): nothing is left to commit what this search would find


def slot_main(conn: Any, stop: Any, driver_pid: int) -> None:
    """The child: warm up (imports, the embedding model) while the driver gets ready, take its slot's spec, set
    up on the first shape (the driver's index is synced by then), then search each shape the driver sends until
    it says quit or goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # One core per slot: a process started before the cluster has not inherited the thread limits Dask sets in
    # the driver's environment, and one torch thread pool per core per slot would have them spin against each other.
    os.environ.update(ONE_THREAD)
    threading.Thread(target=_watch_driver, args=(driver_pid,), daemon=True, name="hgemm-watch").start()
    spec: SlotSpec | None = None
    search = None
    try:
        _warm_up()
    except BaseException:
        conn.send(("broken", traceback.format_exc()))
        return
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg[0] == "spec":
            spec = msg[1]
            continue
        if msg[0] != "search" or spec is None:
            return
        if search is None:
            try:
                search = _setup(spec, stop, conn)
            except BaseException:
                conn.send(("broken", traceback.format_exc()))
                return
        try:
            reply: tuple = ("row", search(Shape(*msg[1]), msg[2]))
        except KeyboardInterrupt:
            reply = ("interrupted",)
        except (EOFError, BrokenPipeError):
            return  # the driver is gone
        except Exception as e:
            reply = ("failed", f"{type(e).__name__}: {e}")
        try:
            conn.send(reply)
        except (OSError, ValueError):
            return


def _warm_up() -> None:
    import distributed  # noqa: F401
    import hgemm.agent.loop  # noqa: F401
    import hgemm.agent.template  # noqa: F401
    from hgemm.index.embed import load_model

    load_model()  # the slow part of a start where the index embeds texts (None without a model)


def _setup(spec: SlotSpec, stop: Any, conn: Any) -> Any:
    import cloudpickle
    from distributed import Client
    from hgemm.agent.sweep import search_shape
    from hgemm.agent.sweep_dask import RemoteEvaluator, WorkerPool, quiet
    from hgemm.archive import Archive
    from hgemm.index import Retriever
    from hgemm.index.embed import Embedder

    quiet()
    client = Client(spec.scheduler, timeout="60s", set_as_default=False)
    pool = WorkerPool(client, cloudpickle.loads(spec.factory), eval_timeout=spec.eval_timeout, stop=stop,
                      token=spec.token)  # fmt: skip
    evaluator = RemoteEvaluator(pool, spec.slot)
    archive = ForwardedArchive(Archive(Path(spec.archive), readonly=True), conn)
    retriever = Retriever(archive, gpu_sm_count=spec.sm_count, path=seed_index(Path(spec.index), spec.slot))
    # One embedding cache per machine, as everywhere: the driver's (SQLite, shared safely between processes).
    retriever.store.embedder = Embedder(Path(spec.index) / "embeddings.db")

    def search(shape: Shape, prior: dict[str, Any] | None) -> dict[str, Any]:
        evaluator.waited = 0.0
        try:
            row = search_shape(shape, evaluator=evaluator, archive=archive, retriever=retriever,
                               settings=spec.settings, gpu=spec.gpu, prior=prior)  # fmt: skip
        except Exception:
            evaluator.forget()  # a fresh worker may stand behind the slot
            raise
        row["worker_seconds"] = round(evaluator.waited, 2)
        return row

    return search
