"""Compiling candidates with real nvcc: every test kernel builds for sm_90a and sm_80 (or is
refused statically first), the audit's verdict is cached with the entry, the cache hits, compiler
errors are kept verbatim, ptxas reports are parsed, batches compile in parallel in order, and a
missing nvcc is a clear NoCompiler.

All test kernels are compiled once per session into one shared cache (conftest's `compiled`)."""

from __future__ import annotations

import json
import multiprocessing
import shutil
import subprocess
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from adversarial.catalog import adversarial, honest
from hgemm.evaluator.compile import (
    CompileResult,
    compile_source,
    compile_sources,
    cutlass_include,
    find_nvcc,
    nvcc_flags,
    object_command,
    parse_ptxas,
)

from hgemm.core.errors import NoCompiler
from hgemm.core.record import kernel_hash

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")

KERNELS = adversarial() + honest()
BUILT = [k for k in KERNELS if k.builds and k.expect != ("compile_error",)]
UNBUILDABLE = [k for k in KERNELS if k.builds and k.expect == ("compile_error",)]  # device-side launches
ARCHS = ("sm_90a", "sm_80")

SMALL = """#include <cuda_fp16.h>
#include <cuda_runtime.h>
__global__ void fill(__half* C, int n) {
    __shared__ float s[64];
    s[threadIdx.x % 64] = threadIdx.x;
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) C[i] = __float2half(s[(threadIdx.x + 1) % 64]);
}
extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, int K,
                         void* workspace, size_t workspace_bytes, cudaStream_t stream) {
    fill<<<(M * N + 255) / 256, 256, 0, stream>>>(C, M * N);
    return (int)cudaGetLastError();
}
"""


@pytest.mark.parametrize("kernel", UNBUILDABLE, ids=lambda k: k.name)
def test_a_cheat_the_toolchain_cannot_build_fails_to_compile_even_unchecked(kernel, compiled):
    r = compiled[kernel.name]
    assert not r.ok and r.failure_kind == "compile_error" and r.lib_path is None, (kernel.name, r.log)


@pytest.mark.parametrize("kernel", BUILT, ids=lambda k: k.name)
def test_every_test_kernel_builds_for_both_archs(kernel, compiled):
    r = compiled[kernel.name]
    assert r.ok, f"{kernel.name}: {r.message}\n{r.log}"
    assert r.failure_kind is None and r.kernel_hash == kernel_hash(kernel.source)
    assert r.lib_path and Path(r.lib_path).is_file()
    if kernel.name != "launches_nothing":  # the one kernel file without a kernel
        assert set(r.resources) == set(ARCHS)
        assert {k.arch for k in r.kernels} == set(ARCHS)
        for res in r.resources.values():
            assert res.registers and res.registers > 0
            assert res.spill_stores == 0 and res.spill_loads == 0
            assert res.compile_seconds and res.compile_seconds > 0


def test_checked_batch_refuses_before_compiling_and_hits_the_cache(compiled, compile_home, monkeypatch):
    monkeypatch.setenv("HGEMM_HOME", str(compile_home))
    results = compile_sources([k.source for k in KERNELS], archs=ARCHS)
    assert [r.kernel_hash for r in results] == [kernel_hash(k.source) for k in KERNELS]  # order kept
    for kernel, r in zip(KERNELS, results):
        if kernel.static:
            assert r.failure_kind == "static_check" and not r.ok and r.lib_path is None
            assert r.message and "not allowed" in r.message
        elif kernel.expect == ("compile_error",):  # nvcc refuses it, checked or not
            assert r.failure_kind == "compile_error" and not r.ok and r.lib_path is None, kernel.name
        elif kernel.expect == ("object_audit",):  # the verdict came with the cache entry: nothing rebuilt
            assert r.failure_kind == "object_audit" and r.lib_path is None and r.cached, kernel.name
            assert r.message and r.audit_reasons and r.message == "; ".join(r.audit_reasons)
        else:
            assert r.ok and r.cached, kernel.name
            assert r.lib_path == compiled[kernel.name].lib_path
            assert r.resources == compiled[kernel.name].resources
            assert not r.audit_reasons and r.audit["library_bytes"] > r.audit["object_bytes"] > 0


