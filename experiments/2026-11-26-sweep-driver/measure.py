"""The same sweep on 1, 2 (and 4) CPU stand-in workers: throughput, per-shape wall, driver CPU; optionally the
driver's per-phase profile (`driver.py`).

    python measure.py --slots 1,2,4 --delay 0.5 --out results/after.json [--profile] [--embedder none]

- Shapes: `shapes-64.txt`, the 64 configurations M, N, K in {256, 512, 1024, 2048} (small and mid shapes, as in
  the GPU host's measurement).
- State: a home with the committed archive export imported and its index built (once, `--template`), copied
  fresh for every run; `--no-resume`, so every shape is searched whatever the archive holds.
- Each shape's search: the template proposer, `--budget` evaluations, confirmation as configured by default;
  every evaluate call costs the worker `--delay` seconds (sleep: the GPU's and the compiler's time).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ARCHIVE = REPO / "bench" / "results" / "archive-grid100-r10-H100-2026-11-24.jsonl.xz"
SIZES = (256, 512, 1024, 2048)


def shapes_file(path: Path) -> Path:
    """The committed shapes file (`shapes-64.txt`), written from `SIZES` if it is missing."""
    if not path.exists():
        path.write_text("".join(f"{m} {n} {k}\n" for m in SIZES for n in SIZES for k in SIZES))
    return path


def template_home(path: Path, env: dict[str, str]) -> Path:
    """The committed archive imported and its index built: the starting state of every run."""
    if (path / "ready").exists():
        return path
    shutil.rmtree(path, ignore_errors=True)
    home = path.parent / "home"  # built where the runs run: the index names the archive by its path
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    code = (
        "from hgemm.archive import Archive\n"
        "from hgemm.index import Retriever\n"
        f"a = Archive(); print(a.import_file({str(ARCHIVE)!r}))\n"
        "print(Retriever(a, gpu_sm_count=132).sync())\n"
    )
    t = time.monotonic()
    subprocess.run([sys.executable, "-c", code], env={**env, "HGEMM_HOME": str(home)}, check=True)
    print(f"template home ready in {time.monotonic() - t:.0f} s", flush=True)
    shutil.copytree(home, path)
    (path / "ready").write_text("")
    return path


def sample_cpu(pid: int, done: threading.Event, seen: dict[tuple[str, int], float]) -> None:
    """Every half second, the CPU seconds so far of the driver process (its own threads: the search threads
    before the change, the Dask scheduler and client, the commits) and of each process under it: a slot's
    search process (it holds the archive open), a Dask worker, or multiprocessing's resource tracker."""
    import psutil

    cpu: dict[int, float] = {}
    kind: dict[int, str] = {pid: "driver"}
    root = psutil.Process(pid)
    while not done.is_set():
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            break
        for p in procs:
            try:
                if p.pid not in kind or kind[p.pid] == "worker":
                    if "resource_tracker" in " ".join(p.cmdline()):
                        kind[p.pid] = "other"
                    elif any(f.path.endswith("hgemm.archive.db") for f in p.open_files()):
                        kind[p.pid] = "search"
                    else:
                        kind[p.pid] = "worker"
                times = p.cpu_times()
                cpu[p.pid] = times.user + times.system
            except psutil.Error:
                continue
        done.wait(0.5)
    seen.update({(kind[p], p): t for p, t in cpu.items()})


