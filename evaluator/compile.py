"""Compile candidate sources into fat shared libraries (sm_90a + sm_80), in parallel, with a content-addressed
cache. `compile_sources` returns one `CompileResult` per source, in order; `compile_source` takes one.

- A source refused by `evaluator.static_check` never reaches nvcc (failure_kind "bad_source" or
  "static_check").
- One nvcc call builds every requested architecture into one `.so`; its output is kept verbatim in `log`,
  and ptxas' `-v` report is parsed per architecture.
- The cache key is sha256 of (normalised source, nvcc flags, nvcc version, architectures). Entries are built
  in a temporary directory and renamed into place: a crash never leaves a half-written entry. Successes and
  compiler errors are cached; timeouts are not.
- A missing nvcc raises `NoCompiler`; nothing else raises for a bad candidate.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from hgemm.evaluator.static_check import bad_source_reasons, banned_reasons

from hgemm.core.errors import NoCompiler
from hgemm.core.paths import state_dir
from hgemm.core.record import Resources, kernel_hash, normalize_source

DEFAULT_ARCHS = ("sm_90a", "sm_80")
BASE_FLAGS = (
    "-O3",
    "-std=c++17",
    "--expt-relaxed-constexpr",
    "-Xptxas",
    "-v",
    "-shared",
    "-Xcompiler",
    "-fPIC",
)
CACHE_FORMAT = 1  # bump when the layout of a cache entry changes


@dataclass
class KernelResources:
    """ptxas' report for one kernel (entry function) on one architecture."""

    name: str
    arch: str
    registers: int | None = None
    shared_bytes: int | None = None
    stack_bytes: int | None = None
    spill_stores: int | None = None
    spill_loads: int | None = None
    barriers: int | None = None


@dataclass
class CompileResult:
    kernel_hash: str
    ok: bool
    lib_path: str | None
    log: str  # compiler output, verbatim
    resources: dict[str, Resources] = field(default_factory=dict)  # per arch: the kernel with most registers
    seconds: float = 0.0  # wall time of this call (near zero for a cache hit)
    cached: bool = False
    failure_kind: str | None = None  # "bad_source", "static_check", "compile_error", "timeout"
    message: str | None = None
    kernels: list[KernelResources] = field(default_factory=list)  # every kernel on every arch
    compile_seconds: float | None = None  # wall time of the nvcc run that built it (cached or not)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CompileResult:
        d = dict(d)
        d["resources"] = {a: Resources(**r) for a, r in (d.get("resources") or {}).items()}
        d["kernels"] = [KernelResources(**k) for k in d.get("kernels") or []]
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


# ---------------------------------------------------------------------------------------------- nvcc


def find_nvcc() -> str:
    """Path of nvcc: on PATH, else under $CUDA_HOME/bin; raises NoCompiler when absent."""
    path = shutil.which("nvcc")
    if path:
        return path
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if cuda_home and os.access(Path(cuda_home) / "bin" / "nvcc", os.X_OK):
        return str(Path(cuda_home) / "bin" / "nvcc")
    raise NoCompiler(
        "nvcc was not found on PATH (nor under $CUDA_HOME/bin); install the CUDA toolkit (12.4 or newer)"
    )


@lru_cache(maxsize=8)
def nvcc_version(nvcc: str) -> str:
    """The release line of `nvcc --version`, e.g. 'Cuda compilation tools, release 13.0, V13.0.88'."""
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise NoCompiler(f"nvcc at {nvcc} does not run: {e}") from e
    lines = [line for line in out.splitlines() if "release" in line]
    return lines[-1].strip() if lines else out.strip()


@lru_cache(maxsize=1)
def cutlass_include() -> str | None:
    """The CUTLASS/CuTe include folder of the `nvidia-cutlass` wheel, without importing the package."""
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        include = Path(location) / "source" / "include"
        if (include / "cute").is_dir() and (include / "cutlass").is_dir():
            return str(include)
    return None


def gencode_flags(archs: tuple[str, ...]) -> list[str]:
    """`sm_90a` -> `-gencode=arch=compute_90a,code=sm_90a` (one per architecture)."""
    flags = []
    for arch in archs:
        m = re.fullmatch(r"sm_(\d+[a-z]?)", arch)
        if not m:
            raise ValueError(f"architecture must look like sm_90a or sm_80, got {arch!r}")
        flags.append(f"-gencode=arch=compute_{m.group(1)},code={arch}")
    return flags


