"""The object audit: the import allow-list and its spellings, the ELF reader on hostile input,
ptxas' device-memory report, and with real nvcc: our own families (default and hand-picked
configurations) pass the whole pipeline, the object that was audited is the one linked, a refused
object is never linked, and the verdict comes back from the cache."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from adversarial.catalog import adversarial
from hgemm.evaluator import audit
from hgemm.evaluator.audit import (
    ALLOWED_IMPORTS,
    MAX_DEVICE_STATIC_BYTES,
    MAX_LIBRARY_BYTES,
    Baseline,
    ElfError,
    audit_object,
    device_static_bytes,
    import_allowed,
    read_elf,
)

from hgemm.core.shape import Shape

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


def test_the_allow_list_takes_launch_calls_and_helpers_only():
    for name in ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaFuncSetAttribute", "__cudaRegisterFunction",
                 "__cxa_guard_acquire", "memcpy", "sqrtf", "atexit", "cudaGetDriverEntryPointByVersion"):  # fmt: skip
        assert import_allowed(name), name
    # the fortified, finite-math and versioned spellings of an allowed name
    assert (
        import_allowed("__printf_chk") and import_allowed("__memcpy_chk") and import_allowed("__log2_finite")
    )
    assert import_allowed("memcpy@GLIBC_2.14")
    # <iostream> (CuTe includes it): g++ before 13 registers an initialiser, g++ 13 on calls libstdc++'s own
    assert import_allowed("_ZNSt8ios_base4InitC1Ev") and import_allowed("_ZSt21ios_base_library_initv")
    for name in ("system", "dlsym", "getenv", "__environ", "environ", "open", "open64", "fopen64", "remove",
                 "rename", "syscall", "cudaMalloc", "cudaDeviceSetLimit", "cudaStreamCreate", "cudaGetExportTable",
                 "cuCtxSetLimit", "cuTensorMapEncodeTiled", "__tls_get_addr", "_Znwm", "pthread_create",
                 "__cudaRegisterManagedVar", "cudaLaunchKernel_ptsz", "__system_chk", "system@GLIBC_2.2.5"):  # fmt: skip
        assert not import_allowed(name), name
    assert not any(n.startswith(("cudaMalloc", "cudaStream", "cudaEvent", "cudaGraph", "cu")) and not n.startswith(
        "cuda") for n in ALLOWED_IMPORTS)  # fmt: skip


def test_garbage_objects_are_refused_not_crashed_on(tmp_path):
    for data in (b"", b"\x7fELF", b"\x7fELF\x02\x01" + b"\0" * 58, b"#!/bin/sh\n" * 10):
        with pytest.raises(ElfError):
            read_elf(data)
    obj = tmp_path / "kernel.o"
    obj.write_bytes(b"\x7fELF\x02\x01\x01" + b"\xff" * 200)
    report = audit_object(obj, Baseline(1, 0))
    assert report.reasons and "not a readable ELF" in report.reasons[0]


def test_device_memory_is_the_largest_ptxas_report_and_only_ptxas_can_report_it():
    log = (
        "ptxas info    : 4096 bytes gmem\n"
        "kernel.cu(3): warning: ptxas info : 0 bytes gmem\n"  # text a candidate can make the compiler print
        "ptxas info    : 1073745920 bytes gmem, 32768 bytes cmem[3]\n"
    )
    assert device_static_bytes(log) == 1073745920
    assert device_static_bytes("kernel.cu(3): ptxas info : 99999999 bytes gmem") == 0
    assert device_static_bytes("") == 0


# ----------------------------------------------------------------------------------- with real nvcc

SHAPES = [(1024, 1024, 1024), (4096, 4096, 4096), (200, 136, 264), (12288, 12288, 256), (256, 4096, 8192)]
# Hand-picked configurations of every family, beyond the defaults: each switch that changes host code.
WGMMA_BASE = {"bm": 128, "bn": 256, "stages": 4, "consumers": 2, "group_m": 8, "persistent": 1, "epilogue": 1,
              "cluster_m": 1, "pingpong": 0}  # fmt: skip
PICKED = {
    "mma_ms": [{"BM": 64, "BN": 64, "BK": 32, "WARPS_M": 2, "WARPS_N": 2, "STAGES": 3, "RASTER": 1}],
    "mma_splitk": [
        {"BM": 64, "BN": 128, "BK": 32, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 3, "RASTER": 4, "SPLIT_K": 8}
    ],
    "small": [{"BM": 32, "BN": 32, "WARPS_M": 1, "WARPS_N": 2, "WARPS_K": 2}],
    "wgmma": [
        {**WGMMA_BASE, "bn": 128, "stages": 6, "cluster_m": 2},
        {**WGMMA_BASE, "bn": 128, "stages": 4, "pingpong": 1},
        {
            **WGMMA_BASE,
            "bn": 128,
            "stages": 6,
            "epilogue": 0,
            "persistent": 0,
            "split_k": 4,
            "split_dsmem": 1,
        },
        {**WGMMA_BASE, "bn": 128, "epilogue": 0, "split_k": 4},
        {**WGMMA_BASE, "bn": 128, "stream_k": 1},
        {**WGMMA_BASE, "bm": 192, "bn": 128, "consumers": 3, "cluster_m": 2},
    ],
}


def family_sources() -> dict[str, str]:
    """Every family's default configuration on a few shapes, plus the hand-picked ones (deduplicated)."""
    from hgemm.evaluator.kernels import all_families

    sources: dict[str, str] = {}
    for fam in all_families():
        for shape in SHAPES:
            params = fam.default_params(Shape(*shape))
            if params is not None:
                sources.setdefault(fam.render(params), f"{fam.name} default {'x'.join(map(str, shape))}")
        for params in PICKED.get(fam.name, []):
            assert fam.check(fam.repair(params), Shape(1536, 1024, 4096)) is None, params
            sources.setdefault(fam.render(fam.repair(params)), f"{fam.name} {params}")
    return {name: src for src, name in sources.items()}


