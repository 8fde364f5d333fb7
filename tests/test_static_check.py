"""The static check: each banned pattern is refused with its reason; comments, strings,
device code and the contract's own runtime calls are not; its lexer reads the text nvcc compiles
the way the C++ translation phases do (splices, lone carriage returns, raw strings, literal
concatenation and escapes, header names); the same rules judge the preprocessed translation unit;
the test kernels on disk get the verdict their headers state."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from adversarial.catalog import adversarial, honest
from hgemm.evaluator.static_check import (
    MAX_SOURCE_BYTES,
    bad_source_reasons,
    banned_reasons,
    candidate_lines,
    check_source,
    expanded_reasons,
)

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
    ('#include "/etc/passwd"', "quoted #include"),
    ('#include "../../secrets.h"', "quoted #include"),
    ('#include "kernel.cu"', "quoted #include"),
    ("#include </etc/passwd>", "path trick"),
    ("#include <../../secrets.h>", "path trick"),
    ("#include <./fstream>", "path trick"),
    ("#include <cuda_runtime.h/../../../etc/passwd>", "path trick"),
    ("#include <mutex>", "header"),
    ("__cudaRegisterFatBinary(nullptr);", "nvcc's own"),
    ("#if __has_include(</etc/shadow>)\n#endif", "path trick"),
    ('#if __has_include("secrets.h")\n#endif', "__has_include"),
    ("#embed </etc/passwd>", "#embed"),
    ('#line 1 "cuda_runtime.h"', "#line"),
    ('# 1 "cuda_runtime.h"', "#line"),
    ("#pragma redefine_extname lookup dlsym", "pragma"),
    ('#pragma push_macro("x")', "pragma"),
    ('#pragma GCC dependency "/etc/passwd"', "pragma"),
    ('_Pragma("weak system")', "pragma"),
    ("#define P(x) _Pragma(#x)", "_Pragma"),
    ('static int f(const char*) __attribute__((weakref("system")));', "aliasing"),
    ('extern "C" int g() __attribute__((alias("hgemm_run")));', "aliasing"),
    ('extern "C" int h() __attribute__((__ifunc__("pick")));', "aliasing"),
    ("[[gnu::constructor]] static void early() {}", "load-time"),
    ('__attribute__((section(".init_array"))) static void (*p)() = 0;', "load-time"),
    ("#define ATTR __attribute__((__constructor__))", "load-time"),
    ("extern char** __environ;", "environment"),
    ('__host__ __device__ void f() { asm(".incbin \\"/etc/passwd\\""); }', ".incbin"),
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
    assert any("#include_next" in r for r in reasons) and any("#import" in r for r in reasons), reasons


@pytest.mark.parametrize(
    "statement,why",
    [
        ('int fd = (open)("/proc/self/environ", 0);', "file I/O"),
        ('int fd = (::open)("/proc/self/environ", 0);', "file I/O"),
        ("auto f = &open; (void)f;", "file I/O"),
        ('FILE* f = fopen64("/tmp/x", "w");', "file I/O"),
        ('int fd = __open_2("/tmp/x", 0);', "file I/O"),
        ('remove("/tmp/x");', "file I/O"),
        ('rename("/tmp/a", "/tmp/b");', "file I/O"),
        ("char** e = __environ;", "environment"),
        ("char** e = _environ;", "environment"),
        ("void* p = __builtin_frame_address(0);", "stack"),
        (
            'void* f = nullptr; cudaGetDriverEntryPoint("cuCtxSet" "Limit", &f, cudaEnableDefault, nullptr);',
            "driver",
        ),
        (
            'void* f = nullptr; cudaGetDriverEntryPoint("cuCtx\\123etLimit", &f, cudaEnableDefault, nullptr);',
            "driver",
        ),
        ('void* f = nullptr; cudaGetDriverEntryPoint("cuCtx\\x53" "etLimit", &f, 0, nullptr);', "driver"),
        (
            "char n[] = {'c', 'u', 0}; void* f; cudaGetDriverEntryPoint(n, &f, cudaEnableDefault, nullptr);",
            "literal",
        ),
        ("auto get = &cudaGetDriverEntryPointByVersion; (void)get;", "literal"),
        (
            'void* f; cudaGetDriverEntryPoint("cu"\n#if 1\n  "CtxSetLimit", &f, 0, nullptr);\n#endif',
            "cuCtxSetLimit",
        ),
        ("cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0);", "driver API"),
        ("cudaStreamCaptureStatus s; cudaStreamIsCapturing(stream, &s);", "capture"),
        ('cudaLibrary_t lib; cudaLibraryLoadFromFile(&lib, "/tmp/x", 0, 0, 0, 0, 0, 0);', "loading code"),
    ],
    ids=lambda v: v[:40] if isinstance(v, str) else v,
)
def test_libc_variants_and_built_names_are_rejected(statement, why):
    reasons = check_source(with_host("  " + statement))
    assert any(why.lower() in r.lower() for r in reasons), reasons


@pytest.mark.parametrize(
    "code,why",
    [
        # a lone carriage return ends the // comment for the compiler: the check reads the same normalised text
        ('  // note\r  system("ls");', "process creation"),
        ('  // note\r\n  system("ls");', "process creation"),
        # a splice continues a // comment onto the next line (the call is a comment: nothing to refuse) ...
        ('  // note \\\n  system("ls");', None),
        # ... but a splice in a directive name still makes the directive
        ("#inc\\\nlude <thread>", "header"),
        ('  const char* s = "a\\\n"; system("ls");', "process creation"),
        # a raw string hides only what the compiler hides
        ('  const char* r = R"x( system("a") )x"; system("b");', "process creation"),
        ('  const char* r = R"x(\nmov.u32 %0, 1;\n)x"; (void)r;', None),
        # a raw string spanning lines is printed verbatim by the preprocessor: no line of it may pose as a marker
        ('  const char* r = R"x(\n# 1 "cuda_runtime.h"\n)x"; (void)r;', "line marker"),
        ('  const char* r = R"x(\n#include <thread>\n)x"; (void)r;', "line marker"),
        ('  const char* r = R"x( )x\\\n" )x"; system("b");', "raw string"),
        # an identifier that merely ends in R is no raw-string prefix
        ('  int xR = 0; const char* s = xR"(" ; system("ls"); //)"; (void)s;', "process creation"),
        ('  int fooR = 1; (void)fooR"x("; system("ls"); //)x";', "process creation"),
        # a digit separator is not a character literal; a quote after a number that is not one is
        ("  int n = 1'000; system(\"ls\"); char c = '1';", "process creation"),
        # header names hold no comments or literals
        ('#include <cuda_fp16.h> // \'\n  system("ls");', "process creation"),
        ("  ??=define X 1", "trigraph"),
        ("  int a = 1; // ??/\n  int b = 2;", "trigraph"),
    ],
)
def test_the_lexer_follows_the_translation_phases(code, why):
    reasons = check_source(with_host(code))
    if why is None:
        assert reasons == [], reasons
    else:
        assert any(why.lower() in r.lower() for r in reasons), reasons


def test_reasons_name_lines_of_the_text_nvcc_compiles():
    src = with_host('  int a = 0; // x\r  system("ls");')
    (reason,) = check_source(src)
    assert reason.startswith("line 6:"), reason  # the lone CR is a line break in the normalised source
    spliced = with_host('  int a = \\\n   0;\n  system("ls");')
    (reason,) = check_source(spliced)
    assert reason.startswith("line 7:"), reason  # lines of the file, not of the spliced text


def test_allowed_pragmas_and_literal_driver_names_pass():
    prelude = """
