"""Sweep workers on a Slurm cluster, through dask-jobqueue (`pip install dask-jobqueue`).

`python -m hgemm.agent.sweep_slurm --jobs 8 --partition gpu` starts a Dask scheduler on this host, submits
8 Slurm jobs of one GPU each (`--gres=gpu:1`: Slurm sets the job's `CUDA_VISIBLE_DEVICES`), each running one
single-threaded, non-daemon worker (what `agent.sweep_dask` expects), prints the scheduler's address for
`hgemm sweep --scheduler ADDRESS`, and keeps the cluster until Ctrl-C. `--dry-run` prints the job script and
submits nothing.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import typer

from hgemm.core.errors import BadInput


def slurm_cluster(
    jobs: int,
    *,
    partition: str,
    walltime: str = "04:00:00",
    account: str | None = None,
    cpus: int = 8,
    memory: str = "64GB",
    python: str | None = None,
    directives: tuple[str, ...] = (),
) -> Any:
    """A dask-jobqueue `SLURMCluster` of one-GPU jobs, one single-threaded worker each, scaled to `jobs`."""
    import dask
    from hgemm.agent.sweep_dask import WORKER_CONFIG, quiet

    try:
        from dask_jobqueue import SLURMCluster
    except ImportError:
        raise BadInput("Slurm sweeps need dask-jobqueue: pip install dask-jobqueue") from None
    quiet()
    dask.config.set(WORKER_CONFIG)
    cluster = SLURMCluster(
        queue=partition,
        account=account,
        cores=1,  # one thread per worker: the evaluator owns the GPU
        processes=1,
        job_cpu=cpus,  # the job's CPUs: nvcc compiles in parallel
        memory=memory,
        walltime=walltime,
        python=python or sys.executable,
        job_extra_directives=["--gres=gpu:1", *directives],
        job_script_prologue=[
            "export DASK_DISTRIBUTED__WORKER__DAEMON=False",  # the evaluator starts its own processes
        ],
        name="hgemm-sweep",
    )
    if jobs:
        cluster.scale(jobs=jobs)
    return cluster


def main(
    jobs: int = typer.Option(..., "--jobs", min=1, help="Slurm jobs to submit, one GPU and one worker each"),
    partition: str = typer.Option(..., "--partition", help="Slurm partition (queue) with GPUs"),
    walltime: str = typer.Option("04:00:00", "--walltime", help="each job's time limit"),
    account: str = typer.Option(None, "--account", help="Slurm account to charge"),
    cpus: int = typer.Option(8, "--cpus", min=1, help="CPUs per job (nvcc compiles in parallel)"),
    memory: str = typer.Option("64GB", "--memory", help="memory per job"),
    directive: list[str] = typer.Option([], "--directive", help="an extra #SBATCH directive (repeatable)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the job script, submit nothing"),
) -> None:
    """Start sweep workers as Slurm jobs and print the scheduler address for `hgemm sweep --scheduler`."""
    cluster = slurm_cluster(
        0 if dry_run else jobs,
        partition=partition,
        walltime=walltime,
        account=account,
        cpus=cpus,
        memory=memory,
        directives=tuple(directive),
    )
    try:
        if dry_run:
            typer.echo(cluster.job_script())
            return
        typer.echo(f"scheduler: {cluster.scheduler_address}")
        typer.echo(
            f"run: hgemm sweep --grid full --scheduler {cluster.scheduler_address} ...  (Ctrl-C here ends the jobs)"
        )
        while True:
            time.sleep(60)
    except KeyboardInterrupt:
        pass
    finally:
        cluster.close()


if __name__ == "__main__":
    from hgemm.core.errors import HgemmError

    try:
        typer.run(main)
    except HgemmError as e:
        print(f"hgemm: {e}", file=sys.stderr)
        sys.exit(2)