@needs_nvcc
@pytest.mark.slow
def test_our_families_pass_the_audit(compile_home, monkeypatch):
    from hgemm.evaluator.compile import compile_sources

    monkeypatch.setenv("HGEMM_HOME", str(compile_home))
    sources = family_sources()
    assert {name.split()[0] for name in sources} >= {"mma_ms", "mma_splitk", "small", "wgmma"}
    results = compile_sources(list(sources.values()), archs=("sm_90a", "sm_80"))
    for name, r in zip(sources, results):
        assert r.ok and r.failure_kind is None, f"{name}: {r.failure_kind}: {r.message}\n{r.log[-2000:]}"
        assert r.audit["library_bytes"] < MAX_LIBRARY_BYTES // 8, name
        assert r.audit["device_static_bytes"] < MAX_DEVICE_STATIC_BYTES // 64, name
        assert r.audit["load_time_entries"] == 1, name  # nvcc's registration, nothing else
    wgmma = [r for name, r in zip(sources, results) if name.startswith("wgmma")]
    assert all("cudaGetDriverEntryPointByVersion" in r.audit["imports"] for r in wgmma)


@needs_nvcc
def test_the_audited_object_is_the_one_linked_and_a_refused_one_is_never_linked(hgemm_home, monkeypatch):
    from hgemm.evaluator import compile as comp

    seen: dict[str, bytes] = {}
    real = audit.audit_build

    def spy(obj: Path, *args, **kwargs):
        elf = read_elf(obj.read_bytes())
        seen["fatbin"] = next(elf.content(s) for s in elf.sections if s.name == ".nv_fatbin")
        return real(obj, *args, **kwargs)

    monkeypatch.setattr(audit, "audit_build", spy)
    honest = Path(__file__).parent / "honest" / "smem_tiled.cu"
    r = comp.compile_source(honest.read_text(), archs=("sm_80",))
    assert r.ok and r.lib_path
    library = Path(r.lib_path).read_bytes()
    assert (
        len(seen["fatbin"]) > 1000 and seen["fatbin"] in library
    )  # the device code audited is the code loaded

    links = []
    real_link = comp.link_command
    monkeypatch.setattr(comp, "link_command", lambda *a: links.append(a) or real_link(*a))
    static_ctor = next(k for k in adversarial() if k.name == "static_constructor_object")
    refused = comp.compile_source(static_ctor.source, archs=("sm_80",))
    assert refused.failure_kind == "object_audit" and refused.lib_path is None and not links
    assert "loads" in refused.message
    assert len(list((hgemm_home / "cache").rglob("kernel.so"))) == 1  # the honest kernel's library only
    again = comp.compile_source(static_ctor.source, archs=("sm_80",))
    assert again.cached and again.failure_kind == "object_audit" and again.message == refused.message
    assert not links  # the verdict came from the cache
    built = comp.compile_source(
        static_ctor.source, archs=("sm_80",), check=False
    )  # tests only: build it anyway
    assert built.ok and built.lib_path and links and built.audit_reasons == refused.audit_reasons


