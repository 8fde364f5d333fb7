"""The judge's buffers for one shape: a single device allocation shared with runners.

- Regions: `A` (a ring of `slots` input matrices, M×K each, contiguous), `B` (K×N), `Bt` (N×K), `C0`…
  (one M×N output per slot), `W` (the contract's workspace), `early` (C as it stood when the stream's
  event completed), `stage` (inputs a predecessor kernel writes), and the witness arrays `wy`, `wy2`,
  `wbad` (row sums of every timed output).
- Every input, output and the workspace sits between random guard bands; regions come in a random order
  with random gaps, so a candidate cannot predict where anything but its own arguments lies.
- The judge reads and writes regions through torch views; runners see the same bytes through `share`: a file
  descriptor of memory made with the CUDA virtual memory API (`evaluator/shared_memory.py` says why), sent to
  each runner over its socket, or, on a device that cannot export one, a legacy IPC handle.
"""

from __future__ import annotations

import random
import sys

import torch
from hgemm.evaluator import shared_memory
from hgemm.evaluator.cudart import CudaError, Runtime

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


def band_index(starts: torch.Tensor, width: int) -> torch.Tensor:
    """The byte offsets of bands of `width` bytes starting at `starts`, band after band."""
    return (starts[:, None] + torch.arange(width, device=starts.device)).reshape(-1)


def first_changed(data: torch.Tensor, index: torch.Tensor, saved: torch.Tensor, width: int) -> int | None:
    """The number of the first band whose bytes (`data[index]`, band after band) differ from `saved`, or
    None when none does."""
    same = (data[index] == saved).view(-1, width).all(dim=1)
    if bool(same.all()):
        return None
    return int((~same).nonzero()[0, 0])


def _exportable(nbytes: int, device: int) -> shared_memory.Mapping | None:
    """Memory a runner can map from a file descriptor, or None (said on stderr, the judge's log) where the
    device or driver cannot make it."""
    why = "the device cannot export memory as a file descriptor"
    if shared_memory.supported(device):
        try:
            return shared_memory.allocate(nbytes, device)
        except CudaError as e:
            why = str(e)
    print(f"arena: {why}; runners map it through a legacy IPC handle, which slows their reads on some shapes",
          file=sys.stderr, flush=True)
    return None


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
        self.mapping = _exportable(offset, rt.device())
        if self.mapping is not None:
            self.base = self.mapping.ptr
            self.share = {"kind": "fd", "size": self.mapping.size}
        else:
            self.base = rt.malloc(offset)
            self.share = {"kind": "ipc", "handle": rt.ipc_handle(self.base)}
        gen = torch.Generator(device="cuda").manual_seed(rng.getrandbits(62))
        for _name, off, n in self.guards:
            self._bytes(off, n).random_(0, 256, generator=gen)
        starts = torch.tensor([off for _name, off, _n in self.guards], dtype=torch.int64, device="cuda")
        self._guard_index = band_index(starts, GUARD)
        self._all = self._bytes(0, self.nbytes)
        self._guard_bits = self._all[self._guard_index]

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
        """The region whose guard band changed first, or None when every guard band is intact (all bands
        compared at once: one synchronisation, not one per band)."""
        i = first_changed(self._all, self._guard_index, self._guard_bits, GUARD)
        return None if i is None else self.guards[i][0]

    @property
    def fd(self) -> int | None:
        """The descriptor a runner maps the arena by, or None where the arena is shared by IPC handle."""
        return self.mapping.fd if self.mapping else None

    def close(self) -> None:
        if self.base:
            torch.cuda.synchronize()
            if self.mapping:
                self.mapping.close()
                self.mapping = None
            else:
                self.rt.free(self.base)
            self.base = 0
