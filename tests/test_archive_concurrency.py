"""Several writer processes at once, and a writer killed with SIGKILL mid-write: nothing committed is lost."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from hgemm.archive import Archive
from hgemm.archive.schema import MIGRATIONS

from hgemm.testing.synthetic import attempts

WORKERS = 4
PER_WORKER = 60


def _writer(path: str, seed: int, out) -> None:
    """One worker: its own connection, one record per transaction, as the evaluator's workers would."""
    try:
        ids = []
        with Archive(Path(path)) as a:
            for at in attempts(PER_WORKER, seed=seed, kernels=20):
                h = a.add_kernel(at.source, family=at.family, params=at.params, proposer=at.proposer)
                a.add_evaluation(h, at.record)
                ids.append(a.execute("SELECT id FROM records ORDER BY id DESC LIMIT 1")[0][0])
        out.put(("ok", seed, len(ids)))
    except BaseException as e:  # report, do not hang the parent
        out.put(("error", seed, repr(e)))


def test_concurrent_writer_processes_lose_nothing(tmp_path):
    path = tmp_path / "shared.db"
    Archive(path).close()  # created and migrated once; the workers race on writes only
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(path), seed, out)) for seed in range(WORKERS)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert all(r[0] == "ok" for r in results), results
    with Archive(path) as a:
        assert a.check() == "ok"
        assert a.stats()["records"] == WORKERS * PER_WORKER
        expected = {
            at.record.kernel_hash for s in range(WORKERS) for at in attempts(PER_WORKER, seed=s, kernels=20)
        }
        assert {r[0] for r in a.execute("SELECT hash FROM kernels")} == expected


def test_concurrent_first_open_migrates_once(tmp_path):
    path = tmp_path / "fresh.db"
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(str(path), 10 + s, out)) for s in range(3)]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert all(r[0] == "ok" for r in results), results
    with Archive(path) as a:
        assert [r[0] for r in a.execute("SELECT name FROM _migrations")] == [n for n, _ in MIGRATIONS]
        assert a.stats()["records"] == 3 * PER_WORKER


CHILD = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from hgemm.archive import Archive
    from hgemm.testing.synthetic import attempts

    a = Archive(Path(sys.argv[1]))
    batch = []
    for i, at in enumerate(attempts(100000, seed=7, kernels=300)):
        batch.append(at)
        if len(batch) == 50:  # 50 records per transaction: a kill usually lands inside one
            with a.writer.transaction():
                for b in batch:
                    h = a.add_kernel(b.source, family=b.family, params=b.params, proposer=b.proposer)
                    a.add_evaluation(h, b.record)
            print(a.record_count(), flush=True)
            batch = []
    """
)


def test_sigkill_mid_write_keeps_every_commit(tmp_path):
    path = tmp_path / "killed.db"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    child = subprocess.Popen(
        [sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True, env=env
    )
    committed = 0
    deadline = time.monotonic() + 60
    while committed < 400 and time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            break
        committed = int(line)
    time.sleep(0.013)  # let it get into the next transaction
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL
    assert committed >= 400, "the child did not get far enough before the deadline"
    with Archive(path) as a:
        assert a.check() == "ok"
        n = a.record_count()
        assert n >= committed  # nothing reported committed was lost
        assert n % 50 == 0  # and no transaction was half-applied
        orphans = a.execute(
            "SELECT count(*) FROM records r LEFT JOIN kernels k ON k.hash = r.kernel WHERE k.hash IS NULL"
        )
        assert orphans[0][0] == 0
        # the archive keeps working after the crash
        for at in attempts(3, seed=99, kernels=3):
            a.add_evaluation(a.add_kernel(at.source), at.record)
        assert a.record_count() == n + 3