def test_ptxas_resources_match_the_sources(compiled):
    # wmma: 64x40 + 32x72 halves + 64x68 floats of static shared memory
    wmma = compiled["wmma_16x16x16"].resources
    assert (
        wmma["sm_90a"].shared_bytes == wmma["sm_80"].shared_bytes == 64 * 40 * 2 + 32 * 72 * 2 + 64 * 68 * 4
    )
    # smem_tiled: two 32x33 float tiles
    assert compiled["smem_tiled"].resources["sm_80"].shared_bytes == 2 * 32 * 33 * 4
    # cuda_malloc has two kernels; the reported one is the one with the most registers
    kernels = [k for k in compiled["cuda_malloc"].kernels if k.arch == "sm_80"]
    assert len(kernels) == 2
    assert compiled["cuda_malloc"].resources["sm_80"].registers == max(k.registers for k in kernels)
    assert compiled["launches_nothing"].resources == {}


def test_second_compile_is_a_cache_hit(hgemm_home):
    first = compile_source(SMALL, archs=("sm_80",))
    assert first.ok and not first.cached
    second = compile_source(SMALL, archs=("sm_80",))
    assert second.cached and second.seconds < 1.0
    assert second.lib_path == first.lib_path and second.resources == first.resources
    assert second.log == first.log and second.compile_seconds == first.compile_seconds
    # the same source with other line endings and trailing blanks is the same kernel
    assert compile_source(SMALL.replace("\n", "  \r\n"), archs=("sm_80",)).cached
    entry = Path(first.lib_path).parent
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["ok"] and meta["resources"]["sm_80"]["shared_bytes"] == 256
    assert not list((hgemm_home / "cache").glob("tmp-*")), "a build directory was left behind"
    assert sorted(p.name for p in entry.iterdir()) == ["kernel.so", "meta.json"]  # no source or object


def _compile_in_child(source: str) -> tuple[bool, bool]:
    r = compile_source(source, archs=("sm_80",))
    return r.ok, r.cached


def test_one_build_per_source_when_callers_race(hgemm_home):
    """Threads of one batch and separate processes given the same new source at once: nvcc runs once, the
    others wait for that build and take it from the cache."""
    threads = compile_sources([SMALL, SMALL, SMALL], archs=("sm_80",), jobs=3)
    assert all(r.ok for r in threads) and sorted(r.cached for r in threads) == [False, True, True]
    assert len({r.lib_path for r in threads}) == 1
    other = SMALL.replace("s[64]", "s[96]")  # a second new source, for processes this time
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=ctx) as pool:
        procs = list(pool.map(_compile_in_child, [other, other]))
    assert all(ok for ok, _ in procs) and sorted(cached for _, cached in procs) == [False, True]


def test_a_held_build_lock_delays_a_build_but_never_stops_it(hgemm_home):
    from hgemm.evaluator.compile import _build_lock

    with _build_lock("k" * 64, wait_s=60):
        t0 = time.monotonic()
        with _build_lock("k" * 64, wait_s=0.3):  # another holder: wait, then go on without it
            waited = time.monotonic() - t0
        with _build_lock("j" * 64, wait_s=60):  # another key: no wait
            other = time.monotonic() - t0 - waited
    assert 0.3 <= waited < 5 and other < 0.2


