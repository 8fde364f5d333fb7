"""A worker session for supervision tests: it hangs, aborts, dies politely or answers, on request."""

from __future__ import annotations

import os
import signal
import time

from hgemm.evaluator.worker import Dead


class ProbeSession:
    def ping(self, value: int) -> int:
        return value + 1

    def hang(self) -> None:
        time.sleep(3600)

    def abort(self) -> None:
        os.kill(os.getpid(), signal.SIGABRT)

    def segfault(self) -> None:
        import ctypes

        ctypes.string_at(0)

    def broken_context(self) -> None:
        raise Dead("CUDA context broken: an illegal memory access was encountered")

    def fail(self) -> None:
        raise ValueError("a bug in the session")

    def cuda_error(self) -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    def close(self) -> None:
        with open(os.path.join(os.environ["HGEMM_HOME"], "closed"), "w") as f:
            f.write("closed")
