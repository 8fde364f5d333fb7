"""The judge's buffers for one shape: a single device allocation shared with runners through CUDA IPC.

- Regions: `A` (a ring of `slots` input matrices, M×K each, contiguous), `B` (K×N), `Bt` (N×K), `C0`…
  (one M×N output per slot), `W` (the contract's workspace), `early` (C as it stood when the stream's
  event completed), `stage` (inputs a predecessor kernel writes), and the witness arrays `wy`, `wy2`,
  `wbad` (row sums of every timed output).
- Every input, output and the workspace sits between random guard bands; regions come in a random order
  with random gaps, so a candidate cannot predict where anything but its own arguments lies.
- The judge reads and writes regions through torch views; runners see the same bytes through the handle.
"""

from __future__ import annotations

import random

import torch
from hgemm.evaluator.cudart import Runtime

GUARD = 8192  # bytes of random bits on each side of a guarded region
ALIGN = 4096
WORKSPACE_BYTES = 64 << 20


class _Interface:
    """A raw device range as a CUDA array (what torch.as_tensor consumes without copying)."""

    def __init__(self, ptr: int, shape: tuple[int, ...], typestr: str):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (ptr, False), "version": 3,
                                         "strides": None}


_TYPESTR = {torch.float16: "<f2", torch.float64: "<f8", torch.int64: "<i8", torch.uint8: "|u1", torch.int16: "<i2"}


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


class Arena:
    def __init__(self, rt: Runtime, regions: list[tuple[str, int, bool]], seed: int):
        rng = random.Random(seed)
        order = regions[:]
        rng.shuffle(order)
        self.layout: dict[str, tuple[int, int]] = {}
        self.guards: list[tuple[str, int, int]] = []
        offset = 0
        for name, nbytes, guarded in order:
            offset += rng.randrange(16) * ALIGN
            if guarded:
                self.guards.append((name, offset, GUARD))
                offset += GUARD
            self.layout[name] = (offset, nbytes)
            offset += nbytes
            if guarded:
                self.guards.append((name, offset, GUARD))  # right at the end: a one-element overrun lands in it
                offset += GUARD
            offset = _align(offset)
        self.rt = rt
        self.nbytes = offset
        self.base = rt.malloc(offset)
        self.handle = rt.ipc_handle(self.base)
        self._guard_bits = []
        gen = torch.Generator(device="cuda").manual_seed(rng.getrandbits(62))
        for _name, off, n in self.guards:
            bits = self._bytes(off, n)
            bits.random_(0, 256, generator=gen)
            self._guard_bits.append(bits.clone())

    def _bytes(self, offset: int, n: int) -> torch.Tensor:
        return torch.as_tensor(_Interface(self.base + offset, (n,), "|u1"), device="cuda")

    def view(self, name: str, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
        offset, nbytes = self.layout[name]
        count = 1
        for d in shape:
            count *= d
        if count * torch.empty((), dtype=dtype).element_size() > nbytes:
            raise ValueError(f"{name}: view {shape} is larger than the region")
        return torch.as_tensor(_Interface(self.base + offset, shape, _TYPESTR[dtype]), device="cuda")

    def ptr(self, name: str) -> int:
        return self.base + self.layout[name][0]

    def broken_guard(self) -> str | None:
        """The region whose guard band changed first, or None when every guard band is intact."""
        for (name, off, n), bits in zip(self.guards, self._guard_bits):
            if not torch.equal(self._bytes(off, n), bits):
                return name
        return None

    def close(self) -> None:
        if self.base:
            torch.cuda.synchronize()
            self.rt.free(self.base)
            self.base = 0