def test_a_cache_without_locks_still_builds(hgemm_home, monkeypatch):
    import fcntl

    def no_locks(fd, op):
        raise OSError(37, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    r = compile_source(SMALL.replace("s[64]", "s[80]"), archs=("sm_80",))
    assert r.ok and not r.cached


def test_other_flags_miss_the_cache_and_broken_entries_are_rebuilt(hgemm_home):
    first = compile_source(SMALL, archs=("sm_80",))
    other = compile_source(SMALL, archs=("sm_80",), extra_flags=("-DHGEMM_VARIANT=1",))
    assert not other.cached and other.lib_path != first.lib_path
    Path(first.lib_path).unlink()  # a damaged entry: the library is gone
    again = compile_source(SMALL, archs=("sm_80",))
    assert again.ok and not again.cached and Path(again.lib_path).is_file()
    forced = compile_source(SMALL, archs=("sm_80",), use_cache=False)
    assert forced.ok and not forced.cached and forced.lib_path == again.lib_path


def test_compiler_error_is_kept_verbatim(hgemm_home, tmp_path):
    bad = SMALL.replace("C[i] = __float2half", "C[i] = no_such_function")
    r = compile_source(bad, archs=("sm_80",))
    assert not r.ok and r.failure_kind == "compile_error" and r.lib_path is None
    assert "no_such_function" in r.message and "error" in r.message
    # the log is exactly what nvcc prints for the same file and flags
    (tmp_path / "kernel.cu").write_text(bad)
    (tmp_path / "keep").mkdir()
    cmd = object_command(find_nvcc(), nvcc_flags(("sm_80",)))
    direct = subprocess.run(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert direct.returncode != 0
    assert r.log == direct.stdout
    cached = compile_source(bad, archs=("sm_80",))  # errors are cached too
    assert cached.cached and cached.failure_kind == "compile_error" and cached.log == r.log


def test_timeout_is_reported_and_not_cached(hgemm_home):
    r = compile_source(SMALL, archs=("sm_90a", "sm_80"), timeout_s=0.05)
    assert r.failure_kind == "timeout" and not r.ok and "0.05" in r.message
    assert not list((hgemm_home / "cache").rglob("meta.json"))
    assert not list((hgemm_home / "cache").glob("tmp-*"))


def test_bad_and_rejected_sources_never_reach_nvcc(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvcc anywhere: these must not need it
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    assert compile_source("").failure_kind == "bad_source"
    assert compile_source("__global__ void k() {}").failure_kind == "bad_source"
    system_call = next(k for k in KERNELS if k.name == "system_call")
    r = compile_source(system_call.source)
    assert r.failure_kind == "static_check" and "system" in r.message and "line" in r.log


def test_missing_nvcc_raises_no_compiler(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    with pytest.raises(NoCompiler, match="nvcc"):
        compile_source(SMALL)
    with pytest.raises(NoCompiler, match="nvcc"):
        compile_sources([SMALL, SMALL])


def test_cutlass_headers_are_on_the_include_path():
    include = cutlass_include()
    if include is None:
        pytest.skip("nvidia-cutlass is not installed")
    assert (Path(include) / "cute" / "tensor.hpp").is_file()
    assert f"-I{include}" in nvcc_flags(ARCHS)


def test_result_round_trips_through_json(compiled):
    r = compiled["wmma_16x16x16"]
    back = CompileResult.from_dict(json.loads(json.dumps(r.to_dict())))
    assert back == r


PTXAS_LOG = """ptxas info    : 0 bytes gmem
ptxas info    : Function properties for _Z6helperPf
    48 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Compiling entry function '_Z4big1Pf' for 'sm_90a'
ptxas info    : Function properties for _Z4big1Pf
    16 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 16 bytes stack frame, 98304 bytes smem
ptxas info    : Compile time = 72.381 ms
ptxas info    : Compiling entry function '_Z5smallPf' for 'sm_90a'
ptxas info    : Function properties for _Z5smallPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
ptxas info    : Compiling entry function '_Z5smallPf' for 'sm_80'
ptxas info    : Function properties for _Z5smallPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers, 360 bytes cmem[0]
"""


def test_parse_ptxas_per_kernel_and_arch():
    kernels = parse_ptxas(PTXAS_LOG)
    assert [(k.name, k.arch) for k in kernels] == [
        ("_Z4big1Pf", "sm_90a"),
        ("_Z5smallPf", "sm_90a"),
        ("_Z5smallPf", "sm_80"),
    ]
    big = kernels[0]
    assert (big.registers, big.shared_bytes, big.stack_bytes, big.spill_stores, big.spill_loads) == (
        168,
        98304,
        16,
        4,
        12,
    )
    assert big.barriers == 1
    assert kernels[2].registers == 10 and kernels[2].shared_bytes == 0
