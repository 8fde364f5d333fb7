"""Slot processes: a sweep's searches run in processes of their own on the driver's host, the driver commits every
write they send, a search process that dies fails only its shape, and the sweep's stop reaches them."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from hgemm.core.shape import Shape

pytestmark = pytest.mark.slow


@pytest.fixture
def slots(tmp_path, monkeypatch):
    """Slot processes over a one-worker cluster of the (slow) stand-in evaluator, and the driver's archive."""
    monkeypatch.setenv("HGEMM_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HGEMM_EMBEDDER", "none")
    monkeypatch.setenv("HGEMM_TEST_EVAL_DELAY", "0.3")  # the workers read it when they evaluate
    from distributed import Client
    from hgemm.agent.sweep import SearchSettings
    from hgemm.agent.sweep_dask import Locked, WorkerPool, pinned_cluster
    from hgemm.agent.sweep_slots import SlotProcesses, stop_event
    from hgemm.archive import Archive
    from hgemm.index import Retriever
    from standin import STANDIN_GPU
    from sweep_helpers import SlowStandin

    with pinned_cluster(["0"]) as cluster, Client(cluster) as client, Archive() as archive:
        pool = WorkerPool(client, SlowStandin, stop=stop_event())
        retriever = Retriever(archive, gpu_sm_count=STANDIN_GPU.sm_count)
        retriever.sync()
        procs = SlotProcesses(pool, Locked(archive, threading.RLock()), settings=SearchSettings(budget_evals=4),
                              gpu=STANDIN_GPU.name, sm_count=STANDIN_GPU.sm_count, archive_path=archive.path,
                              index_dir=retriever.store.dir)  # fmt: skip
        try:
            yield procs, archive, pool
        finally:
            procs.close()


def _records(archive, shape: Shape) -> int:
    rows = archive.execute("SELECT count(*) AS n FROM records WHERE M = ? AND N = ? AND K = ?", tuple(shape))
    return rows[0]["n"]


def test_a_slot_searches_in_its_own_process_and_the_driver_commits_what_it_finds(slots):
    procs, archive, _ = slots
    row = procs.search("gpu0", Shape(128, 128, 128), None)
    child = procs.slots["gpu0"].proc
    assert child.pid != os.getpid() and child.is_alive()  # it searched there, and stays for the next shape
    assert row["status"] == "optimized" and row["kernel"] and row["worker_seconds"] > 0
    assert _records(archive, Shape(128, 128, 128)) >= 4  # committed by the driver: the child reads only
    (run,) = archive.execute("SELECT status FROM runs WHERE command = 'sweep'")
    assert run["status"] == "done"
    row = procs.search("gpu0", Shape(256, 128, 128), None)
    assert row["status"] == "optimized" and procs.slots["gpu0"].proc.pid == child.pid


def test_a_search_process_that_dies_fails_its_shape_only_and_the_next_search_starts_another(slots):
    from hgemm.agent.sweep_slots import SearchFailed

    procs, archive, _ = slots
    procs.search("gpu0", Shape(64, 64, 64), None)  # the process is up
    first = procs.slots["gpu0"].proc.pid
    shape = Shape(256, 256, 256)
    deadline = time.monotonic() + 60

    def kill_after_the_first_commit() -> None:
        while _records(archive, shape) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(first, signal.SIGKILL)

    killer = threading.Thread(target=kill_after_the_first_commit)
    killer.start()
    with pytest.raises(SearchFailed) as failed:
        procs.search("gpu0", shape, None)
    killer.join()
    assert "SearchProcessDied" in failed.value.reason and "exit code -9" in failed.value.reason
    assert _records(archive, shape) >= 1  # what was committed stays
    row = procs.search("gpu0", shape, None)  # the retry, in a fresh process
    assert row["status"] == "optimized" and procs.slots["gpu0"].proc.pid != first


def test_the_sweeps_stop_ends_a_search_at_its_next_evaluation(slots):
    procs, archive, pool = slots
    procs.search("gpu0", Shape(64, 64, 64), None)  # the process is up
    shape = Shape(512, 512, 512)
    threading.Timer(1.0, pool.stop.set).start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        procs.search("gpu0", shape, None)
    assert time.monotonic() - started < 30
    (run,) = archive.execute(
        "SELECT status FROM runs WHERE json_extract(config, '$.M') = 512 AND command = 'sweep'"
    )
    assert run["status"] == "interrupted"  # the child ended its run through the driver


def test_a_prestarted_process_searches_for_the_first_slot_and_one_no_slot_takes_ends_at_close(slots):
    from pathlib import Path

    from hgemm.agent.sweep_slots import SlotProcesses, prestart

    procs, archive, pool = slots
    spares = prestart(2, pool.stop)  # started before the slots are known, as `hgemm sweep --gpus` does
    started = {proc.pid for proc, _ in spares}
    mine = SlotProcesses(pool, procs.archive, settings=procs.base["settings"], gpu=procs.base["gpu"],
                         sm_count=procs.base["sm_count"], archive_path=archive.path,
                         index_dir=Path(procs.base["index"]), spares=spares)  # fmt: skip
    try:
        row = mine.search("gpu0", Shape(128, 128, 128), None)
        searcher = mine.slots["gpu0"].proc
        assert row["status"] == "optimized" and searcher.pid in started
        ((unused, _),) = mine.spares
        assert unused.pid in started - {searcher.pid} and unused.is_alive()
    finally:
        mine.close()
    assert not mine.spares and not unused.is_alive() and not searcher.is_alive()
