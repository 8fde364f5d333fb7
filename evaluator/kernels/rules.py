"""The kernel families' rules as their templates state them: a host build of the rules headers, read with ctypes.

- Each family's rules header (`wgmma_rules.cuh`, `mma_rules.cuh`, `small_rules.cuh`, `gemv_rules.cuh`) is the one place its
  constraints and resource formulas are written; the kernel includes it, and this module compiles it (with
  the host C++ compiler, through `rules_host.cpp`) into a small library the search calls, so Python restates
  none of it.
- The library is built once per machine and header content, under the state root, atomically; a missing host
  compiler raises NoCompiler.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

from hgemm.core.errors import NoCompiler
from hgemm.core.paths import state_dir
from hgemm.core.shape import Shape

# Each family's Params, field by field, as its header declares them (the parameters' names in the family).
ORDERS = {
    "wgmma": ("bm", "bn", "stages", "consumers", "group_m", "persistent", "epilogue", "cluster_m", "pingpong",
              "split_k", "split_dsmem", "epi_panels", "stream_k", "swap_ab", "warp_producer", "stage_k", "pad_rows"),
    "mma": ("BM", "BN", "BK", "WARPS_M", "WARPS_N", "STAGES", "RASTER", "SPLIT_K", "KVEC", "REALIGN"),
    "small": ("BM", "BN", "WARPS_M", "WARPS_N", "WARPS_K", "KVEC"),
    "gemv": ("MAXM", "ROWS", "WARPS", "KSPLIT", "UNROLL", "KVEC"),
}
WGMMA_ORDER = ORDERS["wgmma"]
SOURCES = ("rules_host.cpp", "wgmma_rules.cuh", "mma_rules.cuh", "small_rules.cuh", "gemv_rules.cuh")


def _compiler() -> str:
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise NoCompiler("no host C++ compiler (g++) on PATH: the kernel families' rules are built with it")


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    """The rules library (built on first use)."""
    folder = resources.files("hgemm.evaluator.kernels")
    texts = {name: folder.joinpath(name).read_text() for name in SOURCES}
    cxx = _compiler()
    key = hashlib.sha256(("\0".join(texts[n] for n in SOURCES) + cxx).encode()).hexdigest()[:16]
    lib = state_dir("rules") / f"rules-{key}.so"
    if not lib.exists():
        with tempfile.TemporaryDirectory(dir=state_dir("rules")) as tmp:
            for name, text in texts.items():
                (Path(tmp) / name).write_text(text)
            out = Path(tmp) / "rules.so"
            done = subprocess.run([cxx, "-std=c++17", "-O2", "-shared", "-fPIC", "-o", str(out),
                                   str(Path(tmp) / "rules_host.cpp")], capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                raise RuntimeError(f"the families' rules headers do not build:\n{done.stderr[-2000:]}")
            os.replace(out, lib)
    dll = ctypes.CDLL(str(lib))
    ip, ll = ctypes.POINTER(ctypes.c_int), ctypes.c_longlong
    for fam in ORDERS:
        getattr(dll, f"{fam}_violation").restype = ctypes.c_char_p
        getattr(dll, f"{fam}_violation").argtypes = [ip]
        getattr(dll, f"{fam}_shape_violation").restype = ctypes.c_char_p
        getattr(dll, f"{fam}_shape_violation").argtypes = [ip, ll, ll, ll]
        getattr(dll, f"{fam}_smem_bytes").restype = ctypes.c_int
        getattr(dll, f"{fam}_smem_bytes").argtypes = [ip]
        getattr(dll, f"{fam}_walk").restype = ctypes.c_longlong
        getattr(dll, f"{fam}_walk").argtypes = [ctypes.POINTER(ip), ip, ctypes.POINTER(ll)]
    for name in ("wgmma_c_panel", "wgmma_wg_rows", "mma_register_estimate", "small_register_estimate",
                 "gemv_register_estimate"):
        getattr(dll, name).restype, getattr(dll, name).argtypes = ctypes.c_int, [ip]
    dll.wgmma_box_k.restype, dll.wgmma_box_k.argtypes = ctypes.c_int, []
    dll.wgmma_pad_block.restype, dll.wgmma_pad_block.argtypes = ll, [ll, ll, ll, ctypes.c_int]
    return dll


def _vector(fam: str, params: dict) -> ctypes.Array:
    order = ORDERS[fam]
    return (ctypes.c_int * len(order))(*(int(params[k]) for k in order))


def _text(value: bytes | None) -> str | None:
    return value.decode() if value else None


def violation(params: dict, fam: str = "wgmma") -> str | None:
    """The first rule the parameters break, in the header's words, or None."""
    return _text(getattr(library(), f"{fam}_violation")(_vector(fam, params)))


def shape_violation(params: dict, shape: Shape, fam: str = "wgmma") -> str | None:
    """The first rule the shape breaks for these parameters (what the kernel's hgemm_supports refuses), or None."""
    return _text(getattr(library(), f"{fam}_shape_violation")(_vector(fam, params), *shape))


def smem_bytes(params: dict, fam: str = "wgmma") -> int:
    """Dynamic shared memory the kernel requests for these parameters."""
    return getattr(library(), f"{fam}_smem_bytes")(_vector(fam, params))


def register_estimate(params: dict, fam: str) -> int:
    """The header's rough registers per thread (mma, small and gemv families)."""
    return getattr(library(), f"{fam}_register_estimate")(_vector(fam, params))


def box_k() -> int:
    """The wgmma family's k per TMA box (one 128-byte swizzle row); a ring stage holds `stage_k` / box_k of them."""
    return library().wgmma_box_k()


def pad_block(shape: Shape) -> tuple[int, int]:
    """The wgmma family's block of C under `pad_rows` (rows of A, rows of Bt): the whole shape where the padded copies
    of A and Bt fit the workspace, else the blocks computed one after another."""
    dll = library()
    return dll.wgmma_pad_block(*shape, 0), dll.wgmma_pad_block(*shape, 1)


def c_panel(params: dict) -> int:
    return library().wgmma_c_panel(_vector("wgmma", params))


def wg_rows(params: dict) -> int:
    return library().wgmma_wg_rows(_vector("wgmma", params))


def walk(space: dict[str, tuple], fam: str = "wgmma") -> tuple[int, int, int]:
    """Every point of a declared space through the compiled rules: (points, accepted, accepted points that
    break what the formulas promise)."""
    order = ORDERS[fam]
    arrays = [(ctypes.c_int * len(space[k]))(*space[k]) for k in order]
    values = (ctypes.POINTER(ctypes.c_int) * len(arrays))(*(ctypes.cast(a, ctypes.POINTER(ctypes.c_int)) for a in arrays))
    counts = (ctypes.c_int * len(arrays))(*(len(space[k]) for k in order))
    accepted = ctypes.c_longlong()
    broken = getattr(library(), f"{fam}_walk")(values, counts, ctypes.byref(accepted))
    points = 1
    for k in order:
        points *= len(space[k])
    return points, accepted.value, broken