def nvcc_flags(archs: tuple[str, ...], extra_flags: tuple[str, ...] = ()) -> list[str]:
    """Every flag except the input and output names (these are part of the cache key)."""
    flags = [*BASE_FLAGS, *gencode_flags(archs)]
    include = cutlass_include()
    if include:
        flags.append(f"-I{include}")
    return flags + list(extra_flags)


# -------------------------------------------------------------------------------------- ptxas report

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas(log: str) -> list[KernelResources]:
    """Per-kernel, per-arch resources from `-Xptxas -v` output (device functions are skipped)."""
    kernels: list[KernelResources] = []
    current: KernelResources | None = None
    properties_of: str | None = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = KernelResources(name=m.group(1), arch=m.group(2))
            kernels.append(current)
            properties_of = None
            continue
        m = _PROPERTIES.search(line)
        if m:
            properties_of = m.group(1)
            continue
        m = _FRAME.search(line)
        if m and current is not None and properties_of == current.name:
            current.stack_bytes, current.spill_stores, current.spill_loads = map(int, m.groups())
            continue
        m = _USED.search(line)
        if m and current is not None and current.registers is None:
            current.registers = int(m.group(1))
            b = _BARRIERS.search(line)
            current.barriers = int(b.group(1)) if b else None
            s = _SMEM.search(line)
            current.shared_bytes = int(s.group(1)) if s else 0
    return kernels


def heaviest_per_arch(kernels: list[KernelResources], seconds: float | None) -> dict[str, Resources]:
    """For each arch, the kernel with the most registers (ties: most shared memory) as a `Resources`."""
    best: dict[str, KernelResources] = {}
    for k in kernels:
        key = (k.registers or 0, k.shared_bytes or 0)
        if k.arch not in best or key > (best[k.arch].registers or 0, best[k.arch].shared_bytes or 0):
            best[k.arch] = k
    return {
        arch: Resources(
            arch=arch,
            registers=k.registers,
            shared_bytes=k.shared_bytes,
            stack_bytes=k.stack_bytes,
            spill_stores=k.spill_stores,
            spill_loads=k.spill_loads,
            compile_seconds=seconds,
        )
        for arch, k in best.items()
    }


# ----------------------------------------------------------------------------------------- compile


