"""What a runner's start costs when several start at once, on one GPU and spread over all of them.

    python ctx_probe.py OUT_DIR [rounds]

The 4-GPU sweep (README) spent 0.73 s per runner booting and 0.67 s creating its context, against 0.27 and 0.23 s
with one GPU. Which part grows with the number of runners starting together: CUDA in the driver, or the sandbox
(namespaces, read-only remounts, seccomp) in the kernel?

Per variant, P runners start together (P = 1, 4, 8), all on GPU 0 and, where there are several GPUs, one per GPU
in turn (`CUDA_VISIBLE_DEVICES`); each gets `init` at once, as a spare does:

- `bare`: a plain `python -c` child that loads libcudart, calls cuInit (`Runtime.preloaded`) and creates the
  context (`cudaFree(0)`): CUDA alone;
- `runner`: `RunnerProcess()` as the judge starts one (namespaces, jail, seccomp, runner boot, init);
- `runner-nons`: the same with the sandbox's namespaces off (`sandbox.report` patched; the jail still sets limits
  and seccomp);
- `runner-conn1`: `runner` with `CUDA_DEVICE_MAX_CONNECTIONS=1` (fewer hardware queues per context).

Per runner: boot (spawn to booted), context (`init` to ready), exit (`quit` to reaped). Medians per (variant,
placement, P) are printed and written to ctx-probe.json with every sample."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from hgemm.evaluator import sandbox
from hgemm.evaluator.runner_client import RunnerFailed, RunnerProcess, wait_exit

CHILD = r"""
import json, time
from hgemm.evaluator.cudart import Runtime
rt = Runtime.preloaded()
t1 = time.monotonic()
rt.init()
t2 = time.monotonic()
print(json.dumps({"booted": t1, "ctx_s": t2 - t1, "ready": t2}), flush=True)
"""


def gpus() -> list[str]:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                             text=True).stdout.split()
    except OSError:
        out = []
    return out or ["0"]


def bare(devices: list[str]) -> list[dict]:
    started = []
    for dev in devices:
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": dev}
        started.append((time.monotonic(), subprocess.Popen([sys.executable, "-c", CHILD], env=env,
                                                           stdout=subprocess.PIPE, text=True)))
    rows = []
    for spawned, proc in started:
        d = json.loads(proc.stdout.readline())
        proc.wait()
        rows.append({"boot_s": d["booted"] - spawned, "ctx_s": d["ctx_s"], "exit_s": time.monotonic() - d["ready"]})
    return rows


def runners(devices: list[str], extra: dict[str, str]) -> list[dict]:
    procs = [RunnerProcess(env_extra={**extra, "CUDA_VISIBLE_DEVICES": dev}) for dev in devices]
    try:
        for rp in procs:
            rp.init()
        rows = []
        for rp in procs:
            rp.wait_ready()
            rows.append({"boot_s": rp.phases.get("runner_boot"), "ctx_s": rp.phases.get("runner_cuda"),
                         "ready_s": time.monotonic() - rp.spawned})
        for rp in procs:
            rp.requests.write(json.dumps({"op": "quit"}) + "\n")
            rp.requests.flush()
        asked = time.monotonic()
        for rp, row in zip(procs, rows):
            wait_exit(rp.proc, 30.0)
            row["exit_s"] = time.monotonic() - asked
        return rows
    finally:
        for rp in procs:  # none outlives its round, also when one failed
            rp.kill()


def no_namespaces() -> sandbox.Report:
    real = REAL_REPORT()
    return sandbox.Report(False, real.seccomp, real.missing)


REAL_REPORT = sandbox.report


def main() -> None:
    out, rounds = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 5
    out.mkdir(parents=True, exist_ok=True)
    all_gpus = gpus()
    print(f"sandbox: {REAL_REPORT().describe()}; GPUs: {len(all_gpus)}", flush=True)
    variants = {
        "bare": lambda devs: bare(devs),
        "runner": lambda devs: runners(devs, {}),
        "runner-nons": lambda devs: runners(devs, {}),
        "runner-conn1": lambda devs: runners(devs, {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}),
    }
    placements = {"one GPU": lambda p: [all_gpus[0]] * p}
    if len(all_gpus) > 1:
        placements["spread"] = lambda p: [all_gpus[i % len(all_gpus)] for i in range(p)]
    results = []
    for name, fn in variants.items():
        sandbox.report = no_namespaces if name == "runner-nons" else REAL_REPORT
        for where, devs in placements.items():
            for p in (1, 4, 8):
                try:
                    fn(devs(p))  # a warm-up round, not counted
                    samples = [row for _ in range(rounds) for row in fn(devs(p))]
                except (RunnerFailed, OSError, ValueError) as e:  # reported; the other cases go on
                    print(f"{name:13s} {where:8s} P={p}: failed ({type(e).__name__}: {e})", flush=True)
                    results.append({"variant": name, "placement": where, "runners": p, "error": str(e)})
                    (out / "ctx-probe.json").write_text(json.dumps({"gpus": all_gpus, "rounds": rounds,
                                                                    "results": results}, indent=1))  # fmt: skip
                    continue
                med = {k: round(statistics.median(s[k] for s in samples if s.get(k) is not None), 4)
                       for k in ("boot_s", "ctx_s", "exit_s")}
                results.append({"variant": name, "placement": where, "runners": p, **med, "samples": samples})
                print(f"{name:13s} {where:8s} P={p}: boot {med['boot_s']:.3f}  context {med['ctx_s']:.3f}  "
                      f"exit {med['exit_s']:.3f}", flush=True)
                (out / "ctx-probe.json").write_text(json.dumps({"gpus": all_gpus, "rounds": rounds,
                                                                "results": results}, indent=1))  # fmt: skip
    sandbox.report = REAL_REPORT


if __name__ == "__main__":
    main()
