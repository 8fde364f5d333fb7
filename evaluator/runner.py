"""One candidate's process: it loads the candidate library, calls it on buffers the judge owns, and times it.

    python -I -m hgemm.evaluator.runner --requests FD --replies FD

- A runner serves exactly one candidate, then exits; a fresh one is started for the next.
- It decides nothing: it reports return codes, what `hgemm_supports` said, and raw event times. Every
  check of the candidate's output is made by the judge, in another process, on memory the judge owns.
- It imports neither torch nor the judge; requests and replies are JSON lines on their own pipes (the
  candidate's output on stdout or stderr cannot reach them). The judge's arena comes at `open` as a file
  descriptor over a Unix socket (`--handles`), mapped and closed, with the socket, before the candidate loads.
- It boots (sandbox, interpreter, imports, the CUDA libraries loaded) without touching the GPU, then waits
  for `init` before it creates its CUDA context: the judge sends that only while nothing is timed.
- The inputs of every timed sample come from a seed (`refresh`), so the judge can regenerate them, and
  after every timed sample `witnesses` reduces each output against a vector drawn from that seed.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import random
import socket
import struct
import sys
import time

from hgemm.evaluator import shared_memory, timing
from hgemm.evaluator.cudart import CudaError, Runtime

WORKSPACE_BYTES = 64 << 20
EARLY_WRITER_CYCLES = 200_000  # how long the predecessor of a dependent-launch check spins (about 0.1 ms)
_c = ctypes


def derive(seed: int, *tags: int) -> int:
    """A 63-bit seed derived from `seed` and `tags` (the judge and the runner derive the same ones)."""
    data = struct.pack(f"<{1 + len(tags)}Q", seed & (2**64 - 1), *(t & (2**64 - 1) for t in tags))
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little") >> 1


class Shim:
    """The evaluator's own kernels (evaluator/shims/runner.cu), loaded from a trusted build."""

    def __init__(self, path: str):
        lib = _c.CDLL(path, mode=_c.RTLD_LOCAL)
        vp, sz, u64, f32, i32, i64 = _c.c_void_p, _c.c_size_t, _c.c_ulonglong, _c.c_float, _c.c_int, _c.c_longlong
        signatures = {
            "hg_fill": [vp, sz, u64, f32, vp],
            "hg_fill_transposed": [vp, i32, i32, u64, f32, vp],
            "hg_fill_bits": [vp, sz, u64, vp],
            "hg_poison": [vp, sz, vp],
            "hg_vector": [vp, i32, u64, vp],
            "hg_witness": [vp, i32, i32, u64, vp, vp, vp, vp],
            "hg_gen_matvec": [i32, i32, u64, f32, vp, vp, vp],
            "hg_spin": [i64, vp],
            "hg_early_writer": [vp, vp, sz, i64, vp, u64, vp],
        }
        for name, args in signatures.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = _c.c_int, args
            setattr(self, name[3:], self._checked(name, fn))
        self.lib = lib

    @staticmethod
    def _checked(name, fn):
        def call(*args):
            code = fn(*args)
            if code:
                raise CudaError(name, code, "launch failed")

        return call


class Buffers:
    """Pointers into the judge's arena, by region name: A (the ring of input slots), B, Bt, C0..C{n-1},
    W, early, stage, wy, wy2, wbad."""

    def __init__(self, base: int, layout: dict[str, list[int]]):
        self.ptr = {name: base + off for name, (off, _n) in layout.items()}
        self.size = {name: n for name, (_off, n) in layout.items()}

    def __getitem__(self, name: str) -> int:
        return self.ptr[name]


def refresh(shim: Shim, buf: Buffers, M: int, K: int, slots: int, seed: int, stream: int) -> None:
    """New values in every A slot for sample `seed` (B and Bt keep the values the judge gave them)."""
    shim.fill(buf["A"], slots * M * K, derive(seed, 1), 1.0, stream)