def _host_text(obj: Path) -> bytes:
    elf = read_elf(obj.read_bytes())
    return b"".join(elf.content(s) for s in elf.sections if s.flags & 0x4)  # executable sections


@needs_nvcc
def test_system_call_bytes_that_a_layout_happened_to_make_are_built_away(hgemm_home, monkeypatch, tmp_path):
    """Where the only fault is a system call's bytes inside other host instructions, the object is built again with
    another host layout and the clean build is the one linked; bytes every layout keeps are refused as before.
    Stands in for g++ 13's `int 0x80` in a wgmma launcher with three bytes of this kernel's host code that the
    first layout has and the second has not, and three that every layout has."""
    import subprocess

    from hgemm.evaluator import compile as comp

    honest = Path(__file__).parent / "honest" / "smem_tiled.cu"
    texts = []
    for extra in ((), *comp.HOST_RELAYOUTS):
        work = tmp_path / f"layout{len(texts)}"
        work.mkdir()
        shutil.copy(honest, work / "kernel.cu")
        cmd = comp.object_command(comp.find_nvcc(), comp.nvcc_flags(("sm_80",), extra), "kernel.cu", None)
        subprocess.run(cmd, cwd=work, check=True, capture_output=True)
        texts.append(_host_text(work / "kernel.o"))
    first, second = texts[:2]
    assert first != second  # the relayout moves the host code
    pattern = next(first[i : i + 3] for i in range(len(first) - 2) if first[i : i + 3] not in second)
    monkeypatch.setattr(audit, "_HIDDEN_SYSCALLS", {pattern: "test pattern"})

    links = []
    real_link = comp.link_command
    monkeypatch.setattr(comp, "link_command", lambda *a: links.append(a) or real_link(*a))
    r = comp.compile_source(honest.read_text(), archs=("sm_80",))
    assert r.ok and r.lib_path and len(links) == 1, r.log[-2000:]
    assert r.audit["host_relayout"] == " ".join(comp.HOST_RELAYOUTS[0]) and not r.audit_reasons
    assert "built again with" in r.log

    # Bytes every layout keeps stay refused.
    kept = next(first[i : i + 3] for i in range(len(first) - 2) if all(first[i : i + 3] in t for t in texts))
    monkeypatch.setattr(audit, "_HIDDEN_SYSCALLS", {kept: "test pattern"})
    refused = comp.compile_source(honest.read_text(), archs=("sm_80",), use_cache=False)
    assert refused.failure_kind == "object_audit" and refused.lib_path is None
    assert refused.log.count("built again with") == len(comp.HOST_RELAYOUTS)


# ------------------------------------------------------------- host objects built by g++ alone (fast)

