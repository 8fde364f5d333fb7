"""The static check: each banned pattern is refused with its reason; comments, strings,
device code and the contract's own runtime calls are not; the test kernels on disk get the
verdict their headers state."""

from __future__ import annotations

import pytest
from adversarial.catalog import adversarial, honest
from hgemm.evaluator.static_check import MAX_SOURCE_BYTES, bad_source_reasons, banned_reasons, check_source

HEAD = "#include <cuda_fp16.h>\n#include <cuda_runtime.h>\n"
RUN_OPEN = (
    'extern "C" int hgemm_run(const __half* A, const __half* B, const __half* Bt, __half* C, int M, int N, '
    "int K, void* workspace, size_t workspace_bytes, cudaStream_t stream) {\n"
)


def with_host(body: str, prelude: str = "") -> str:
    """A minimal valid candidate whose hgemm_run holds `body`."""
    return HEAD + prelude + "\n" + RUN_OPEN + body + "\n  return (int)cudaGetLastError();\n}\n"


BANNED = [
    # (host statement or prelude, words the reason must contain)
    ('system("ls");', "process creation"),
    ('FILE* p = popen("ls", "r");', "process creation"),
    ("if (fork() == 0) {}", "process creation"),
    ('execvp("sh", nullptr);', "process creation"),
    ('FILE* f = fopen("/tmp/x", "w");', "file I/O"),
    ('int fd = open("/dev/nvidia0", 2);', "file I/O"),
    ('std::ofstream out("log.txt");', "file I/O"),
    ("int s = socket(2, 1, 0);", "socket I/O"),
    ("connect(3, nullptr, 0);", "socket I/O"),
    ('void* h = dlopen("libcuda.so", 1);', "dynamic loading"),
    ("std::thread t([] {}); t.join();", "threads"),
    ("pthread_t t; pthread_create(&t, nullptr, nullptr, nullptr);", "threads"),
    ("auto f = std::async([] { return 1; });", "threads"),
    ('const char* v = getenv("HOME");', "environment"),
    ("cudaStream_t s; cudaStreamCreate(&s);", "streams"),
    ("cudaStream_t s; cudaStreamCreateWithPriority(&s, 0, 0);", "streams"),
    ("cudaDeviceReset();", "device control"),
    ("cudaSetDevice(1);", "device control"),
    ("cudaDeviceSetLimit(cudaLimitStackSize, 1 << 20);", "device control"),
    ("cudaDeviceSynchronize();", "host synchronisation"),
    ("cudaStreamSynchronize(stream);", "host synchronisation"),
    ("cudaMemcpy(C, A, 16, cudaMemcpyDeviceToDevice);", "blocking copy"),
    ("cudaMemcpy2D(C, 2, A, 2, 2, 2, cudaMemcpyDefault);", "blocking copy"),
    ("void* p; cudaMalloc(&p, 1 << 20);", "allocation"),
    ("void* p; cudaMallocAsync(&p, 1 << 20, stream);", "allocation"),
    ("cudaFree(workspace);", "allocation"),
    ("void* p = malloc(64);", "heap allocation"),
    (
        "cudaStreamAttrValue v; cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &v);",
        "L2",
    ),
    ("v.accessPolicyWindow.hitRatio = 1.0f;", "L2"),
    ("cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 1 << 20);", "L2"),
    ("cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);", "capture"),
    ("cudaLaunchHostFunc(stream, nullptr, nullptr);", "host callbacks"),
    ('asm volatile("nop");', "inline assembly"),
    ("exit(0);", "process control"),
    ("CUdeviceptr p; cuMemAlloc(&p, 16);", "driver API"),
    ('void* fn; cudaGetDriverEntryPoint("cuMemAlloc_v2", &fn, cudaEnableDefault, nullptr);', "driver entry"),
]

PRELUDES = [
    ("#include <thread>", "header"),
    ("#include <fstream>", "header"),
    ("#include <unistd.h>", "header"),
    ("#include <sys/socket.h>", "header"),
    ("#include <dlfcn.h>", "header"),
    ('#include "/etc/passwd"', "include path"),
    ('#include "../../secrets.h"', "include path"),
    ("__attribute__((constructor)) static void early() {}", "load-time"),
    ("__attribute__((destructor)) static void late() {}", "load-time"),
    ('asm(".globl x");', "inline assembly"),
    ('static int f() { int r; asm("mov %0, 1" : "=r"(r)); return r; }', "inline assembly"),
]


@pytest.mark.parametrize("statement,why", BANNED, ids=[b[0][:40] for b in BANNED])
def test_banned_host_calls_are_rejected_with_their_reason(statement, why):
    reasons = check_source(with_host("  " + statement))
    assert reasons, statement
    line = (
        HEAD.count("\n") + 3
    )  # the statement's line: after the headers, the empty prelude and the signature
    assert any(why.lower() in r.lower() and r.startswith(f"line {line}:") for r in reasons), reasons


@pytest.mark.parametrize("prelude,why", PRELUDES, ids=[p[0][:40] for p in PRELUDES])
def test_banned_top_level_code_is_rejected(prelude, why):
    reasons = check_source(with_host("", prelude=prelude))
    assert any(why.lower() in r.lower() for r in reasons), reasons


EVASIONS = [
    # (code that hides a banned call from a naive scan, words the reason must contain)
    ("auto c = L'a'; system(\"x\");", "process creation"),  # a prefixed char literal is not a separator
    ('auto r = u8R"(")"; system("x");', "process creation"),  # a prefixed raw string with a quote inside
    ('#define PASTE(a, b) a##b\n  PASTE(sys, tem)("ls");', "token pasting"),
    ('sys\\\ntem("ls");', "line splice"),
    ('\\u0073ystem("ls");', "universal character"),
    ('__libc_system("ls");', "libc internals"),
    ("%:include <thread>", "digraphs"),
]