def witnesses(rt: Runtime, shim: Shim, buf: Buffers, M: int, N: int, slots: int, sample: int, seed: int,
              stream: int) -> None:
    """Row sums of C0..C{slots-1} against the vector of `seed`, into witness row blocks sample * slots + slot
    (their counts of unwritten or non-finite elements start from zero, cleared by one memset)."""
    first = sample * slots
    rt.memset_async(buf["wbad"] + 8 * first, 0, 8 * slots, stream)
    x_seed = derive(seed, 3)
    for slot in range(slots):
        index = first + slot
        rows = index * M
        shim.witness(buf[f"C{slot}"], M, N, x_seed, buf["wy"] + 8 * rows, buf["wy2"] + 8 * rows,
                     buf["wbad"] + 8 * index, stream)


class StreamDevice:
    """A timing.Device on one stream of this process's runtime. `replays` enqueue a contender's graph;
    `on_refresh` and `on_after` enqueue the evaluator's own work between samples."""

    def __init__(self, rt: Runtime, stream: int, shim: Shim, replays: dict, flush_ptr: int, flush_bytes: int,
                 on_refresh=None, on_after=None):
        self.rt, self.stream, self.shim, self.replays = rt, stream, shim, replays
        self.flush_ptr, self.flush_bytes = flush_ptr, flush_bytes
        self.on_refresh, self.on_after = on_refresh, on_after
        self.events: list[int] = []
        self._flushes = 0

    def event(self) -> int:
        e = self.rt.event_create()
        self.events.append(e)
        return e

    def record(self, event: int) -> None:
        self.rt.event_record(event, self.stream)

    def done(self, event: int) -> bool:
        return self.rt.event_done(event)

    def elapsed_us(self, start: int, end: int) -> float:
        return self.rt.elapsed_ms(start, end) * 1000.0

    def wait(self, event: int) -> None:
        self.rt.event_sync(event)

    def sync(self) -> None:
        self.rt.stream_sync(self.stream)

    def spin(self, cycles: int) -> None:
        self.shim.spin(cycles, self.stream)

    def reset_l2(self) -> None:
        # With the GPU idle (server_samples syncs first): lines the last contender marked evict_last, which the
        # flush's writes alone would leave in the L2, go back to normal priority. The device-wide sync keeps
        # whatever the reset does on the GPU out of the next timed window (it added about 1 us there when it
        # ran inside the flush, behind the head-start spin; experiments/2026-11-28-shapes-real-worst).
        self.rt.reset_persisting_l2()
        self.rt.device_sync()

    def flush(self) -> None:
        self._flushes += 1
        self.rt.memset_async(self.flush_ptr, self._flushes & 0xFF, self.flush_bytes, self.stream)

    def replay(self, name: str) -> None:
        self.replays[name]()

    def refresh(self, seed: int) -> None:
        if self.on_refresh:
            self.on_refresh(seed)

    def after(self, name: str, sample: int, seed: int) -> None:
        if self.on_after:
            self.on_after(name, sample, seed)

    def close(self) -> None:
        for e in self.events:
            self.rt.event_destroy(e)
        self.events.clear()


