"""`python driver.py sweep ...` is `hgemm sweep ...` with the delayed stand-in evaluator on the Dask workers.

With `SWEEP_PROFILE_OUT=<file.json>` the driver also accounts for its time, per shape and per phase:
- every shape's search (where it runs in this process) under its own thread's cProfile, with the thread's CPU
  time beside its wall time;
- time spent waiting on the workers (`RemoteEvaluator` calls), and on and under the archive/index lock
  (`Locked`), per method;
- the process's CPU time (all its threads: slot threads, Dask client and the in-process scheduler).
It writes the summary to that file at exit."""

from __future__ import annotations

import atexit
import cProfile
import json
import os
import pstats
import resource
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

_lock = threading.Lock()
_local = threading.local()
_profiles: list[cProfile.Profile] = []
_shapes: list[dict] = []
_locked: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])  # method -> calls, wait s, hold s
_started = time.monotonic()


def _acc() -> dict:
    if not hasattr(_local, "acc"):
        _local.acc = defaultdict(float)
    return _local.acc


def install() -> None:
    from hgemm.agent import sweep_cli, sweep_dask

    # Before the slot processes, sweep_cli ran each search in this process; after, there is no search here to
    # profile (the slot processes search), and only the worker waits, the lock and the process CPU are seen.
    search_shape = getattr(sweep_cli, "search_shape", None)

    def profiled_search(shape, **kw):
        acc = _acc()
        acc.clear()
        prof = cProfile.Profile()
        wall, cpu = time.monotonic(), time.thread_time()
        prof.enable()
        try:
            return search_shape(shape, **kw)
        finally:
            prof.disable()
            row = {
                "shape": list(shape),
                "thread": threading.current_thread().name,
                "wall_s": time.monotonic() - wall,
                "thread_cpu_s": time.thread_time() - cpu,
                **acc,
            }
            with _lock:
                _profiles.append(prof)
                _shapes.append(row)

    if search_shape is not None:
        sweep_cli.search_shape = profiled_search

    remote_evaluate = sweep_dask.RemoteEvaluator.evaluate

    def timed_evaluate(self, *args, **kw):
        t = time.monotonic()
        try:
            return remote_evaluate(self, *args, **kw)
        finally:
            _acc()["worker_wait_s"] += time.monotonic() - t
            _acc()["evaluate_calls"] += 1

    sweep_dask.RemoteEvaluator.evaluate = timed_evaluate

    def locked_getattr(self, name):
        attr = getattr(self._obj, name)
        if not callable(attr):
            return attr
        label = f"{type(self._obj).__name__}.{name}"

        def call(*args, **kwargs):
            t0 = time.monotonic()
            with self._lock:
                t1 = time.monotonic()
                try:
                    return attr(*args, **kwargs)
                finally:
                    t2 = time.monotonic()
                    acc = _acc()
                    acc["lock_wait_s"] += t1 - t0
                    acc["lock_held_s"] += t2 - t1
                    with _lock:
                        entry = _locked[label]
                        entry[0] += 1
                        entry[1] += t1 - t0
                        entry[2] += t2 - t1

        return call

    sweep_dask.Locked.__getattr__ = locked_getattr
    atexit.register(write, Path(os.environ["SWEEP_PROFILE_OUT"]))


# cumulative time of these functions, summed over every shape's search: the phases of the driver's work
PHASES = {
    "search: propose (proposer, model, retrieval)": ("loop.py", "launch"),
    "search: evaluate (worker wait + archiving)": ("loop.py", "evaluate"),
    "search: confirm (worker wait + archiving)": ("loop.py", "confirm"),
    "search: index sync": ("loop.py", "sync_index"),
    "row: searched_row": ("sweep.py", "searched_row"),
    "prior: archived_row": ("sweep.py", "archived_row"),
    "  remote evaluate (waiting on workers)": ("sweep_dask.py", "evaluate"),
    "  TemplateProposer.propose": ("template.py", "propose"),
    "  TemplateProposer.observe": ("template.py", "observe"),
    "  template: _pool (ranking by the model)": ("template.py", "_pool"),
    "  template: _start (retrieval, archive attempts)": ("template.py", "_start"),
    "  model: predict_us": ("model.py", "predict_us"),
    "  Retriever.sync": ("retriever.py", "sync"),
    "  Retriever.similar_shapes": ("retriever.py", "similar_shapes"),
    "  Retriever.history": ("retriever.py", "history"),
    "  embed texts": ("embed.py", "embed"),
    "  Archive.record": ("store.py", "record"),
    "  Archive.attempts": ("store.py", "attempts"),
    "  Archive.leaderboard": ("store.py", "leaderboard"),
    "  Archive.start_run": ("store.py", "start_run"),
    "  Archive.end_run": ("store.py", "end_run"),
    "  family render": ("kernels", "render"),
}


def write(path: Path) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out = {
        "process_wall_s": time.monotonic() - _started,
        "process_cpu_s": usage.ru_utime + usage.ru_stime,
        "shapes": _shapes,
        "locked": {
            k: {"calls": v[0], "wait_s": round(v[1], 3), "held_s": round(v[2], 3)} for k, v in _locked.items()
        },
    }
    if _profiles:
        stats = pstats.Stats(_profiles[0])
        for p in _profiles[1:]:
            stats.add(p)
        phases = {}
        for label, (fname, func) in PHASES.items():
            cum = sum(v[3] for (f, _, name), v in stats.stats.items() if fname in f and name == func)
            phases[label] = round(cum, 3)
        out["phases_cumulative_s"] = phases
        top = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:40]  # by own time
        out["top_own_time"] = [
            {
                "func": f"{Path(f).name}:{line}:{name}",
                "calls": v[1],
                "own_s": round(v[2], 3),
                "cum_s": round(v[3], 3),
            }
            for (f, line, name), v in top
        ]
    path.write_text(json.dumps(out, indent=1))


def _process_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    from hgemm.agent import cli, commands
    from standin_workers import DelayedStandin

    commands.open_evaluator = DelayedStandin
    from hgemm.agent import sweep_dask

    run_slots = sweep_dask.run_slots

    def timed_run_slots(*args, **kw):  # the search phase's wall, and this process's CPU seconds in it
        t, cpu = time.monotonic(), _process_cpu()
        try:
            return run_slots(*args, **kw)
        finally:
            print(f"run_slots wall {time.monotonic() - t:.3f} s cpu {_process_cpu() - cpu:.3f} s", flush=True)

    sweep_dask.run_slots = timed_run_slots
    if os.environ.get("SWEEP_PROFILE_OUT"):
        install()
    sys.argv = ["hgemm", *sys.argv[1:]]
    cli.main()


if __name__ == "__main__":
    main()
