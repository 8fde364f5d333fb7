"""A family's rules as its template states them: a host build of the rules header, read with ctypes.

- The rules header (`wgmma_rules.cuh`) is the one place the wgmma family's constraints and resource
  formulas are written; the kernel includes it, and this module compiles it (with the host C++ compiler)
  into a small library the search calls, so Python restates none of it.
- The library is built once per machine and header content, under the state root, atomically; a missing
  host compiler raises NoCompiler.
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

WGMMA_ORDER = ("bm", "bn", "stages", "consumers", "group_m", "persistent", "epilogue", "cluster_m", "pingpong",
               "split_k", "split_dsmem", "epi_panels", "stream_k")  # the header's Params, field by field
SOURCES = ("wgmma_rules.cuh", "wgmma_rules_host.cpp")


def _compiler() -> str:
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    raise NoCompiler("no host C++ compiler (g++) on PATH: the kernel families' rules are built with it")


@functools.lru_cache(maxsize=1)
def wgmma() -> ctypes.CDLL:
    """The wgmma rules library (built on first use)."""
    folder = resources.files("hgemm.evaluator.kernels")
    texts = {name: folder.joinpath(name).read_text() for name in SOURCES}
    cxx = _compiler()
    key = hashlib.sha256(("\0".join(texts[n] for n in SOURCES) + cxx).encode()).hexdigest()[:16]
    lib = state_dir("rules") / f"wgmma-{key}.so"
    if not lib.exists():
        with tempfile.TemporaryDirectory(dir=state_dir("rules")) as tmp:
            for name, text in texts.items():
                (Path(tmp) / name).write_text(text)
            out = Path(tmp) / "rules.so"
            done = subprocess.run([cxx, "-std=c++17", "-O2", "-shared", "-fPIC", "-o", str(out),
                                   str(Path(tmp) / "wgmma_rules_host.cpp")], capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                raise RuntimeError(f"the wgmma rules header does not build:\n{done.stderr[-2000:]}")
            os.replace(out, lib)
    dll = ctypes.CDLL(str(lib))
    ip, ll = ctypes.POINTER(ctypes.c_int), ctypes.c_longlong
    dll.wgmma_violation.restype, dll.wgmma_violation.argtypes = ctypes.c_char_p, [ip]
    dll.wgmma_shape_violation.restype, dll.wgmma_shape_violation.argtypes = ctypes.c_char_p, [ip, ll, ll, ll]
    dll.wgmma_bk.restype, dll.wgmma_bk.argtypes = ctypes.c_int, []
    for name in ("wgmma_smem_bytes", "wgmma_tails", "wgmma_c_panel", "wgmma_wg_rows"):
        getattr(dll, name).restype, getattr(dll, name).argtypes = ctypes.c_int, [ip]
    dll.wgmma_walk.restype = ctypes.c_longlong
    dll.wgmma_walk.argtypes = [ctypes.POINTER(ip), ip, ctypes.POINTER(ll)]
    return dll


def bk() -> int:
    """k per ring stage."""
    return wgmma().wgmma_bk()


def _vector(params: dict) -> ctypes.Array:
    return (ctypes.c_int * len(WGMMA_ORDER))(*(int(params[k]) for k in WGMMA_ORDER))


def violation(params: dict) -> str | None:
    """The first rule the parameters break, in the header's words, or None."""
    text = wgmma().wgmma_violation(_vector(params))
    return text.decode() if text else None


def shape_violation(params: dict, M: int, N: int, K: int) -> str | None:
    """The first rule the shape breaks for these parameters (what the kernel's hgemm_supports refuses), or None."""
    text = wgmma().wgmma_shape_violation(_vector(params), M, N, K)
    return text.decode() if text else None


def smem_bytes(params: dict) -> int:
    return wgmma().wgmma_smem_bytes(_vector(params))


def tails(params: dict) -> bool:
    return bool(wgmma().wgmma_tails(_vector(params)))


def c_panel(params: dict) -> int:
    return wgmma().wgmma_c_panel(_vector(params))


def wg_rows(params: dict) -> int:
    return wgmma().wgmma_wg_rows(_vector(params))


def walk(space: dict[str, tuple]) -> tuple[int, int, int]:
    """Every point of a declared space through the compiled rules: (points, accepted, accepted points that
    break what the formulas promise)."""
    arrays = [(ctypes.c_int * len(space[k]))(*space[k]) for k in WGMMA_ORDER]
    values = (ctypes.POINTER(ctypes.c_int) * len(arrays))(*(ctypes.cast(a, ctypes.POINTER(ctypes.c_int)) for a in arrays))
    counts = (ctypes.c_int * len(arrays))(*(len(space[k]) for k in WGMMA_ORDER))
    accepted = ctypes.c_longlong()
    broken = wgmma().wgmma_walk(values, counts, ctypes.byref(accepted))
    points = 1
    for k in WGMMA_ORDER:
        points *= len(space[k])
    return points, accepted.value, broken