class Session:
    """What a runner holds: the runtime, the judge's buffers, the shim, and the one candidate."""

    def __init__(self, rt: Runtime, handles: socket.socket | None = None) -> None:
        self.rt = rt
        self.rt.init()
        self.handles = handles  # the judge's socket for file descriptors, until the arena is mapped
        self.mapping: shared_memory.Mapping | None = None
        self.lib = None
        self.graphs: dict[str, tuple[int, int]] = {}  # name -> (graph exec, launches)

    def _map_arena(self, share: dict) -> int:
        """The arena's base address here: mapped from the descriptor the judge sent (then closed), or opened
        through a legacy IPC handle. Either way the socket is closed before the candidate loads."""
        handles, self.handles = self.handles, None
        if share.get("kind") != "fd":
            if handles is not None:
                handles.close()
            return self.rt.ipc_open(str(share["handle"]))
        if handles is None:
            raise RuntimeError("the arena's descriptor was sent once already")
        with handles:
            handles.settimeout(60.0)
            _msg, fds, _flags, _addr = socket.recv_fds(handles, 16, 4)
        try:
            if len(fds) != 1:
                raise RuntimeError(f"expected one descriptor for the arena, got {len(fds)}")
            self.mapping = shared_memory.import_fd(fds[0], int(share["size"]), self.rt.device())
        finally:
            for fd in fds:
                os.close(fd)
        return self.mapping.ptr

    def open(self, arena: dict, layout: dict, shim: str, lib: str, M: int, N: int, K: int, l2_bytes: int,
             slots: int) -> dict:
        """M, N and K come as JSON ints from the judge, which validated them as a Shape; they stay ints here
        (a runner imports nothing of hgemm.core). `arena` says how the judge shares its buffers."""
        self.M, self.N, self.K, self.slots = int(M), int(N), int(K), int(slots)
        self.base = self._map_arena(arena)
        self.buf = Buffers(self.base, layout)
        self.stream = self.rt.stream_create()
        self.shim = Shim(shim)
        self.flush_bytes = max(2 * int(l2_bytes), 64 << 20)
        self.flush_ptr = self.rt.malloc(self.flush_bytes)
        # The early writer's gate: a flag in host memory the writer polls and this thread sets, so the gate needs
        # no second stream (a runner has one hardware connection: RUNNER_CONNECTIONS in runner_client.py).
        self.go_host, self.go = self.rt.host_alloc_mapped(64)
        try:
            self.lib = _c.CDLL(lib, mode=_c.RTLD_LOCAL)
            run = self.lib.hgemm_run
        except (OSError, AttributeError) as e:
            return {"load_error": str(e)[:300]}
        vp, ci = _c.c_void_p, _c.c_int
        run.restype, run.argtypes = ci, [vp, vp, vp, vp, ci, ci, ci, vp, _c.c_size_t, vp]
        self.run = run
        supports = getattr(self.lib, "hgemm_supports", None)
        if supports is None:
            return {"supports": True}
        supports.restype, supports.argtypes = ci, [ci, ci, ci]
        return {"supports": bool(supports(self.M, self.N, self.K))}

    def _call(self, slot: int) -> int:
        b, M, N, K = self.buf, self.M, self.N, self.K
        a = b["A"] + 2 * slot * M * K
        return int(self.run(a, b["B"], b["Bt"], b[f"C{slot}"], M, N, K, b["W"], WORKSPACE_BYTES, self.stream))

    def call(self, slot: int = 0) -> dict:
        """One eager call; C as it stood once the stream reached an event after the call is copied to
        `early` for the judge, before the whole device goes idle."""
        rc = self._call(slot)
        if rc:
            return {"rc": rc}
        nbytes = 2 * self.M * self.N
        self.rt.memcpy_async(self.buf["early"], self.buf[f"C{slot}"], nbytes, 3, self.stream)
        self.rt.stream_sync(self.stream)
        self.rt.device_sync()
        return {"rc": 0}

    def call_after_writer(self, slot: int = 0, cycles: int = EARLY_WRITER_CYCLES, wait_s: float = 60.0) -> dict:
        """A kernel that lets dependents launch early and copies `stage` into the A slot only after the call
        has been enqueued (a flag in host memory, set by this thread once `hgemm_run` returns) and `cycles`
        more; then the call. Without that gate, a host slower than the writer's spin would let a cheat pass. The writer
        waits for the flag at most `wait_s`, the judge's own limit for this request: a call that takes longer
        to enqueue fails on that limit, so it cannot outwait the gate."""
        a = self.buf["A"] + 2 * slot * self.M * self.K
        gate = _c.c_int.from_address(self.go_host)
        self.rt.device_sync()  # no earlier writer still reads the flag
        gate.value = 0
        self.shim.early_writer(self.buf["stage"], a, self.M * self.K, cycles, self.go, int(wait_s * 1e9),
                               self.stream)
        rc = self._call(slot)
        gate.value = 1
        self.rt.device_sync()
        return {"rc": rc}

    def capture(self, name: str, slots: list[int]) -> dict:
        self.rt.begin_capture(self.stream)
        for slot in slots:
            try:
                rc = self._call(int(slot))
            except Exception:
                self.rt.abandon_capture(self.stream)
                raise
            if rc:
                self.rt.abandon_capture(self.stream)
                return {"rc": rc}
        try:
            graph = self.rt.end_capture(self.stream)
            exe = self.rt.instantiate(graph)
        except CudaError as e:
            self.rt.last_error()
            return {"rc": 0, "capture_error": str(e)}
        self.graphs[name] = (exe, len(slots))
        return {"rc": 0}

    def replay(self, name: str) -> dict:
        self.rt.graph_launch(self.graphs[name][0], self.stream)
        self.rt.device_sync()
        return {}

    def time(self, name: str, mode: str, seeds: list[int], first: int, rng_seed: int = 0,
             mean_gap_us: float = 200.0, rules: bool = True) -> dict:
        """Raw per-launch times (us) of the graph `name`, one per seed; witnesses from `first` on. Without
        `rules` (the judge's benchmark of what they change), no new inputs between samples and no witnesses."""
        exe, launches = self.graphs[name]
        slots = launches if mode == "offline" else 1
        M, N, K = self.M, self.N, self.K

        def on_refresh(seed: int) -> None:
            refresh(self.shim, self.buf, M, K, slots, seed, self.stream)

        def on_after(_name: str, index: int, seed: int) -> None:
            witnesses(self.rt, self.shim, self.buf, M, N, slots, index, seed, self.stream)

        dev = StreamDevice(self.rt, self.stream, self.shim, {name: lambda: self.rt.graph_launch(exe, self.stream)},
                           self.flush_ptr, self.flush_bytes, *((on_refresh, on_after) if rules else (None, None)))
        try:
            if mode == "offline":
                us = timing.offline_samples(dev, [name], seeds, {name: launches}, first=first)[name]
            else:
                us = timing.server_samples(dev, [name], seeds, random.Random(rng_seed), mean_gap_us, first=first,
                                           require=False)[name]
            self.rt.device_sync()
        finally:
            dev.close()
        return {"us": us, "dropped": timing.dropped_samples}