def cache_key(source: str, flags: list[str], version: str, archs: tuple[str, ...]) -> str:
    payload = json.dumps(
        {
            "format": CACHE_FORMAT,
            "source": normalize_source(source),
            "flags": flags,
            "nvcc": version,
            "archs": archs,
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def _entry_dir(key: str) -> Path:
    return state_dir("cache") / key[:2] / key


def _load_cached(key: str, source: str) -> CompileResult | None:
    entry = _entry_dir(key)
    try:
        meta = json.loads((entry / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    result = CompileResult.from_dict(meta)
    if result.ok:
        lib = entry / "kernel.so"
        if not lib.is_file():
            return None
        result.lib_path = str(lib)
    result.kernel_hash = kernel_hash(source)
    result.cached = True
    return result


def _run_nvcc(cmd: list[str], cwd: str, timeout_s: float) -> tuple[int | None, str]:
    """(exit code or None on timeout, combined output). The whole process group is killed on timeout."""
    proc = subprocess.Popen(
        cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, _ = proc.communicate()
        return None, out or ""


def _compile_checked(
    source: str, archs: tuple[str, ...], extra_flags: tuple[str, ...], timeout_s: float, use_cache: bool
) -> CompileResult:
    start = time.perf_counter()
    h = kernel_hash(source)
    nvcc = find_nvcc()
    flags = nvcc_flags(archs, extra_flags)
    key = cache_key(source, flags, nvcc_version(nvcc), archs)
    if use_cache:
        hit = _load_cached(key, source)
        if hit is not None:
            hit.seconds = time.perf_counter() - start
            return hit

    note = (
        "" if cutlass_include() else "note: CUTLASS/CuTe headers not found (nvidia-cutlass not installed)\n"
    )
    cache_root = state_dir("cache")
    work = Path(tempfile.mkdtemp(prefix="tmp-", dir=cache_root))
    try:
        (work / "kernel.cu").write_text(normalize_source(source))
        cmd = [nvcc, *flags, "kernel.cu", "-o", "kernel.so"]
        t0 = time.perf_counter()
        code, out = _run_nvcc(cmd, str(work), timeout_s)
        nvcc_seconds = time.perf_counter() - t0
        log = note + out
        if code is None:
            return CompileResult(
                kernel_hash=h,
                ok=False,
                lib_path=None,
                log=log,
                seconds=time.perf_counter() - start,
                failure_kind="timeout",
                message=f"nvcc ran past {timeout_s:g} s",
                compile_seconds=nvcc_seconds,
            )
        kernels = parse_ptxas(out)
        ok = code == 0 and (work / "kernel.so").is_file()
        result = CompileResult(
            kernel_hash=h,
            ok=ok,
            lib_path=None,
            log=log,
            resources=heaviest_per_arch(kernels, nvcc_seconds) if ok else {},
            failure_kind=None if ok else "compile_error",
            message=None if ok else _first_error(out, code),
            kernels=kernels if ok else [],
            compile_seconds=nvcc_seconds,
        )
        (work / "kernel.cu").unlink()
        (work / "meta.json").write_text(json.dumps(result.to_dict(), indent=1))
        entry = _entry_dir(key)
        entry.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(work, entry)  # atomic: the entry appears whole or not at all
        except OSError:
            # The entry exists: replace it when rebuilding on purpose or when it is broken.
            if not use_cache or _load_cached(key, source) is None:
                trash = entry.with_name(f"{entry.name}.trash-{os.getpid()}-{time.monotonic_ns()}")
                try:
                    os.rename(entry, trash)
                except OSError:
                    pass
                shutil.rmtree(trash, ignore_errors=True)
                os.rename(work, entry)
            # else another thread or process finished the same entry first; theirs is as good
        result.lib_path = str(entry / "kernel.so") if ok else None
        result.seconds = time.perf_counter() - start
        return result
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def _sweep_stale_builds(max_age_s: float = 3600) -> None:
    """Remove build directories left by a process that died mid-compile (never complete entries)."""
    now = time.time()
    for tmp in state_dir("cache").glob("tmp-*"):
        try:
            if now - tmp.stat().st_mtime > max_age_s:
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError:
            pass


def _first_error(out: str, code: int) -> str:
    for line in out.splitlines():
        if "error" in line.lower():
            return line.strip()[:300]
    return f"nvcc exited with status {code}"


def compile_source(
    source: str,
    archs: tuple[str, ...] = DEFAULT_ARCHS,
    timeout_s: float = 600,
    extra_flags: tuple[str, ...] = (),
    use_cache: bool = True,
    check: bool = True,
) -> CompileResult:
    """Statically check, then compile one source.

    `use_cache=False` rebuilds and replaces the cache entry; `check=False` skips the static check
    (only for proving that a rejected test kernel would otherwise compile).
    """
    reasons = bad_source_reasons(source)
    if reasons:
        try:
            h = kernel_hash(source)
        except (TypeError, AttributeError, UnicodeEncodeError):
            h = ""
        return CompileResult(h, False, None, "", failure_kind="bad_source", message="; ".join(reasons))
    if check:
        reasons = banned_reasons(source)
        if reasons:
            return CompileResult(
                kernel_hash(source),
                False,
                None,
                "\n".join(reasons),
                failure_kind="static_check",
                message="; ".join(reasons),
            )
    return _compile_checked(source, tuple(archs), tuple(extra_flags), timeout_s, use_cache)


def compile_sources(
    sources: list[str],
    archs: tuple[str, ...] = DEFAULT_ARCHS,
    jobs: int | None = None,
    timeout_s: float = 600,
    extra_flags: tuple[str, ...] = (),
    use_cache: bool = True,
    check: bool = True,
) -> list[CompileResult]:
    """Compile many sources in parallel (one nvcc per worker thread); results keep the input order."""
    find_nvcc()  # fail once, clearly, before any work
    _sweep_stale_builds()
    jobs = max(1, jobs or os.cpu_count() or 1)

    def one(source: str) -> CompileResult:
        return compile_source(source, archs, timeout_s, extra_flags, use_cache, check)

    if jobs == 1 or len(sources) <= 1:
        return [one(s) for s in sources]
    with ThreadPoolExecutor(max_workers=min(jobs, len(sources))) as pool:
        return list(pool.map(one, sources))
