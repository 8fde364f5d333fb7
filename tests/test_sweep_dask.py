"""Distributed sweeps: `hgemm sweep --gpus` on a real Dask cluster of CPU worker processes standing in for
GPUs (the stand-in evaluator), driven as a real process: pinning, scheduling, a worker killed mid-shape and
retried, a shape that kills its worker every time marked failed, SIGKILL of the driver and a resume that
loses nothing, Ctrl-C, and the shape-file errors."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from hgemm.core.shape import Shape

HELPER = Path(__file__).with_name("sweep_helpers.py")


def driver(args: list[str], home: Path, cwd: Path, **env: str) -> subprocess.Popen:
    """`hgemm sweep ...` as its own process, with the stand-in evaluator on its Dask workers."""
    full_env = {**os.environ, "HGEMM_HOME": str(home), "HGEMM_EMBEDDER": "none", **env}
    return subprocess.Popen([sys.executable, str(HELPER), "sweep", *args], cwd=cwd, env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip


def finish(proc: subprocess.Popen, timeout: float = 240) -> str:
    out, _ = proc.communicate(timeout=timeout)
    return out


def report(path: Path) -> dict:
    return json.loads(path.read_text())


def shapes_of(rows: list[dict]) -> list[tuple[int, int, int]]:
    return [(r["M"], r["N"], r["K"]) for r in rows]


def write_grid(path: Path, shapes: list[tuple[int, int, int]]) -> Path:
    path.write_text("".join(f"{M} {N} {K}\n" for M, N, K in shapes))
    return path


SIX = [(64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512), (128, 256, 512), (256, 128, 1024)]


@pytest.mark.slow
def test_workers_are_pinned_one_per_device_and_share_the_sweep(tmp_path):
    grid = write_grid(tmp_path / "g.txt", SIX)
    proc = driver(["--grid", str(grid), "--gpus", "0,1,2", "--budget-evals", "6", "--out", "out"], tmp_path / "home",
                  tmp_path, HGEMM_TEST_EVAL_DELAY="0.05")  # fmt: skip
    out = finish(proc)
    assert proc.returncode == 0, out
    for g in "012":
        assert f"gpu{g} (CUDA_VISIBLE_DEVICES={g}, pid" in out  # each worker sees its own device only
    data = report(tmp_path / "out" / "g.json")
    assert sorted(shapes_of(data["rows"])) == sorted(SIX)
    assert all(r["status"] == "optimized" for r in data["rows"])
    assert len({r["worker"] for r in data["rows"]}) >= 2  # the work was spread over the workers
    meta = data["meta"]  # what the figures were measured on, and when
    assert (
        meta["gpu"] == "NVIDIA H100 80GB HBM3 (stand-in)" and meta["driver"] == "0.0" and meta["workers"] == 3
    )
    assert meta["date"] and meta["budget_evals"] == 6
    # where the run's time went, for the scaling report: the workers' start, then the search phase
    assert 0 < meta["workers_up_seconds"] and 0 < meta["search_seconds"] < meta["run_wall_seconds"]
    assert re.search(rf"searched 6 shapes in {meta['search_seconds']:.0f} s on 3 worker\(s\)", out)
    assert "driver: 0.0" in (tmp_path / "out" / "g.md").read_text()
    assert (tmp_path / "out" / "g.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_a_worker_killed_mid_shape_is_replaced_and_the_shape_retried_once(tmp_path, monkeypatch):
    grid = write_grid(
        tmp_path / "g.txt", [(128, 128, 128), (256, 256, 256), (512, 512, 512), (128, 256, 512)]
    )
    kills = tmp_path / "kills"
    kills.mkdir()
    proc = driver(["--grid", str(grid), "--gpus", "0,1", "--budget-evals", "6", "--out", "out"], tmp_path / "home",
                  tmp_path, HGEMM_TEST_KILL_ONCE="256x256x256", HGEMM_TEST_KILL_AFTER="1",
                  HGEMM_TEST_KILL_ALWAYS="512x512x512", HGEMM_TEST_KILL_DIR=str(kills))  # fmt: skip
    out = finish(proc)
    assert proc.returncode == 0, out  # the sweep went on
    killed_pid = int((kills / "killed-256x256x256").read_text())
    rows = {(r["M"], r["N"], r["K"]): r for r in report(tmp_path / "out" / "g.json")["rows"]}
    assert rows[(256, 256, 256)]["status"] == "optimized"  # retried on a fresh worker, and found a kernel
    assert "256x256x256: WorkerLost" in out and "retrying" in out
    dead = rows[(512, 512, 512)]
    assert dead["status"] == "failed" and "died" in dead["error"]  # twice: marked failed with the reason
    assert out.count("512x512x512: WorkerLost") == 2 and "marked failed" in out
    assert rows[(128, 128, 128)]["status"] == rows[(128, 256, 512)]["status"] == "optimized"
    assert "Failures" in (tmp_path / "out" / "g.md").read_text()
    with pytest.raises(ProcessLookupError):  # the killed worker process is gone
        os.kill(killed_pid, 0)
    # the kill came mid-shape, after its first evaluation: that search is archived as ended in error, with what
    # it had measured, and the retry is a second run of the shape
    monkeypatch.setenv("HGEMM_HOME", str(tmp_path / "home"))
    from hgemm.archive import Archive

    with Archive() as archive:
        runs = archive.execute(
            "SELECT id, status FROM runs WHERE json_extract(config, '$.M') = 256 AND json_extract(config, '$.K') = 256 "
            "ORDER BY id"
        )
        assert [r["status"] for r in runs] == ["error", "done"]
        first = archive.execute("SELECT count(*) AS n FROM records WHERE run_id = ?", (runs[0]["id"],))[0][
            "n"
        ]
        assert first >= 1


def _reads_archive(p: psutil.Process) -> bool:
    try:
        return any(f.path.endswith("hgemm.archive.db") for f in p.open_files())
    except psutil.Error:
        return False


def _archive_state() -> tuple[int, set[str]]:
    """Records in the archive of $HGEMM_HOME: their count and fingerprints."""
    from hgemm.archive import Archive

    with Archive() as archive:
        rows = archive.execute("SELECT fingerprint FROM records")
        return len(rows), {r["fingerprint"] for r in rows}


@pytest.mark.slow
def test_sigkill_of_the_driver_loses_nothing_and_the_same_command_resumes(tmp_path, monkeypatch):
    grid = write_grid(tmp_path / "g.txt", SIX)
    home = tmp_path / "home"
    monkeypatch.setenv("HGEMM_HOME", str(home))
    args = ["--grid", str(grid), "--gpus", "0,1", "--budget-evals", "8", "--out", "out"]
    proc = driver(args, home, tmp_path, HGEMM_TEST_EVAL_DELAY="0.3")
    json_path = tmp_path / "out" / "g.json"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if json_path.exists() and len(report(json_path)["rows"]) >= 2:
            break
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the sweep wrote no report with two shapes: " + finish(proc))
    searchers = [p for p in psutil.Process(proc.pid).children(recursive=True) if _reads_archive(p)]
    assert searchers  # the slots' search processes, each with the archive open for reading
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    _, alive = psutil.wait_procs(searchers, timeout=15)
    assert not alive  # no search outlives its driver
    finished_before = {(r["M"], r["N"], r["K"]): r["kernel"] for r in report(json_path)["rows"]}
    assert 2 <= len(finished_before) < len(SIX)
    count_before, kernels_before = _archive_state()
    assert count_before > 0

    again = driver(args, home, tmp_path)
    out = finish(again)
    assert again.returncode == 0, out
    assert f"resuming: {len(finished_before)} of 6 shapes already in the archive" in out
    data = report(json_path)
    assert sorted(shapes_of(data["rows"])) == sorted(SIX)
    rows = {(r["M"], r["N"], r["K"]): r for r in data["rows"]}
    for shape, kernel in finished_before.items():
        assert rows[shape]["status"] == "resumed" and rows[shape]["kernel"] == kernel  # not searched again
    assert all(rows[s]["status"] == "optimized" for s in rows if s not in finished_before)
    count_after, kernels_after = _archive_state()
    assert (
        count_after > count_before and kernels_before <= kernels_after
    )  # every committed record is still there


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_writes_the_report_and_exports_the_archive(tmp_path):
    grid = write_grid(tmp_path / "g.txt", SIX)
    exported = tmp_path / "carry.jsonl.xz"  # compressed, as a carried archive would be
    proc = driver(["--grid", str(grid), "--gpus", "0", "--budget-evals", "8", "--out", "out", "--export-archive",
                   str(exported)], tmp_path / "home", tmp_path, HGEMM_TEST_EVAL_DELAY="0.3")  # fmt: skip
    json_path = tmp_path / "out" / "g.json"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and not (json_path.exists() and report(json_path)["rows"]):
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out = finish(proc, 120)
    assert proc.returncode == 130, out
    assert "run the same command again to continue" in out and "Traceback" not in out
    assert exported.read_bytes()[:6] == b"\xfd7zXZ\x00" and "exported" in out  # whole, and compressed
    done = len(report(json_path)["rows"])
    assert 1 <= done < len(SIX)
    # the export carries the sweep to a fresh machine: the same command there resumes from it
    fresh = tmp_path / "fresh-home"
    again = driver(
        ["--grid", str(grid), "--gpus", "0", "--budget-evals", "8", "--out", "out2", "--import-archive",
         str(tmp_path / "seed-not-there.jsonl"), "--import-archive", str(exported)],
        fresh,
        tmp_path,
    )  # fmt: skip
    out2 = finish(again)
    assert again.returncode == 0, out2
    assert f"resuming: {done} of 6 shapes" in out2 and "nothing to import from it" in out2
    # the milestones say when they came, in seconds since the command started (where start-up time goes)
    stamps = [float(m) for m in re.findall(r"^(?:imported|1 worker\(s\) on|checking the archive|resuming)[^\n]*"
                                           r"\[(\d+\.\d) s\]$", out2, re.M)]  # fmt: skip
    assert len(stamps) == 4 and stamps == sorted(stamps), out2


def run_cli(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HGEMM_HOME": str(tmp_path / "home")}
    return subprocess.run([sys.executable, "-m", "hgemm.agent.cli", "sweep", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


@pytest.mark.parametrize(
    "text, message",
    [
        ("64 64 64\n128 128\n", "g.txt:2: expected 'M N K', got '128 128'"),
        ("# c\n64 64 64\n\n0 64 64\n", "g.txt:4: M must be positive"),
        ("64 64 64\n64 x 64\n", "g.txt:2: expected 'M N K'"),
        ("64 64 99999999\n", "g.txt:1: K=99999999 is larger than"),
        ("64 64 64\n64 64 64\n", "names 1 shape(s) twice"),
        ("# nothing\n", "holds no shapes"),
    ],
)
def test_bad_shape_files_are_one_line_errors_with_line_numbers(tmp_path, text, message):
    (tmp_path / "g.txt").write_text(text)
    result = run_cli(["--grid", "g.txt"], tmp_path)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["--grid", "missing.txt"], "grid file missing.txt does not exist"),
        (["--grid", "full", "--shard", "3/2"], "--shard 3/2: need 0 <= I < N"),
        (["--grid", "full", "--shard", "x"], "--shard is I/N"),
        (["--grid", "full", "--gpus", "0,a"], "--gpus is 'all' or device numbers"),
        (["--grid", "full", "--gpus", "0,0"], "a device is named twice"),
        (["--grid", "full", "--gpus", "0", "--scheduler", "tcp://127.0.0.1:1"], "not both"),
        (["--grid", "full", "--objective", "fast"], "objective"),
        (["--grid", "full", "--measured-after", "yesterday"], "--measured-after 'yesterday': not a date"),
        (["--grid", "full", "--measured-after", "2999-01-01"], "--measured-after '2999-01-01' is after now"),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path, args, message):
    result = run_cli(args, tmp_path)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr


def test_full_grid_is_the_1000_configurations():
    from hgemm.agent.sweep_grid import FULL_SIZES, full_grid, resolve_grid

    shapes, name = resolve_grid("full")
    assert name == "full" and shapes == full_grid()
    assert len(shapes) == 1000 and len(set(shapes)) == 1000
    assert {s.M for s in shapes} == {s.N for s in shapes} == {s.K for s in shapes} == set(FULL_SIZES)
    assert FULL_SIZES == (64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288, 16384)


def test_shards_partition_the_grid():
    from hgemm.agent.sweep_grid import full_grid, parse_shard, shard

    parts = [shard(full_grid(), parse_shard(f"{i}/3")) for i in range(3)]
    assert sorted(s for p in parts for s in p) == sorted(full_grid())
    assert [len(p) for p in parts] == [334, 333, 333]
    assert shard(full_grid(), parse_shard(None)) == full_grid()


def test_schedule_puts_neighbours_after_their_neighbours_and_long_work_first_in_a_wave():
    from hgemm.agent.sweep_grid import distance, expected_cost, full_grid, schedule, steps

    grid = full_grid()
    rank = steps(grid)
    done = [Shape(1024, 1024, 1024)]
    pending = [s for s in grid if s not in done]
    order = schedule(pending, done)
    assert sorted(order) == sorted(pending)
    waves = [min(distance(s, d, rank) for d in done) for s in order]
    assert waves == sorted(waves)  # nearer the archived shapes first
    assert waves[0] == 1 and set(order[:6]) == {  # the six neighbours of 1024³ come first
        Shape(512, 1024, 1024), Shape(2048, 1024, 1024), Shape(1024, 512, 1024), Shape(1024, 2048, 1024),
        Shape(1024, 1024, 512), Shape(1024, 1024, 2048)}  # fmt: skip
    # within each wave, the longest expected searches first
    for w in set(waves):
        costs = [expected_cost(s) for s, ws in zip(order, waves, strict=True) if ws == w]
        assert costs == sorted(costs, reverse=True)
    # every shape has a neighbour (one grid step away, 8192 -> 12288 included) done or scheduled before it
    seen = set(done)
    for s in order:
        assert any(distance(s, t, rank) == 1 for t in seen), s
        seen.add(s)
    # with nothing done, the sweep starts from the smallest shape
    assert schedule(pending[:50])[0] == Shape(64, 64, 64)


def test_pinned_cluster_gives_each_worker_its_own_device_and_restarts_a_dead_one():
    from distributed import Client
    from hgemm.agent.sweep_dask import WorkerPool, pinned_cluster

    with pinned_cluster(["3", "5"]) as cluster, Client(cluster) as client:
        pool = WorkerPool(client)
        assert pool.slots() == ["gpu3", "gpu5"]
        pins = client.run(lambda: os.environ["CUDA_VISIBLE_DEVICES"])
        names = pool.workers()
        assert {pins[names["gpu3"]], pins[names["gpu5"]]} == {"3", "5"} and pins[names["gpu3"]] == "3"
        old = names["gpu5"]
        pid = client.run(os.getpid, workers=[old])[old]
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            now = pool.workers()
            if now.get("gpu5") not in (None, old):
                break
            time.sleep(0.2)
        new = pool.address("gpu5")
        assert (
            new != old and client.run(lambda: os.environ["CUDA_VISIBLE_DEVICES"], workers=[new])[new] == "5"
        )


def _answer(token, factory, value, sleep_s):
    time.sleep(sleep_s)
    return value


def test_a_call_returns_its_answer_and_a_hung_worker_is_ended_and_replaced():
    from distributed import Client
    from hgemm.agent.sweep_dask import WorkerLost, WorkerPool, pinned_cluster

    with pinned_cluster(["0"]) as cluster, Client(cluster) as client:
        pool = WorkerPool(client, eval_timeout=3.0)
        assert [pool.call("gpu0", _answer, n, 0.2) for n in range(3)] == [0, 1, 2]
        old = pool.workers()["gpu0"]
        started = time.monotonic()
        with pytest.raises(WorkerLost, match="hung: no answer in 3 s"):
            pool.call("gpu0", _answer, "late", 60.0)
        assert time.monotonic() - started < 20
        assert pool.call("gpu0", _answer, "again", 0.0) == "again"  # on the worker that replaced it
        assert pool.workers()["gpu0"] != old


def test_sweep_reads_hgemm_toml(tmp_path, monkeypatch):
    from hgemm.agent.sweep_cli import settings_from

    monkeypatch.chdir(tmp_path)
    assert settings_from(None).budget_evals == 64  # no file: the sweep's defaults
    (tmp_path / "hgemm.toml").write_text(
        "[budget]\nevals = 12\nminutes = 3\n\n[search]\nseed = 7\nconfirm = 1\n"
    )
    st = settings_from(None)
    assert (st.budget_evals, st.budget_minutes, st.seed, st.confirm) == (12, 3.0, 7, 1)
    st = settings_from(None, budget_evals=5, seed=None)
    assert st.budget_evals == 5 and st.seed == 7  # an option given overrides the file
    (tmp_path / "hgemm.toml").write_text("[budget]\nevalz = 12\n")
    from hgemm.core.errors import BadInput

    with pytest.raises(BadInput, match="evalz"):
        settings_from(None)


@pytest.mark.slow
def test_the_slurm_recipe_job_script_runs_a_worker_that_a_sweep_uses(tmp_path):
    """As far as a host without Slurm goes: the job script dask-jobqueue writes for the recipe (#SBATCH lines
    are comments to bash) starts a worker that joins the recipe's scheduler, and `hgemm sweep --scheduler`
    sweeps on it."""
    from hgemm.agent.sweep_slurm import slurm_cluster

    cluster = slurm_cluster(
        0, partition="gpu", account="proj", walltime="01:00:00", directives=("--constraint=h100",)
    )
    worker = None
    try:
        script = cluster.job_script()
        for line in ("#SBATCH -p gpu", "#SBATCH -A proj", "#SBATCH --gres=gpu:1", "#SBATCH --constraint=h100",
                     "#SBATCH -t 01:00:00", "export DASK_DISTRIBUTED__WORKER__DAEMON=False"):  # fmt: skip
            assert line in script
        assert "--nthreads 1" in script and cluster.scheduler_address in script
        (tmp_path / "job.sh").write_text(script.replace("dummy-name", "slurm-job-1"))
        env = {**os.environ, "PYTHONPATH": str(HELPER.parent), "HGEMM_HOME": str(tmp_path / "home")}
        worker = subprocess.Popen(["bash", str(tmp_path / "job.sh")], env=env, cwd=tmp_path,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
        grid = write_grid(tmp_path / "g.txt", [(128, 128, 128), (256, 512, 256)])
        proc = driver(["--grid", str(grid), "--scheduler", cluster.scheduler_address, "--budget-evals", "6", "--out",
                       "out"], tmp_path / "home", tmp_path)  # fmt: skip
        out = finish(proc)
        assert proc.returncode == 0, out
        assert "1 worker(s) on NVIDIA H100 80GB HBM3 (stand-in): slurm-job-1" in out
        rows = report(tmp_path / "out" / "g.json")["rows"]
        assert [r["status"] for r in rows] == ["optimized", "optimized"]
        assert {r["worker"] for r in rows} == {"slurm-job-1"}
    finally:
        if worker is not None:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait(timeout=30)
        cluster.close()


@pytest.mark.slow
def test_limit_and_shard_slice_the_grid_and_the_next_run_continues(tmp_path):
    grid = write_grid(tmp_path / "g.txt", SIX)
    args = ["--grid", str(grid), "--gpus", "0", "--budget-evals", "5", "--out", "out", "--shard", "0/2"]
    first = driver([*args, "--limit", "2"], tmp_path / "home", tmp_path)
    out = finish(first)
    assert first.returncode == 0, out
    rows = report(tmp_path / "out" / "g.json")["rows"]
    assert shapes_of(rows) == [SIX[0], SIX[2]]  # every other shape (shard 0/2), two of them (--limit 2)
    second = driver([*args, "--limit", "2"], tmp_path / "home", tmp_path)
    out = finish(second)
    assert second.returncode == 0, out
    assert "resuming: 2 of 3 shapes already in the archive; 1 to search" in out
    rows = report(tmp_path / "out" / "g.json")["rows"]
    assert shapes_of(rows) == [SIX[0], SIX[2], SIX[4]]  # the shard's shapes, in grid order
    assert [r["status"] for r in rows] == ["resumed", "resumed", "optimized"]


def test_measured_after_searches_again_what_was_measured_before_it(tmp_path):
    """After a fix to the evaluator: shapes whose figures are older than --measured-after are searched again
    through the Dask workers, and the next run with the same time resumes them."""
    from datetime import UTC, datetime

    grid = write_grid(tmp_path / "g.txt", SIX[:2])
    args = ["--grid", str(grid), "--gpus", "0", "--budget-evals", "4", "--out", "out"]
    first = driver(args, tmp_path / "home", tmp_path)
    out = finish(first)
    assert first.returncode == 0, out
    time.sleep(1.1)  # records keep their time to the second
    fix = datetime.now(UTC).isoformat(timespec="seconds")
    time.sleep(1.1)
    again = driver([*args, "--measured-after", fix], tmp_path / "home", tmp_path)
    out = finish(again)
    assert again.returncode == 0, out
    data = report(tmp_path / "out" / "g.json")
    assert [r["status"] for r in data["rows"]] == ["optimized", "optimized"]
    assert data["meta"]["measured_after"] == fix
    third = driver([*args, "--measured-after", fix], tmp_path / "home", tmp_path)
    out = finish(third)
    assert third.returncode == 0, out
    assert [r["status"] for r in report(tmp_path / "out" / "g.json")["rows"]] == ["resumed", "resumed"]


@pytest.mark.gpu
@pytest.mark.slow
def test_a_sweep_on_gpu_0_through_dask_uses_the_real_evaluator(tmp_path):
    """The GPU path end to end: one Dask worker pinned to a GPU (the first that CUDA_VISIBLE_DEVICES shows, else
    device 0) opens the real evaluator (its judge process included), and the driver archives what it measures."""
    device = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip()
    grid = write_grid(tmp_path / "g.txt", [(256, 256, 256), (512, 256, 1024)])
    env = {**os.environ, "HGEMM_HOME": str(tmp_path / "home"), "HGEMM_EMBEDDER": "none"}
    args = ["--grid", str(grid), "--gpus", device, "--budget-evals", "4", "--confirm", "0", "--out", "out"]
    result = subprocess.run([sys.executable, "-m", "hgemm.agent.cli", "sweep", *args], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=1200)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"gpu{device} (CUDA_VISIBLE_DEVICES={device}" in result.stdout
    data = report(tmp_path / "out" / "g.json")
    assert "stand-in" not in data["meta"]["gpu"] and data["meta"]["driver"]
    assert [r["status"] for r in data["rows"]] == ["optimized", "optimized"]
    assert all(r["offline_speedup_best"] > 0 for r in data["rows"])