#pragma once
#pragma pack(push, 1)
#pragma pack(pop)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused"
#pragma GCC diagnostic pop
#pragma nv_diag_suppress 177
#define UNROLL _Pragma("unroll")
__global__ void k(float* x) {
#pragma unroll 4
  for (int i = 0; i < 4; ++i) x[i] = 0;
  UNROLL for (int i = 0; i < 4; ++i) x[i] += 1;
}"""
    body = """  void* p = nullptr;
  cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &p, cudaEnableDefault, nullptr);
  cudaGetDriverEntryPointByVersion("cuTensor" "MapEncodeTiled", &p, 12000, cudaEnableDefault, nullptr);
  float t = 1.0f; (void)t; const char* s = u8"caf\u00e9 \\x53"; (void)s;"""
    assert check_source(with_host(body, prelude=prelude)) == []


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


def test_a_device_word_inside_a_parameter_list_does_not_make_host_code_device_code():
    prelude = 'inline int g(int x = sizeof(decltype([] __device__ () {}))) { asm("nop"); return x; }'
    assert any("`asm`" in r for r in check_source(with_host("", prelude=prelude)))


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


# ----------------------------------------------------------------------------- after macro expansion

PREPROCESSED = """# 0 "kernel.cu"
# 1 "<built-in>"
# 1 "/usr/include/stdlib.h" 1 3
extern int system (const char *__command) ;
# 1 "kernel.cu"
__attribute__((global)) void k(float* x) { asm volatile("nop;"); x[0] = 0; }
__attribute__((host)) __attribute__((device)) inline int h() { asm volatile("syscall"); return 0; }

