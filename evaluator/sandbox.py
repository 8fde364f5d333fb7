"""Where candidate work runs: every nvcc compile and every runner process starts in a sandbox.

- Namespaces through util-linux `unshare`: a network namespace with no interface up (no network), a PID
  namespace (nothing outside can be signalled or traced), and a mount namespace in which every
  filesystem is read-only except the process's private folder (`evaluator/jail.py` sets it up, then
  runs the command). A user namespace is added where the caller is not root.
- Runners also get a seccomp filter (libseccomp through the `pyseccomp` binding): no new programs, no
  processes other than threads, no sockets but local ones, no tracing, mounting or kernel interfaces.
- Resource limits on CPU time, file size, open files, and (compiles only: CUDA reserves huge address
  ranges) address space.
- The environment is an allow-list; HOME and TMPDIR point into the private folder, which is removed when
  the process ends, also when it is killed.
- A host without working namespaces or seccomp still gets the environment, the private folder and the
  limits; `report()` says what it lacks and the evaluator warns once.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from hgemm.evaluator.jail import PROFILES

from hgemm.core.paths import state_dir

PASSED_ENV = ("PATH", "PYTHONPATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES",
              "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "LANG", "LC_ALL",
              "HGEMM_HOME")


@dataclass(frozen=True)
class Report:
    namespaces: bool
    seccomp: bool
    missing: tuple[str, ...]

    def describe(self) -> str:
        if not self.missing:
            return "namespaces (network, PID, read-only mounts) and seccomp"
        return "limited: " + "; ".join(self.missing)


def _unshare_prefix() -> list[str]:
    prefix = ["unshare", "--net", "--pid", "--fork", "--mount", "--propagation", "private", "--mount-proc"]
    if os.geteuid() != 0:
        prefix += ["--user", "--map-root-user"]
    return prefix


@functools.lru_cache(maxsize=1)
def report() -> Report:
    """What this host's sandbox provides (probed once per process)."""
    missing = []
    namespaces = False
    if shutil.which("unshare") is None:
        missing.append("no `unshare` (util-linux): no network, PID or mount namespaces")
    else:
        try:
            done = subprocess.run([*_unshare_prefix(), "--", "true"], capture_output=True, timeout=30)
            namespaces = done.returncode == 0
            if not namespaces:
                why = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["refused"]
                missing.append(f"namespaces refused ({why[0][:120]})")
        except (OSError, subprocess.TimeoutExpired) as e:
            missing.append(f"namespaces unavailable ({e})")
    try:
        import pyseccomp  # noqa: F401

        pyseccomp.SyscallFilter(pyseccomp.ALLOW)
        seccomp = True
    except Exception as e:  # the binding loads libseccomp.so.2 with ctypes
        seccomp = False
        missing.append(f"no seccomp ({type(e).__name__}: {str(e)[:100]})")
    if missing:
        warnings.warn("hgemm sandbox is " + Report(namespaces, seccomp, tuple(missing)).describe(), stacklevel=2)
    return Report(namespaces, seccomp, tuple(missing))


def environment(workdir: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The allow-listed environment, with HOME and TMPDIR in the private folder."""
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    env.update(HOME=str(workdir), TMPDIR=str(workdir), PYTHONDONTWRITEBYTECODE="1")
    env.update(extra or {})
    return env


def private_folder(prefix: str) -> Path:
    """A fresh folder under the state root for one sandboxed process."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=state_dir("sandbox")))


def command(argv: list[str], profile: str, workdir: Path) -> list[str]:
    """The command line that runs `argv` in the sandbox (`argv` may start with `-m module` for Python)."""
    rep = report()
    jail = [sys.executable, "-P", "-m", "hgemm.evaluator.jail", "--profile", profile, "--workdir", str(workdir)]
    if not rep.namespaces:
        jail.append("--no-mounts")
    if not rep.seccomp:
        jail.append("--no-seccomp")
    return [*(_unshare_prefix() + ["--"] if rep.namespaces else []), *jail, "--", *argv]


def popen(argv: list[str], profile: str, workdir: Path, env_extra: dict[str, str] | None = None,
          **kwargs) -> subprocess.Popen:
    """Start `argv` in the sandbox, in its own session (kill its process group to stop all of it)."""
    if profile not in PROFILES:
        raise ValueError(f"unknown sandbox profile {profile!r}")
    return subprocess.Popen(command(argv, profile, workdir), env=environment(workdir, env_extra), cwd=workdir,
                            start_new_session=True, **kwargs)


def run(argv: list[str], profile: str, workdir: Path, timeout_s: float,
        env_extra: dict[str, str] | None = None, with_stderr: bool = True) -> tuple[int | None, str]:
    """Run to completion: (exit code, or None when killed at `timeout_s`; stdout, and stderr unless
    `with_stderr` is False)."""
    import signal

    errors_to = subprocess.STDOUT if with_stderr else subprocess.DEVNULL
    proc = popen(argv, profile, workdir, env_extra, stdout=subprocess.PIPE, stderr=errors_to, text=True,
                 errors="replace")
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = proc.communicate()
        return None, out or ""
