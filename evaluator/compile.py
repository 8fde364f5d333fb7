"""Compile candidate sources into fat shared libraries (sm_90a + sm_80), in parallel, with a content-addressed
cache. `compile_sources` returns one `CompileResult` per source, in order; `compile_source` takes one.

- Pipeline: static check → `nvcc -c` (keeping nvcc's preprocessed host translation unit) → audit
  (`evaluator.audit`: the expanded source, the object, device memory) → link that same object → library
  size cap. The static check and nvcc read the same bytes: `normalize_source(source)`.
- A source refused by the static check never reaches nvcc ("bad_source", "static_check"); an object the
  audit refuses is never linked ("object_audit") unless the caller skips the checks (tests only).
- nvcc and the tools run in the sandbox's compile profile, two minutes at most, the build folder their only
  writable place; the cache keeps under its size cap (`evaluator.compile_cache`).
- The cache key is sha256 of (normalised source, flags, nvcc version, architectures, audit policy). Entries
  are built in a temporary directory and renamed into place: a crash never leaves a half-written entry.
  Builds, compiler errors and audit refusals are cached; timeouts are not.
- One build per key at a time: a caller that misses the cache while another thread or process builds the
  same key waits for that build (a lock file per key, `cache/locks/`) and takes it from the cache. Two GPU
  workers given the same candidate at once each ran nvcc on it before.
- A missing nvcc raises `NoCompiler`; nothing else raises for a bad candidate.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from hgemm.evaluator import audit, compile_cache
from hgemm.evaluator.static_check import bad_source_reasons, banned_reasons

from hgemm.core.errors import NoCompiler
from hgemm.core.paths import state_dir
from hgemm.core.record import Resources, kernel_hash, normalize_source

DEFAULT_ARCHS = ("sm_90a", "sm_80")
# Host code layouts to build again with, in order, where the only fault the audit finds is the bytes of a system
# call instruction inside other host instructions (an immediate, a displacement, two neighbours). In honest code
# those come from where the compiler happened to lay the code out (g++ 13 put `int 0x80`'s bytes into a wgmma
# launcher that g++ 12 compiles clean), and another layout has none; a deliberate gadget survives every one. nvcc
# puts its own -O3 after -Xcompiler's options, so these are -f options, which an -O level does not override.
# Whatever build is linked passed the whole audit; host code speed is not timed (graphs replay the launches).
HOST_RELAYOUTS = (
    ("-Xcompiler", "-fno-schedule-insns2,-fno-reorder-blocks"),
    ("-Xcompiler", "-fno-inline"),
    ("-Xcompiler", "-falign-functions=64,-falign-jumps=16,-falign-labels=16"),
)

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
COMPILE_TIMEOUT_S = 120.0  # a compile past two minutes is a bomb or a bug; its process tree is killed
CACHE_FORMAT = 2  # bump when the layout of a cache entry changes
SOURCE_NAME = "kernel.cu"  # the candidate's file name in a build directory (the audit finds its lines by it)


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
    failure_kind: str | None = None  # a FAILURE_KINDS entry: bad_source ... object_audit, or timeout
    message: str | None = None
    kernels: list[KernelResources] = field(default_factory=list)  # every kernel on every arch
    compile_seconds: float | None = None  # wall time of the nvcc runs that built it (cached or not)
    audit: dict[str, Any] = field(default_factory=dict)  # the audit's measurements: sizes, imports
    audit_reasons: list[str] = field(default_factory=list)  # why the audit refuses it (empty: accepted)

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


def object_command(nvcc: str, flags: list[str], source: str = SOURCE_NAME, keep_dir: str | None = "keep"):
    """nvcc building `source` into `kernel.o` with `flags`; with `keep_dir`, nvcc's intermediate files (the
    preprocessed translation units the audit reads) stay there. Each architecture compiles in a thread of its
    own (`--threads`): the object is the same but for nvcc's module id, and ptxas' report still comes one
    architecture at a time; a miss of the cache costs about a third less (1.6 -> 1.1 s for a wgmma kernel)."""
    archs = sum(1 for f in flags if f.startswith("-gencode="))
    cmd = [nvcc, *(f for f in flags if f != "-shared"), "-c", source, "-o", "kernel.o"]
    cmd += ["--threads", str(archs)] if archs > 1 else []
    return cmd + (["--keep", "--keep-dir", keep_dir] if keep_dir else [])


def link_command(nvcc: str, flags: list[str]) -> list[str]:
    """nvcc linking the audited `kernel.o` into `kernel.so` (the CUDA runtime linked statically, as always)."""
    return [nvcc, *flags, "kernel.o", "-o", "kernel.so"]


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
            "policy": audit.POLICY_ID,
        },
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def _entry_dir(key: str) -> Path:
    return state_dir("cache") / key[:2] / key


def _verdict(result: CompileResult, check: bool) -> CompileResult:
    """The result a caller sees: an audited-out build is a failure unless the checks are skipped."""
    if result.failure_kind is None and result.audit_reasons and check:
        result.ok, result.lib_path = False, None
        result.failure_kind = "object_audit"
        result.message = "; ".join(result.audit_reasons)
    return result


def _load_cached(key: str, source: str, check: bool = True) -> CompileResult | None:
    entry = _entry_dir(key)
    try:
        meta = json.loads((entry / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    compile_cache.touch(entry)
    result = CompileResult.from_dict(meta)
    if result.ok:
        lib = entry / "kernel.so"
        if not lib.is_file():
            if result.audit_reasons and check:  # refused, and never linked: the verdict needs no library
                result.lib_path = None
            else:
                return None
        else:
            result.lib_path = str(lib)
    result.kernel_hash = kernel_hash(source)
    result.cached = True
    return _verdict(result, check)


@lru_cache(maxsize=8)
def _baseline(nvcc: str, flags: tuple[str, ...]) -> audit.Baseline:
    """What an empty contract kernel's object holds (nvcc's own load-time registration), built with `flags`."""
    from importlib import resources

    empty = resources.files("hgemm.evaluator").joinpath("shims", "empty.cu").read_text()
    with tempfile.TemporaryDirectory(prefix="hgemm-baseline-") as work:
        (Path(work) / "empty.cu").write_text(empty)
        code, out = _run_nvcc(object_command(nvcc, list(flags), "empty.cu", keep_dir=None), work, 300)
        if code != 0:
            raise NoCompiler(f"nvcc cannot build the empty contract kernel:\n{out}")
        return audit.Baseline.of(Path(work) / "kernel.o")


def _run_nvcc(cmd: list[str], cwd: str, timeout_s: float) -> tuple[int | None, str]:
    """(exit code or None on timeout, combined output), run in the sandbox's compile profile with the build
    folder as its only writable place (and its TMPDIR); the whole process tree is killed on timeout."""
    from hgemm.evaluator import sandbox

    return sandbox.run(cmd, "compile", Path(cwd), timeout_s)


@contextmanager
def _build_lock(key: str, wait_s: float) -> Iterator[None]:
    """Hold the build lock of `key` (an exclusive flock on `cache/locks/<key>`; each call opens the file itself,
    so threads of one process exclude each other too). After `wait_s` without it the caller builds anyway: a
    holder that hangs outside nvcc's own time limit delays a build, never stops it. Where the lock file cannot be
    made or locked (a file system without locks), the caller builds without it, as before the lock existed."""
    try:
        locks = state_dir("cache") / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        fd = os.open(locks / key, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield
        return
    try:
        os.utime(fd)  # its last use, for the sweep of old lock files
        deadline = time.monotonic() + wait_s
        while time.monotonic() <= deadline:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                time.sleep(0.02)
            except OSError:
                break  # no locks here: build without one
        yield
    finally:
        os.close(fd)  # closing the file releases the lock


def _compile_checked(
    source: str,
    archs: tuple[str, ...],
    extra_flags: tuple[str, ...],
    timeout_s: float,
    use_cache: bool,
    check: bool = True,
) -> CompileResult:
    start = time.perf_counter()
    text = normalize_source(source)
    nvcc = find_nvcc()
    audit.find_objdump()
    flags = nvcc_flags(archs, extra_flags)
    key = cache_key(text, flags, nvcc_version(nvcc), archs)
    if use_cache:
        hit = _load_cached(key, source, check)
        if hit is None:
            with _build_lock(key, wait_s=2 * timeout_s + 30):
                hit = _load_cached(key, source, check)  # built by whoever held the lock
                if hit is None:
                    return _build(source, text, flags, key, nvcc, timeout_s, use_cache, check, start)
        hit.seconds = time.perf_counter() - start
        return hit
    return _build(source, text, flags, key, nvcc, timeout_s, use_cache, check, start)


def _audit(work: Path, nvcc_out: str, baseline: audit.Baseline) -> audit.AuditReport:
    """The audit of the object nvcc just built in `work` (its kept host translation unit, its ptxas report)."""
    host_units = sorted((work / "keep").glob("*.cpp4.ii"))
    return audit.audit_build(work / "kernel.o", host_units[0] if host_units else None, SOURCE_NAME, nvcc_out, baseline)


def _build(
    source: str,
    text: str,
    flags: list[str],
    key: str,
    nvcc: str,
    timeout_s: float,
    use_cache: bool,
    check: bool,
    start: float,
) -> CompileResult:
    """Run nvcc, the audit and the link on `text` (the normalised `source`) in a build folder, and rename it into
    the cache as `key`'s entry."""
    h = kernel_hash(source)
    note = (
        "" if cutlass_include() else "note: CUTLASS/CuTe headers not found (nvidia-cutlass not installed)\n"
    )
    baseline = _baseline(nvcc, tuple(flags))
    cache_root = state_dir("cache")
    work = Path(tempfile.mkdtemp(prefix="tmp-", dir=cache_root))
    try:
        (work / SOURCE_NAME).write_text(text)
        (work / "keep").mkdir()
        t0 = time.perf_counter()
        code, out = _run_nvcc(object_command(nvcc, flags), str(work), timeout_s)
        log = note + out

        def timed_out(what: str, log: str) -> CompileResult:
            return CompileResult(
                kernel_hash=h,
                ok=False,
                lib_path=None,
                log=log,
                seconds=time.perf_counter() - start,
                failure_kind="timeout",
                message=f"{what} ran past {timeout_s:g} s",
                compile_seconds=time.perf_counter() - t0,
            )

        if code is None:
            return timed_out("nvcc", log)
        kernels = parse_ptxas(out)
        built = code == 0 and (work / "kernel.o").is_file()
        report = audit.AuditReport()
        linked = False
        if built:
            report = _audit(work, out, baseline)
            for relayout in HOST_RELAYOUTS if check else ():
                if not report.reasons or not all(r.startswith(audit.HIDDEN_BYTES_REASON) for r in report.reasons):
                    break
                left = max(1.0, timeout_s - (time.perf_counter() - t0))
                again, again_out = _run_nvcc(object_command(nvcc, flags + list(relayout)), str(work), left)
                log += f"\n(host code built again with {' '.join(relayout)}: {'; '.join(report.reasons)})\n"
                if again is None:
                    return timed_out("nvcc", log)
                if again != 0 or not (work / "kernel.o").is_file():
                    break  # the last audited build's verdict stands
                report = _audit(work, again_out, baseline)
                report.facts["host_relayout"] = " ".join(relayout)
            if not report.reasons or not check:
                left = max(1.0, timeout_s - (time.perf_counter() - t0))
                link_code, link_out = _run_nvcc(link_command(nvcc, flags), str(work), left)
                log += link_out
                if link_code is None:
                    return timed_out("the link", log)
                linked = link_code == 0 and (work / "kernel.so").is_file()
                if linked:
                    lib_reasons, lib_bytes = audit.library_reasons(work / "kernel.so")
                    report.facts["library_bytes"] = lib_bytes
                    report.reasons.extend(lib_reasons)
                    if lib_reasons and check:
                        (work / "kernel.so").unlink()
                        linked = False
                else:
                    code = link_code if link_code else 1
                    out = link_out
        nvcc_seconds = time.perf_counter() - t0
        ok = built and (linked or bool(report.reasons and check))
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
            audit=report.facts,
            audit_reasons=report.reasons,
        )
        for scratch in (work / SOURCE_NAME, work / "kernel.o"):
            scratch.unlink(missing_ok=True)
        shutil.rmtree(work / "keep", ignore_errors=True)
        (work / "meta.json").write_text(json.dumps(result.to_dict(), indent=1))
        entry = _entry_dir(key)
        entry.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(work, entry)  # atomic: the entry appears whole or not at all
        except OSError:
            # The entry exists: replace it when rebuilding on purpose or when it is broken.
            if not use_cache or _load_cached(key, source, check) is None:
                trash = entry.with_name(f"{entry.name}.trash-{os.getpid()}-{time.monotonic_ns()}")
                try:
                    os.rename(entry, trash)
                except OSError:
                    pass
                shutil.rmtree(trash, ignore_errors=True)
                os.rename(work, entry)
            # else another thread or process finished the same entry first; theirs is as good
        result.lib_path = str(entry / "kernel.so") if ok and linked else None
        result.seconds = time.perf_counter() - start
        return _verdict(result, check)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def _sweep_stale_builds(max_age_s: float = 3600) -> None:
    """Remove build directories left by a process that died mid-compile (never complete entries), and build
    lock files not used for as long (a lock file is empty; a new one is made on demand)."""
    now = time.time()
    root = state_dir("cache")
    for tmp in [*root.glob("tmp-*"), *root.glob("locks/*")]:
        try:
            if now - tmp.stat().st_mtime > max_age_s:
                if tmp.is_dir():
                    shutil.rmtree(tmp, ignore_errors=True)
                else:
                    tmp.unlink()
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
    timeout_s: float = COMPILE_TIMEOUT_S,
    extra_flags: tuple[str, ...] = (),
    use_cache: bool = True,
    check: bool = True,
) -> CompileResult:
    """Statically check, then compile one source.

    `use_cache=False` rebuilds and replaces the cache entry; `check=False` skips the static check and
    ignores the audit's verdict (only for proving that a rejected test kernel would otherwise build).
    """
    reasons = bad_source_reasons(source)
    if reasons:
        try:
            h = kernel_hash(source)
        except (TypeError, AttributeError, UnicodeEncodeError):
            h = ""
        return CompileResult(h, False, None, "", failure_kind="bad_source", message="; ".join(reasons))
    text = normalize_source(source)  # what the check reads is what nvcc compiles
    if check:
        reasons = banned_reasons(text)
        if reasons:
            return CompileResult(
                kernel_hash(source),
                False,
                None,
                "\n".join(reasons),
                failure_kind="static_check",
                message="; ".join(reasons),
            )
    return _compile_checked(text, tuple(archs), tuple(extra_flags), timeout_s, use_cache, check)


