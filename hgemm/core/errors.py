"""Errors a user can cause or fix. The CLI prints them as one line and exits with code 2."""

from __future__ import annotations


class HgemmError(Exception):
    """A clear, one-line problem with the input or the machine."""


class BadInput(HgemmError):
    """A value the user gave is out of range or malformed."""


class NoGpu(HgemmError):
    """The step needs a CUDA GPU and none is visible."""


class NoCompiler(HgemmError):
    """nvcc (or the host compiler it needs) is missing."""
