"""A judge session for `sandbox_ab.py`: the product's judge, with its runners started in less of the sandbox,
as the environment variable HGEMM_EXPERIMENT_JAIL says (read when the judge process starts). For measurement
only; the product never runs candidates like this.

- sandbox: unchanged.
- no-namespaces: no network, PID or mount namespace (so nothing remounted); seccomp filter and limits kept.
- no-namespaces-no-seccomp: limits only.
- no-pid: network and mount namespaces (read-only remounts), no PID namespace and no fresh /proc.
- no-net: PID and mount namespaces, no network namespace.
- no-readonly: every namespace, nothing remounted read-only inside the mount namespace.
- shm-host: the full sandbox, but the host's /dev/shm stays writable (`jail_shm.py`).
- shm-private: the full sandbox, with a fresh private tmpfs on /dev/shm (`jail_shm.py`).
"""

from __future__ import annotations

import os
import sys

from hgemm.evaluator import sandbox
from hgemm.evaluator.judge import Judge

VARIANTS = ("sandbox", "no-namespaces", "no-namespaces-no-seccomp", "no-pid", "no-net", "no-readonly", "shm-host",
            "shm-private")
HERE = os.path.dirname(os.path.abspath(__file__))


def _command(variant: str):
    def command(argv: list[str], profile: str, workdir) -> list[str]:
        prefix = sandbox._unshare_prefix()
        flags: list[str] = []
        if variant in ("no-namespaces", "no-namespaces-no-seccomp"):
            prefix, flags = [], ["--no-mounts"]
            if variant == "no-namespaces-no-seccomp":
                flags.append("--no-seccomp")
        elif variant == "no-pid":
            prefix = [p for p in prefix if p not in ("--pid", "--fork", "--mount-proc")]
        elif variant == "no-net":
            prefix = [p for p in prefix if p != "--net"]
        elif variant == "no-readonly":
            flags = ["--no-mounts"]  # inside the mount namespace: nothing of the host is touched
        jail = [sys.executable, "-P", "-m", "hgemm.evaluator.jail", "--profile", profile, "--workdir", str(workdir),
                *flags]  # fmt: skip
        if variant.startswith("shm-"):
            path = os.pathsep.join(p for p in (HERE, os.environ.get("PYTHONPATH", "")) if p)
            jail = ["env", f"PYTHONPATH={path}", sys.executable, "-P", "-m", "jail_shm", "--shm", variant[4:],
                    "--profile", profile, "--workdir", str(workdir)]  # fmt: skip
        return [*prefix, "--", *jail, "--", *argv] if prefix else [*jail, "--", *argv]

    return command


class VariantJudge(Judge):
    def __init__(self) -> None:
        super().__init__()
        variant = os.environ.get("HGEMM_EXPERIMENT_JAIL", "sandbox")
        if variant not in VARIANTS:
            raise ValueError(f"unknown jail variant {variant!r}")
        if variant != "sandbox":
            sandbox.command = _command(variant)


class OursInJudge(VariantJudge):
    """Also times the library HGEMM_EXPERIMENT_LIB as if it were a baseline: in the judge's process, on the
    judge's own buffers, sampled exactly as the baselines are ("ours_in_judge" among the baselines' figures)."""

    def prepare(self, *args, **kwargs) -> dict:
        import ctypes

        import torch

        out = super().prepare(*args, **kwargs)
        lib_path = os.environ.get("HGEMM_EXPERIMENT_LIB")
        if not lib_path or self.baselines is None:
            return out
        lib = ctypes.CDLL(lib_path)
        vp, ci = ctypes.c_void_p, ctypes.c_int
        lib.hgemm_run.restype = ci
        lib.hgemm_run.argtypes = [vp, vp, vp, vp, ci, ci, ci, vp, ctypes.c_size_t, vp]
        p = self.problem

        def call(i: int) -> None:
            rc = lib.hgemm_run(p.a_ring[i].data_ptr(), p.b.data_ptr(), p.bt.data_ptr(), p.c[i].data_ptr(), p.M, p.N,
                               p.K, p.w.data_ptr(), p.w.numel(), p.stream.cuda_stream)  # fmt: skip
            if rc:
                raise RuntimeError(f"hgemm_run returned {rc}")

        call(0)  # eager first: its one-time queries happen outside any capture
        torch.cuda.synchronize()
        try:  # captured as the baselines' graphs will capture it; if that fails, the evaluation goes on without it
            from hgemm.evaluator.timing import capture

            capture(lambda: [call(i) for i in range(p.slots)], 1, p.stream)
        except Exception as e:  # noqa: BLE001 - an experiment's extra contender must not break the judge
            print(f"ours_in_judge left out: {e}", file=sys.stderr, flush=True)
            return out
        self.baselines.calls["ours_in_judge"] = call
        self.baselines._graphs.clear()
        self._experiment_lib = lib
        return out
