"""The first code inside a sandbox: read-only mounts, resource limits, a seccomp filter, then the command.

    python -m hgemm.evaluator.jail --profile P --workdir DIR [--no-mounts] [--no-seccomp] -- ARGV...

- Mounts (inside the mount namespace `unshare` made): the private folder becomes a mount of its own, then
  every other mount is remounted read-only, except /proc, /sys and /dev (device nodes; /dev/shm is made
  read-only too).
- In a new PID namespace this process stays init (PID 1) and runs the command in a child, so the command
  gets signals and faults as any process does; its exit is passed on (a signal as 128 + its number).
- Limits come from `PROFILES`; core dumps are off. This module imports nothing but the standard library: it is
  the first thing every sandboxed process loads.
- The `runner` profile installs the seccomp filter last and runs a Python module in this same process
  (`ARGV` = `-m module args...`), since the filter forbids starting a new program; other profiles exec.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import os
import resource
import runpy
import sys
from typing import NamedTuple

MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18
KEEP_WRITABLE = ("/proc", "/sys", "/dev")


class Limits(NamedTuple):
    cpu_s: int | None
    address_bytes: int | None
    file_bytes: int
    open_files: int


PROFILES = {
    # nvcc and what it runs: a compile bomb meets the time limit first, or the address-space limit
    "compile": Limits(cpu_s=300, address_bytes=16 << 30, file_bytes=512 << 20, open_files=1024),
    # one candidate's process: no address-space limit (the CUDA driver reserves terabytes of addresses)
    "runner": Limits(cpu_s=3600, address_bytes=None, file_bytes=256 << 20, open_files=4096),
}


def _mount(source: str | None, target: str, flags: int) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    rc = libc.mount(source.encode() if source else None, target.encode(), None, flags, None)
    return 0 if rc == 0 else ctypes.get_errno()


def _mount_points() -> list[str]:
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            points.append(point)
    return points


def read_only_except(workdir: str) -> None:
    """Every mount read-only but the private folder (and the kernel's own /proc, /sys, /dev)."""
    _mount(None, "/", MS_REC | MS_PRIVATE)
    code = _mount(workdir, workdir, MS_BIND)
    if code:
        raise OSError(code, f"cannot bind the private folder: {os.strerror(code)}")
    for point in sorted(set(_mount_points()), key=len, reverse=True):
        if point == workdir:
            continue
        inside_kernel = any(point == k or point.startswith(k + "/") for k in KEEP_WRITABLE)
        if inside_kernel and point != "/dev/shm":
            continue
        code = _mount(None, point, MS_REMOUNT | MS_BIND | MS_RDONLY)
        if code and code not in (errno.EINVAL, errno.ENOENT, errno.EACCES):
            raise OSError(code, f"cannot make {point} read-only: {os.strerror(code)}")


def set_limits(profile: str) -> None:
    lim = PROFILES[profile]
    pairs = [(resource.RLIMIT_FSIZE, lim.file_bytes), (resource.RLIMIT_NOFILE, lim.open_files),
             (resource.RLIMIT_CORE, 0)]
    if lim.cpu_s is not None:
        pairs.append((resource.RLIMIT_CPU, lim.cpu_s))
    if lim.address_bytes is not None:
        pairs.append((resource.RLIMIT_AS, lim.address_bytes))
    for which, value in pairs:
        _soft, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))


def runner_filter():
    """Allow everything a CUDA process needs; refuse new programs and processes, network sockets,
    tracing, mounts, namespaces, and kernel interfaces a kernel launcher never uses."""
    import socket

    import pyseccomp as sc

    f = sc.SyscallFilter(sc.ALLOW)
    deny = sc.ERRNO(errno.EPERM)
    for name in ("execve", "execveat", "fork", "vfork", "ptrace", "process_vm_readv", "process_vm_writev",
                 "mount", "umount2", "pivot_root", "chroot", "setns", "unshare", "bpf", "perf_event_open",
                 "keyctl", "add_key", "request_key", "userfaultfd", "kexec_load", "init_module",
                 "finit_module", "delete_module", "io_uring_setup", "personality"):
        f.add_rule(deny, name)
    f.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, 0x00010000, 0))  # a clone that is not a thread
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")  # glibc then creates threads with clone
    f.add_rule(deny, "socket", sc.Arg(0, sc.NE, socket.AF_UNIX))
    return f


def _init_and_wait() -> None:
    """As PID 1 (which the kernel shields from most signals), fork: the child returns and runs the command;
    this process waits for it and exits as it did (a signal as 128 + its number, as shells report it)."""
    child = os.fork()
    if child == 0:
        return
    while True:
        pid, status = os.waitpid(-1, 0)
        if pid == child:
            os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    split = args.index("--")
    parser = argparse.ArgumentParser(prog="hgemm.evaluator.jail")
    parser.add_argument("--profile", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--no-mounts", action="store_true")
    parser.add_argument("--no-seccomp", action="store_true")
    opts = parser.parse_args(args[:split])
    command = args[split + 1 :]
    workdir = os.path.realpath(opts.workdir)
    if os.getpid() == 1:  # a new PID namespace: stay as its init, run the command in a child
        _init_and_wait()
    if not opts.no_mounts:
        read_only_except(workdir)
    os.chdir(workdir)
    set_limits(opts.profile)
    if opts.profile == "runner":
        if command[:1] != ["-m"]:
            raise SystemExit("the runner profile runs a Python module: -m MODULE ARGS...")
        if not opts.no_seccomp:
            runner_filter().load()
        sys.argv = [command[1], *command[2:]]
        runpy.run_module(command[1], run_name="__main__", alter_sys=True)
        return 0
    os.execvp(command[0], command)
    return 127


if __name__ == "__main__":
    sys.exit(main())