def compile_trusted(source: str, archs: tuple[str, ...] = DEFAULT_ARCHS, timeout_s: float = COMPILE_TIMEOUT_S) -> CompileResult:
    """Compile the evaluator's own code (never a candidate's): no contract checks, same cache."""
    return _compile_checked(normalize_source(source), tuple(archs), (), timeout_s, True, False)


def compile_sources(
    sources: list[str],
    archs: tuple[str, ...] = DEFAULT_ARCHS,
    jobs: int | None = None,
    timeout_s: float = COMPILE_TIMEOUT_S,
    extra_flags: tuple[str, ...] = (),
    use_cache: bool = True,
    check: bool = True,
) -> list[CompileResult]:
    """Compile many sources in parallel (one nvcc per worker thread); results keep the input order. The cache
    is brought under its cap afterwards, when this call may have added to it (not after cache hits alone)."""
    find_nvcc()  # fail once, clearly, before any work
    audit.find_objdump()
    _sweep_stale_builds()
    jobs = max(1, jobs or os.cpu_count() or 1)

    def one(source: str) -> CompileResult:
        return compile_source(source, archs, timeout_s, extra_flags, use_cache, check)

    if jobs == 1 or len(sources) <= 1:
        results = [one(s) for s in sources]
    else:
        with ThreadPoolExecutor(max_workers=min(jobs, len(sources))) as pool:
            results = list(pool.map(one, sources))
    if not all(r.cached for r in results):
        compile_cache.evict(state_dir("cache"))
    return results