@pytest.mark.parametrize("code,why", EVASIONS, ids=[e[1] for e in EVASIONS])
def test_obfuscated_calls_are_rejected(code, why):
    reasons = check_source(with_host("  " + code))
    assert any(why.lower() in r.lower() for r in reasons), reasons


def test_includes_that_dodge_the_header_list_are_rejected():
    src = with_host(
        "", prelude="#define HDR <thread>\n#include HDR\n#include_next <fstream>\n#import <unistd.h>"
    )
    reasons = check_source(src)
    assert any("computed #include" in r for r in reasons), reasons
    assert any("<fstream>" in r for r in reasons) and any("<unistd.h>" in r for r in reasons), reasons


def test_number_separators_and_literals_do_not_confuse_the_scan():
    body = "  int n = 1'000'000, h = 0x1'f; char c = 'x'; char32_t u = U'y'; const char* s = u8\"a'b\";\n  (void)n;"
    assert check_source(with_host(body)) == []
    assert check_source(with_host(body + ' system("x");'))


def test_comments_and_strings_do_not_trigger():
    src = with_host(
        '  const char* note = "system() fopen cudaMalloc getenv std::thread";  // cudaDeviceSynchronize()\n'
        '  /* dlopen("x"); fork(); cudaStreamCreate(&s);\n     exit(1); */\n'
        "  char c = '(';\n"
        '  const char* raw = R"doc(popen("sh") and asm("nop"))doc";\n'
        "  (void)note; (void)c; (void)raw;",
        prelude="// #include <thread>\n/* #include <fstream> */",
    )
    assert check_source(src) == []


def test_device_code_and_allowed_runtime_calls_pass():
    prelude = """
#include <cstdio>
#include <stdint.h>
#define MY_DEVICE __device__ __forceinline__
namespace detail {
struct Tile {
  __device__ uint32_t lane() const { uint32_t r; asm volatile("mov.u32 %0, %%laneid;" : "=r"(r)); return r; }
};
MY_DEVICE void fence() { asm volatile("fence.proxy.async;" ::: "memory"); }
}  // namespace detail
template <int N>
__global__ void kern(float* out) {
  if (threadIdx.x == 0) printf("block %d\\n", blockIdx.x);
  float v;
  asm("mov.f32 %0, 1.0;" : "=f"(v));
  int write = 1, read = 2, open = 3;  // plain variables named like libc functions
  out[threadIdx.x] = v + write + read + open;
}
"""
    body = """
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaDeviceProp prop; cudaGetDeviceProperties(&prop, dev);
  cudaFuncSetAttribute(kern<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
  void* encode = nullptr;
  cudaDriverEntryPointQueryResult q;
  cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &encode, cudaEnableDefault, &q);
  cudaMemsetAsync(workspace, 0, 1024, stream);
  cudaMemcpyAsync(workspace, A, 64, cudaMemcpyDeviceToDevice, stream);
  cudaLaunchConfig_t cfg = {}; cfg.stream = stream;
  cudaLaunchKernelEx(&cfg, kern<1>, (float*)workspace);
  kern<2><<<1, 32, 0, stream>>>((float*)workspace);
  (void)cudaPeekAtLastError();"""
    assert check_source(with_host(body, prelude=prelude)) == []


def test_host_device_function_with_guarded_ptx_passes():
    prelude = """
__host__ __device__ inline int lane_or_zero() {
#if defined(__CUDA_ARCH__)
  int r; asm volatile("mov.u32 %0, %%laneid;" : "=r"(r)); return r;
#else
  return 0;
#endif
}"""
    assert check_source(with_host("  (void)lane_or_zero();", prelude=prelude)) == []


def test_bad_sources_are_named():
    assert "empty" in check_source("")[0]
    assert "empty" in check_source(" \n\t ")[0]
    assert "UTF-8" in check_source(b"\xff\xfe int hgemm_run")[0]
    assert "UTF-8" in check_source("int x = 1; // \ud800")[0]
    assert "NUL" in check_source('extern "C" int hgemm_run() { return 0; }\x00')[0]
    assert "hgemm_run" in check_source("__global__ void k() {}")[0]
    assert "hgemm_run" in check_source('extern "C" int hgemm_run(int);  // declared, never defined')[0]
    assert "extern" in check_source("int hgemm_run(int a) { return a; }")[0]
    big = with_host("") + "// " + "x" * MAX_SOURCE_BYTES
    assert "bytes" in check_source(big)[0]


def test_extern_c_block_counts():
    src = HEAD + 'extern "C" {\nint hgemm_run(int M) { return M; }\n}\n'
    assert bad_source_reasons(src) == []
    assert bad_source_reasons(src.encode()) == []


def test_reasons_name_the_line_and_dedupe():
    src = with_host('  system("a"); system("b");\n  system("c");')
    reasons = banned_reasons(src)
    assert len(reasons) == 2
    assert reasons[0].startswith("line 5:") and reasons[1].startswith("line 6:")


@pytest.mark.parametrize("kernel", adversarial(), ids=lambda k: k.name)
def test_adversarial_kernels_get_their_static_verdict(kernel):
    reasons = check_source(kernel.source)
    if kernel.static:
        assert reasons, f"{kernel.name} ({kernel.summary}) was accepted"
    else:
        assert reasons == [], f"{kernel.name} must reach the evaluator: {reasons}"


@pytest.mark.parametrize("kernel", honest(), ids=lambda k: k.name)
def test_honest_kernels_pass(kernel):
    assert check_source(kernel.source) == []
