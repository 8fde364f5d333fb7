"""On a GPU: the judge's arena is memory a runner maps from a file descriptor (the CUDA virtual memory API), and
both processes see each other's writes through it."""

from __future__ import annotations

import multiprocessing as mp
import socket

import pytest

pytestmark = pytest.mark.gpu


def _child(sock: socket.socket, size: int, q) -> None:
    import ctypes

    from hgemm.evaluator import shared_memory
    from hgemm.evaluator.cudart import MEMCPY_DEVICE_TO_HOST, MEMCPY_HOST_TO_DEVICE, Runtime

    rt = Runtime()
    rt.init()
    _msg, fds, _flags, _addr = socket.recv_fds(sock, 16, 1)
    mapping = shared_memory.import_fd(fds[0], size, rt.device())
    seen = (ctypes.c_ubyte * 4)()
    rt.memcpy_async(ctypes.addressof(seen), mapping.ptr, 4, MEMCPY_DEVICE_TO_HOST, 0)
    rt.device_sync()
    mine = (ctypes.c_ubyte * 4)(9, 8, 7, 6)
    rt.memcpy_async(mapping.ptr + size - 4, ctypes.addressof(mine), 4, MEMCPY_HOST_TO_DEVICE, 0)
    rt.device_sync()
    mapping.close()
    q.put(list(seen))


def _skip_without_support() -> int:
    import torch
    from hgemm.evaluator import shared_memory

    torch.cuda.init()
    device = torch.cuda.current_device()
    if not shared_memory.supported(device):
        pytest.skip("this device cannot export memory as a file descriptor (the arena uses a legacy IPC handle)")
    return device


def test_memory_shared_by_descriptor_is_seen_from_both_sides():
    import torch
    from hgemm.evaluator import shared_memory
    from hgemm.evaluator.arena import _Interface

    device = _skip_without_support()
    mapping = shared_memory.allocate(3 << 20, device)
    assert mapping.size % shared_memory.granularity(device) == 0 and mapping.size >= 3 << 20
    view = torch.as_tensor(_Interface(mapping.ptr, (mapping.size,), "|u1"), device="cuda")
    view[:4] = torch.tensor([1, 2, 3, 4], dtype=torch.uint8)
    torch.cuda.synchronize()
    mine, theirs = socket.socketpair()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(theirs, mapping.size, q))
    p.start()
    socket.send_fds(mine, [b"fd"], [mapping.fd])
    assert q.get(timeout=120) == [1, 2, 3, 4]
    p.join(60)
    assert p.exitcode == 0
    assert view[-4:].tolist() == [9, 8, 7, 6]
    del view
    mapping.close()


def test_the_arena_is_shared_by_descriptor_where_the_device_allows(tmp_path):
    from hgemm.evaluator.arena import Arena
    from hgemm.evaluator.cudart import Runtime

    _skip_without_support()
    arena = Arena(Runtime(), [("A", 1 << 20, True), ("C", 1 << 20, True)], seed=1)
    try:
        assert arena.share["kind"] == "fd" and arena.fd is not None and arena.fd >= 0
        assert arena.share["size"] >= arena.nbytes
        assert arena.broken_guard() is None
    finally:
        arena.close()
    assert arena.fd is None