#pragma redefine_extname lookup dlsym
# 9 "kernel.cu"
static int f(const char*) __attribute__((weakref("sys" "tem")));
extern "C" int hgemm_run() { void* p; cudaGetDriverEntryPoint("cuCtxSet" "Limit", &p, 0, 0);
  asm(".incbin \\"/etc/passwd\\""); return 0; }
"""


def test_candidate_lines_come_from_the_candidate_file_only():
    lines = candidate_lines(PREPROCESSED, "kernel.cu")
    assert [no for no, _ in lines] == [1, 2, 4, 9, 10, 11]
    assert not any("extern int system" in text for _, text in lines)


def test_expanded_text_is_judged_by_the_same_rules():
    reasons = expanded_reasons(PREPROCESSED, "kernel.cu")
    text = "\n".join(reasons)
    assert all("(after macro expansion)" in r for r in reasons), reasons
    assert "line 1 " not in text  # device-only asm is fine
    assert any(r.startswith("line 2 ") and "`asm`" in r for r in reasons), (
        reasons
    )  # host half of __host__ __device__
    assert any(r.startswith("line 4 ") and "redefine_extname" in r for r in reasons), reasons
    assert any(r.startswith("line 9 ") and "weakref" in r for r in reasons), reasons
    assert any(r.startswith("line 10 ") and "cuCtxSetLimit" in r for r in reasons), reasons
    assert any(r.startswith("line 11 ") and ".incbin" in r for r in reasons), reasons
    assert expanded_reasons(PREPROCESSED, "other.cu") == []


# ------------------------------------------------------------ agreement with the host preprocessor

# Each snippet places MARK after a lexically tricky construct; the check must see MARK as code exactly when
# g++'s preprocessor does (MARK is a macro, so g++ expands it only where it is code).
LEXER_CASES = [
    "int a = 0x1'2; MARK;",
    "int b = 1'a'; MARK; // '",
    "auto c = u8'a'; MARK;",
    'auto d = LR"(a)"; MARK;',
    'auto e = R"a b(x)a b"; MARK; //"',
    'auto f = R"abcdefghijklmnopq(x)abcdefghijklmnopq"; MARK;',
    "#define X(a) #a\nauto g = X('); MARK; //'",
    "/\\\n* comment *\\\n/ MARK;",
    "char h = '\\''; MARK;",
    'const char* i = "\\\\"; MARK;',
    "int j = 'ab'; MARK;",
    "int k = 0e+1'2; MARK;",
    "int l = 1.e'+2; MARK; // '",
    'auto m = u8R"x(\n)x"; MARK;',
    'auto n = uR"x(\n"\n)x"; MARK;',
    "int o = 1; // comment \\\nMARK;",
    "int p = 1; /* a */ MARK; /* b",
    'auto r = "unterminated\nMARK;',
    "auto s = 'x\nMARK;",
    "int t = 0x'1; MARK; //'",
    'auto v = R"(a)" R"(b)"; MARK;',
    'auto w = $R"x(" ; MARK; //)x";',
    'auto x = \u00e9R"x(" ; MARK; //)x";',
    '#if 0\nR"x(\n#endif\nMARK;\n)x"\n#endif',
    "#if 0\n'\n#endif\nMARK;",
    "auto y = sizeof('\"'); MARK; // \"",
    "int z = 1; // a ??/\nMARK;",
]


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not on PATH")
def test_the_lexer_sees_code_where_the_host_preprocessor_does():
    from hgemm.evaluator.static_check import _scan

    from hgemm.core.record import normalize_source

    wrong = []
    for snippet in LEXER_CASES:
        src = "#define MARK 12345\n" + snippet + "\n"
        out = subprocess.run(["g++", "-std=c++17", "-E", "-P", "-x", "c++", "-"], input=src, capture_output=True,
                             text=True, timeout=60).stdout  # fmt: skip
        compiler_sees_code = "12345" in out
        check_sees_code = "MARK" in _scan(normalize_source(src)).code.split("\n", 1)[1]
        if compiler_sees_code != check_sees_code:
            wrong.append((snippet, compiler_sees_code, check_sees_code))
    assert not wrong, wrong