HOST_OBJECTS = [
    # (host C++ code, words a reason must hold; None: accepted)
    ('extern "C" int hgemm_run() { return 0; }', None),
    (
        'int g_sms = 0;\nextern "C" int hgemm_run() { return ++g_sms; }',
        None,
    ),  # a global variable has a C name
    ('char** environ = 0;\nextern "C" int hgemm_run() { return environ != 0; }', "C symbol `environ`"),
    (
        'extern "C" int helper(int x) { return x + 1; }\nextern "C" int hgemm_run() { return helper(1); }',
        "C symbol `helper`",
    ),
    (
        '#include <cmath>\nextern "C" int hgemm_run(int n) { return (int)std::ceil(std::sqrt((double)n)); }',
        None,
    ),
    ('#include <cstdlib>\nextern "C" int hgemm_run() { return system("id"); }', "imports `system`"),
    ('extern char** environ;\nextern "C" int hgemm_run() { return environ[0][0]; }', "imports `environ`"),
    ('extern "C" int hgemm_run() { static thread_local int n; return ++n; }', "thread-local"),
    (
        '#include <cstddef>\nextern "C" size_t strlen(const char*) { return 0; }\nextern "C" int hgemm_run() { return 0; }',
        "C symbol `strlen`",
    ),
    (
        '#include <cstddef>\nvoid* operator new(std::size_t) { static char b[64]; return b; }\nextern "C" int hgemm_run() { return 0; }',
        "operator new",
    ),
    (
        'static int f() { return 1; }\nextern "C" int (*pick())() { return f; }\n'
        'extern "C" int g() __attribute__((ifunc("pick")));\nextern "C" int hgemm_run() { return g(); }',
        "IFUNC",
    ),
    (
        'int probe();\nstatic int warm = probe();\nextern "C" int hgemm_run() { return warm; }',
        "loads (_GLOBAL__sub_I",
    ),
    (
        'static int n;\n__attribute__((constructor)) static void early() { n = 1; }\nextern "C" int hgemm_run() { return n; }',
        "loads",
    ),
    (
        '__attribute__((section(".ctors"))) void (*p)() = 0;\nextern "C" int hgemm_run() { return 0; }',
        "`.ctors`",
    ),
    (
        '__attribute__((section(".hg_payload"), used)) static const char blob[] = "x";\nextern "C" int hgemm_run() { return 0; }',
        "`.hg_payload`",
    ),
    (
        'extern "C" int hgemm_run() { long r; asm volatile("syscall" : "=a"(r) : "a"(39)); return (int)r; }',
        "`syscall` instruction",
    ),
    ('extern "C" int hgemm_run() { asm volatile("int $0x3"); return 0; }', "`int3` instruction"),
    ('extern "C" unsigned hgemm_run(unsigned x) { return x * 0x00c3050fu; }', "bytes of a `syscall`"),
    (
        'static char big[20 << 20];\nextern "C" int hgemm_run(int i) { big[i] = 1; return big[i / 2]; }',
        "host static data",
    ),
    (
        '#include <iostream>\nextern "C" int hgemm_run() { return 0; }',
        None,
    ),  # g++ < 13: iostream's initialiser
    (
        '#include <iostream>\nint probe();\nstatic int warm = probe();\nextern "C" int hgemm_run() { return warm; }',
        "which uses",
    ),
]


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH")
@pytest.mark.parametrize(
    "code,why", HOST_OBJECTS, ids=lambda v: (v or "accepted")[:48] if isinstance(v, str) else v
)
def test_host_objects_are_judged_by_what_they_hold(code, why, tmp_path):
    import subprocess

    (tmp_path / "x.cpp").write_text(code + "\n")
    subprocess.run(
        ["g++", "-O3", "-std=c++17", "-fPIC", "-c", "x.cpp", "-o", "x.o"], cwd=tmp_path, check=True
    )
    report = audit_object(tmp_path / "x.o", Baseline(0, 0))  # plain g++: no nvcc registration to allow for
    if why is None:
        assert report.reasons == [], report.reasons
    else:
        assert any(why in r for r in report.reasons), report.reasons
