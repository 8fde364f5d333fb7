"""Errors a user can cause or fix. The CLI prints them as one line and exits with code 2."""

from __future__ import annotations

MAX_DIM = 65536  # the grid's largest size is 16384; allow headroom, refuse the absurd
MAX_ELEMENTS = 1 << 31  # per operand: keeps int32 indexing in kernels valid


class HgemmError(Exception):
    """A clear, one-line problem with the input or the machine."""


class BadInput(HgemmError):
    pass


class NoGpu(HgemmError):
    pass


class NoCompiler(HgemmError):
    pass


def validate_shape(M: int, N: int, K: int) -> tuple[int, int, int]:
    for name, v in (("M", M), ("N", N), ("K", K)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise BadInput(f"{name} must be an integer, got {v!r}")
        if v <= 0:
            raise BadInput(f"{name} must be positive, got {v}")
        if v > MAX_DIM:
            raise BadInput(f"{name}={v} is larger than {MAX_DIM}")
    for name, count in (("A (M*K)", M * K), ("B (K*N)", K * N), ("C (M*N)", M * N)):
        if count >= MAX_ELEMENTS:
            raise BadInput(f"{name} has {count} elements; at most {MAX_ELEMENTS - 1} are supported")
    return M, N, K
