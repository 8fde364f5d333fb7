"""The product's jail (`hgemm.evaluator.jail`) with /dev/shm left writable after the read-only remounts: either the
host's own (`--shm host`), or a fresh private tmpfs mounted over it (`--shm private`). For `jails.py` only.

    python -m jail_shm --shm host|private JAIL-ARGS...
"""

from __future__ import annotations

import ctypes
import sys

from hgemm.evaluator import jail

MS_NOSUID, MS_NODEV = 2, 4


def _with_shm(how: str):
    original = jail.read_only_except

    def read_only_except(workdir: str) -> None:
        original(workdir)
        if how == "host":
            code = jail._mount(None, "/dev/shm", jail.MS_REMOUNT | jail.MS_BIND)
        else:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
            rc = libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, b"size=64m,mode=1777")
            code = 0 if rc == 0 else ctypes.get_errno()
        if code:
            raise OSError(code, f"cannot make /dev/shm writable ({how})")

    return read_only_except


if __name__ == "__main__":
    args = sys.argv[1:]
    how = args[args.index("--shm") + 1]
    del args[args.index("--shm") : args.index("--shm") + 2]
    jail.read_only_except = _with_shm(how)
    sys.exit(jail.main(args))