def run(slots: int, args: argparse.Namespace, env: dict[str, str], work: Path) -> dict:
    home = work / "home"  # one path for every run: the index built in the template stays valid
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(args.template, home)
    out = work / f"out-{slots}"
    shutil.rmtree(out, ignore_errors=True)
    prof = work / f"profile-{slots}.json"
    run_env = {**env, "HGEMM_HOME": str(home), "SWEEP_EVAL_DELAY": str(args.delay)}
    if args.profile:
        run_env["SWEEP_PROFILE_OUT"] = str(prof)
    gpus = ",".join(str(i) for i in range(slots))
    cmd = [
        sys.executable,
        str(HERE / "driver.py"),
        "sweep",
        "--grid",
        str(args.shapes),
        "--gpus",
        gpus,
        "--budget-evals",
        str(args.budget),
        "--no-resume",
        "--out",
        str(out),
        "--name",
        "sweep",
    ]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    load_before = os.getloadavg()[0]  # another user's work on this host shows here
    t = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    split: dict[tuple[str, int], float] = {}
    done = threading.Event()
    with open(work / f"log-{slots}.txt", "w+") as log:
        proc = subprocess.Popen(cmd, env=run_env, stdout=log, stderr=subprocess.STDOUT, text=True, cwd=work)
        sampler = threading.Thread(target=sample_cpu, args=(proc.pid, done, split))
        if args.split:
            sampler.start()
        proc.wait()
        done.set()
        if args.split:
            sampler.join()
        log.seek(0)
        stdout = log.read()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.monotonic() - t
    # CPU seconds of the driver and every process it waited for (slot processes, Dask workers)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{slots} slots: exit {proc.returncode}\n{stdout[-3000:]}")
    timed = next(line for line in stdout.splitlines() if line.startswith("run_slots wall "))
    search_s = float(timed.split()[2])
    search_driver_cpu = float(timed.split()[5])
    rows = json.loads((out / "sweep.json").read_text())["rows"]
    per_worker: dict[str, list[float]] = {}
    for r in rows:
        per_worker.setdefault(r.get("worker", "?"), []).append(r.get("wall_seconds") or 0.0)
    busy = sum(sum(v) for v in per_worker.values()) / slots  # a slot's summed per-shape wall, on average
    waits = [r["worker_seconds"] for r in rows if r.get("worker_seconds") is not None]
    result = {
        "slots": slots,
        "shapes": len(rows),
        "statuses": sorted({r["status"] for r in rows}),
        "search_wall_s": search_s,
        "load_1min_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "command_wall_s": round(wall, 1),
        "command_cpu_s": round(cpu, 1),
        "search_driver_cpu_s": round(search_driver_cpu, 1),
        "cpu_s_by_process": {
            kind: round(sum(v for (k, _), v in split.items() if k == kind), 1)
            for kind in ("driver", "search", "worker", "other")
        },
        "shapes_per_s": round(len(rows) / search_s, 3),
        "steady_shapes_per_s": round(len(rows) / busy, 3),
        "mean_shape_wall_s": round(sum(sum(v) for v in per_worker.values()) / len(rows), 3),
        "mean_worker_wait_s": round(sum(waits) / len(waits), 3) if waits else None,
        "per_worker": {
            w: {"shapes": len(v), "summed_wall_s": round(sum(v), 1)} for w, v in sorted(per_worker.items())
        },
        "geomean_offline": json.loads((out / "sweep.json").read_text())
        .get("summary", {})
        .get("offline", {})
        .get("geomean_speedup_best"),
    }
    if args.profile and prof.exists():
        result["profile"] = json.loads(prof.read_text())
    return result


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--slots", default="1,2")
    p.add_argument("--delay", type=float, default=0.5, help="worker seconds per evaluate call")
    p.add_argument("--budget", type=int, default=8)
    p.add_argument("--limit", type=int, default=0, help="only the first N shapes (quick checks)")
    p.add_argument(
        "--embedder", default="minilm", help="HGEMM_EMBEDDER for the driver (none: shape-only index)"
    )
    p.add_argument("--profile", action="store_true")
    p.add_argument("--split", action="store_true", help="sample each process's CPU (costs some CPU itself)")
    p.add_argument("--work", type=Path, default=HERE / "work", help="scratch folder (homes, logs, reports)")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HGEMM_EMBEDDER": args.embedder, "PYTHONPATH": str(HERE)}
    args.shapes = shapes_file(HERE / "shapes-64.txt")
    args.template = template_home(args.work / f"template-{args.embedder}", env)
    results = {
        "delay_s": args.delay,
        "budget": args.budget,
        "embedder": args.embedder,
        "cpus": os.cpu_count(),
        "profiled": args.profile,
        "runs": [],
    }
    for slots in [int(s) for s in args.slots.split(",")]:
        r = run(slots, args, env, args.work)
        results["runs"].append(r)
        base = results["runs"][0]
        r["throughput_vs_first"] = round(r["shapes_per_s"] / base["shapes_per_s"], 2)
        r["steady_vs_first"] = round(r["steady_shapes_per_s"] / base["steady_shapes_per_s"], 2)
        print(json.dumps({k: v for k, v in r.items() if k != "profile"}), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