OPS = ("open", "call", "call_after_writer", "capture", "replay", "time")


def serve(requests, replies, handles: socket.socket | None = None) -> None:
    """Boot: load the CUDA libraries and initialise the driver, creating no context. Then, on `init`, create
    the context (a spare runner waits there, ready) and answer requests until `quit`."""
    try:
        rt = Runtime.preloaded()
    except OSError as e:
        replies.write(json.dumps({"ready": False, "error": str(e)[:300]}) + "\n")
        replies.flush()
        return
    booted = time.monotonic()
    if json.loads(requests.readline() or "{}").get("op") != "init":
        return
    started = time.perf_counter()
    try:
        session = Session(rt, handles)
    except (CudaError, OSError) as e:
        replies.write(json.dumps({"ready": False, "error": str(e)[:300]}) + "\n")
        replies.flush()
        return
    ready = {"ready": True, "booted": booted, "cuda_s": time.perf_counter() - started}
    replies.write(json.dumps(ready) + "\n")
    replies.flush()
    for line in requests:
        msg = json.loads(line)
        op, args = msg.get("op"), msg.get("args", {})
        if op == "quit" or op not in OPS:
            return
        try:
            reply = {"ok": True, **getattr(session, op)(**args)}
        except CudaError as e:
            replies.write(json.dumps({"ok": False, "cuda_error": e.name}) + "\n")
            replies.flush()
            os._exit(3)  # a sticky error leaves this context unusable
        replies.write(json.dumps(reply) + "\n")
        replies.flush()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, required=True)
    parser.add_argument("--replies", type=int, required=True)
    parser.add_argument("--handles", type=int, default=None)
    args = parser.parse_args(argv)
    requests = os.fdopen(args.requests, "r")
    replies = os.fdopen(args.replies, "w")
    handles = socket.socket(fileno=args.handles) if args.handles is not None else None
    os.dup2(2, 1)  # the candidate's prints (host or device), and ours, go to the log only
    sys.stdout = sys.stderr
    serve(requests, replies, handles)
    sys.stderr.flush()
    os._exit(0)  # no interpreter teardown, no exit-time code of the candidate's: the judge waits for this


if __name__ == "__main__":
    main()
