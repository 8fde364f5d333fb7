"""Per-GPU facts measured once and cached under the state root: matrix peak, memory bandwidth, graph-launch
floor. They define the physical floor below which a measured time is suspicious.

- The measured peak and bandwidth are what a library reached on this card, not what the silicon can do, so
  a kernel may legitimately beat them slightly: the floor divides by the measured ceilings times a headroom
  (PEAK_HEADROOM, BW_HEADROOM).
- Anything faster than that floor is treated as a timing bug or a cheat.
"""

from __future__ import annotations

import json
import subprocess

import torch

from hgemm.core.paths import state_dir, write_text_atomic
from hgemm.core.record import GpuInfo
from hgemm.core.shape import Shape

PEAK_HEADROOM = 1.15
BW_HEADROOM = 1.15
FACTS_VERSION = 2


def driver_version() -> str:
    try:
        import pynvml

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0]
    except Exception:
        return "unknown"


def gpu_info() -> GpuInfo:
    p = torch.cuda.get_device_properties(torch.cuda.current_device())
    return GpuInfo(
        name=p.name, cc=f"{p.major}.{p.minor}", driver=driver_version(), sm_count=p.multi_processor_count,
        l2_bytes=int(p.L2_cache_size), smem_per_block_optin=int(getattr(p, "shared_memory_per_block_optin", 0)),
        memory_bytes=int(p.total_memory),
    )


def gpu_key(info: GpuInfo) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in f"{info.name}-{info.driver}")


def _matmul_tflops(stream: torch.cuda.Stream, n: int = 8192) -> float:
    from hgemm.evaluator.timing import time_offline

    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    mm = time_offline({"mm": lambda: torch.mm(a, b, out=c)}, stream, samples=7, reps=3)["mm"]
    return 2 * n**3 / (mm.median_us * 1e-6) / 1e12


def _copy_gbs(stream: torch.cuda.Stream, nbytes: int = 1 << 31) -> float:
    from hgemm.evaluator.timing import time_offline

    src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    cp = time_offline({"copy": lambda: dst.copy_(src)}, stream, samples=7, reps=3)["copy"]
    return 2 * nbytes / (cp.median_us * 1e-6) / 1e9  # bytes read plus bytes written


def _read_gbs(stream: torch.cuda.Stream, nbytes: int = 1 << 31) -> float:
    """Read-only bandwidth (a sum over 2 GiB): GEMMs mostly read, and reads run faster than copies."""
    from hgemm.evaluator.timing import time_offline

    src = torch.ones(nbytes // 4, dtype=torch.float32, device="cuda")
    out = torch.empty((), dtype=torch.float32, device="cuda")
    rd = time_offline({"read": lambda: torch.sum(src, dim=0, out=out)}, stream, samples=7, reps=3)["read"]
    return nbytes / (rd.median_us * 1e-6) / 1e9


def _launch_us(stream: torch.cuda.Stream, empty_lib: str) -> float:
    """One empty kernel launched through a candidate's path (ctypes → hgemm_run), in a graph."""
    from hgemm.evaluator.harness import Candidate
    from hgemm.evaluator.timing import time_offline

    empty = Candidate(empty_lib)
    call = lambda: empty.run(0, 0, 0, 0, 0, 0, 0, 0, 0, stream.cuda_stream)  # noqa: E731
    return time_offline({"empty": call}, stream, samples=9, reps=200)["empty"].median_us


def measure(stream: torch.cuda.Stream, empty_lib: str) -> dict:
    copy, read = _copy_gbs(stream), _read_gbs(stream)
    return {"version": FACTS_VERSION, "peak_tflops": _matmul_tflops(stream), "bandwidth_gbs": max(copy, read),
            "copy_gbs": copy, "read_gbs": read, "launch_us": _launch_us(stream, empty_lib)}


def facts(info: GpuInfo, stream: torch.cuda.Stream, empty_lib: str) -> dict:
    path = state_dir("gpu") / f"{gpu_key(info)}.json"
    if path.exists():
        cached = json.loads(path.read_text())
        if cached.get("version") == FACTS_VERSION:
            return cached
    f = measure(stream, empty_lib)
    f["measured"] = {"matmul": "torch.mm fp16 8192^3, CUDA graph", "copy": "2 GiB device-to-device, read+write", "read": "sum over 2 GiB",
                     "launch": "empty kernel through hgemm_run, CUDA graph of 200"}
    write_text_atomic(path, json.dumps(f, indent=1))
    return f


def floor_us(f: dict, shape: Shape, mode: str, l2_bytes: int) -> float:
    """max(2MNK / peak, bytes moved / bandwidth, graph-launch floor), ceilings with headroom.

    Bytes moved: each operand read once and C written once. Offline (warm L2, back to back)
    up to a whole L2 of them may already sit in the cache, so only the excess counts there."""
    M, N, K = shape
    flops_us = shape.flops / (f["peak_tflops"] * PEAK_HEADROOM * 1e12) * 1e6
    nbytes = 2 * (M * K + K * N + M * N)
    if mode == "offline":
        nbytes = max(0, nbytes - l2_bytes)
    bytes_us = nbytes / (f["bandwidth_gbs"] * BW_HEADROOM * 1e9) * 1e6
    return max(flops_us, bytes_us, f["launch_us"])
