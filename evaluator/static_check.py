"""Static check of a candidate's source, run before it is ever compiled.

`check_source(source)` returns the reasons to refuse it (an empty list means accepted): `bad_source_reasons`
(not UTF-8 text, empty, over 1 MB, no extern "C" `hgemm_run` definition) and `banned_reasons` (host code
reaching outside its job: processes, files, sockets, threads, environment, device control, allocation,
load-time code, banned includes, ...; and tricks that hide a name from a text scan).

- Comments and string literals are blanked before matching, with every character's offset kept: a comment
  never counts, and each reason names the line it comes from.
- Device `printf`, inline PTX in `__device__`/`__global__` functions (or macros expanding to those) and the
  contract's launch-side runtime calls are accepted.
- A cheap first line, not a sandbox (macros are not expanded): the evaluator still runs every candidate in a
  supervised worker process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_SOURCE_BYTES = 1_000_000

# Driver entry points a kernel may fetch through cudaGetDriverEntryPoint (TMA descriptors, error text).
ALLOWED_DRIVER_SYMBOLS = (
    "cuTensorMapEncodeTiled",
    "cuTensorMapEncodeIm2col",
    "cuTensorMapReplaceAddress",
    "cuGetErrorString",
    "cuGetErrorName",
)


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    why: str


def _names(names: str, why: str, call_only: bool = False, flags: int = 0) -> _Rule:
    """A rule matching any of the space-separated identifiers (`x*` = any identifier with that prefix).

    `call_only` names are common words: they count only when called, and not as a member (`obj.write(`).
    """
    alts = [re.escape(n[:-1]) + r"\w*" if n.endswith("*") else re.escape(n) + r"\b" for n in names.split()]
    body = "(?:" + "|".join(alts) + ")"
    if call_only:
        return _Rule(re.compile(r"(?<![\w.>])" + body + r"\s*\(", flags), why)
    return _Rule(re.compile(r"\b" + body, flags), why)


_RULES: tuple[_Rule, ...] = (
    _names(
        "system popen pclose fork vfork execl execlp execle execv execvp execvpe execve fexecve",
        "process creation",
    ),
    _names("posix_spawn* wordexp ptrace prctl", "process control"),
    _names(
        "clone kill raise signal sigaction exit _exit _Exit quick_exit abort atexit", "process control", True
    ),
    _names(
        "fopen freopen fdopen fclose fprintf fputs fputc fwrite fread fscanf fgets fgetc fflush fseek ftell",
        "file I/O",
    ),
    _names(
        "tmpfile tmpnam mkstemp opendir readdir unlink rmdir mkdir chmod chdir ifstream ofstream fstream",
        "file I/O",
    ),
    _names("filebuf", "file I/O"),
    _Rule(re.compile(r"\bstd\s*::\s*filesystem\b"), "file I/O"),
    _names("open openat creat read write pread pwrite close", "file I/O", True),
    _names("socket socketpair getaddrinfo gethostbyname inet_pton inet_addr", "socket I/O"),
    _names("connect bind listen accept send sendto sendmsg recv recvfrom recvmsg", "socket I/O", True),
    _names("dlopen dlmopen dlsym dlvsym LoadLibrary LoadLibraryA LoadLibraryW", "dynamic loading"),
    _names("mmap munmap mprotect shm_open memfd_create", "memory mapping"),
    _names("syscall __NR_*", "raw system calls"),
    _Rule(re.compile(r"\bstd\s*::\s*(?:j?thread|async|launch)\b"), "threads"),
    _names("pthread_* thrd_create", "threads"),
    _names("async", "threads", True),
    _Rule(re.compile(r"#\s*pragma\s+omp\b"), "threads (OpenMP)"),
    _names(
        "getenv secure_getenv setenv putenv unsetenv clearenv environ", "reading or changing the environment"
    ),
    _names("malloc calloc realloc aligned_alloc posix_memalign memalign valloc", "heap allocation"),
    _names("free", "heap allocation", True),
    _names("cudaStreamCreate* cudaStreamDestroy", "creating or destroying streams (launch only on `stream`)"),
    _names("cudaEventCreate* cudaEventDestroy", "creating events (launch only on `stream`)"),
    _names(
        "cudaDeviceReset cudaSetDevice* cudaDeviceSet* cudaSetValidDevices cudaThreadSetLimit",
        "device control",
    ),
    _names(
        "cudaThreadExit cudaDeviceEnablePeerAccess cudaDeviceDisablePeerAccess cudaIpc*", "device control"
    ),
    _names("cudaProfilerStart cudaProfilerStop", "device control"),
    _names(
        "cudaDeviceSynchronize cudaStreamSynchronize cudaThreadSynchronize cudaEventSynchronize "
        "cudaStreamQuery cudaEventQuery",
        "host synchronisation (the result must be complete on an event recorded on `stream`)",
    ),
    _Rule(
        re.compile(r"\bcudaMemcpy(?!\w*Async\b)(?!(?:HostTo|DeviceTo|Default|Kind)\w*)\w*"),
        "blocking copy (use cudaMemcpyAsync on `stream`)",
    ),
    _Rule(re.compile(r"\bcudaMemset(?!\w*Async\b)\w*"), "blocking memset (use cudaMemsetAsync on `stream`)"),
    _names(
        "cudaMalloc* cudaFree* cudaHostAlloc cudaHostRegister cudaMemPool*",
        "allocation (the workspace is given)",
    ),
    _names(
        "cudaStreamSetAttribute cudaLimitPersistingL2CacheSize cudaCtxResetPersistingL2Cache",
        "persisting-L2 policy",
    ),
    _Rule(re.compile(r"accesspolicywindow", re.IGNORECASE), "persisting-L2 policy"),
    _names(
        "cudaStreamBeginCapture* cudaStreamEndCapture cudaGraph* cudaThreadExchangeStreamCaptureMode",
        "graph or capture control",
    ),
    _names("cudaLaunchHostFunc cudaStreamAddCallback", "host callbacks"),
    _Rule(
        re.compile(r"__attribute__\s*\(\(\s*(?:constructor|destructor|section|init_priority)\b"),
        "load-time code or custom sections",
    ),
    _Rule(
        re.compile(r"\[\[\s*gnu\s*::\s*(?:constructor|destructor|section)\b"),
        "load-time code or custom sections",
    ),
    _names("__libc_*", "libc internals"),
    _Rule(re.compile(r"##"), "token pasting, which can hide names from this check"),
    _Rule(re.compile(r"%:"), "digraphs, which can hide directives from this check"),
    _Rule(re.compile(r"\\[uU][0-9A-Fa-f]{4}"), "universal character names in code, which can hide names"),
    _Rule(re.compile(r"\w\\\r?\n\w"), "a line splice inside a name, which can hide names"),
)

_DRIVER_CALL = re.compile(r"(?<![\w.>])(cu[A-Z][A-Za-z0-9_]*)\s*\(")
_DRIVER_SYMBOL = re.compile(r"^cu[A-Z][A-Za-z0-9_]*$")

_BANNED_HEADERS = re.compile(
    r"^(?:thread|future|fstream|filesystem|execution|csignal|signal\.h|unistd\.h|dlfcn\.h|pthread\.h|omp\.h|"
    r"spawn\.h|fcntl\.h|netdb\.h|semaphore\.h|syscall\.h|windows\.h|(?:sys|netinet|arpa|linux)/.*)$"
)
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*(?:include(?:_next)?|import)[ \t]*([<"])([^>"\n]*)[>"]', re.MULTILINE)
_ANY_INCLUDE = re.compile(r"^[ \t]*#[ \t]*(?:include(?:_next)?|import)\b[ \t]*(.?)", re.MULTILINE)

_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\b")
_HGEMM_RUN_DEF = re.compile(r"\bhgemm_run\s*\([^;{}]*\)\s*\{")
_EXTERN_C_DECL = re.compile(r'\bextern\s*"C"[^;{}]*\bhgemm_run\b')
_EXTERN_C_BLOCK = re.compile(r'\bextern\s*"C"\s*\{')


@dataclass
class _Scanned:
    no_comments: str  # comments blanked, strings kept
    code: str  # comments and string/char literals blanked
    strings: list[tuple[int, str]]  # (offset, contents) of every string literal


_RAW_PREFIXES = ("R", "LR", "uR", "UR", "u8R")


def _token_before(source: str, end: int) -> str:
    """The identifier-or-number characters that end at `end` (exclusive)."""
    start = end
    while start > 0 and (source[start - 1].isalnum() or source[start - 1] in "_.'"):
        start -= 1
    return source[start:end].lstrip("'.")


def _is_digit_separator(source: str, i: int) -> bool:
    """A `'` inside a numeric literal (1'000'000), as opposed to the start of a character literal."""
    token = _token_before(source, i)
    nxt = source[i + 1] if i + 1 < len(source) else ""
    return bool(token) and token[0].isdigit() and nxt.isalnum()


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def _scan(source: str) -> _Scanned:
    """Blank comments and literals, keeping every offset (newlines stay where they were)."""
    n = len(source)
    no_comments: list[str] = []
    code: list[str] = []
    strings: list[tuple[int, str]] = []
    i = 0
    while i < n:
        c = source[i]
        nxt = source[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = source.find("\n", i)
            j = n if j < 0 else j
            while j < n and source[j - 1] == "\\":  # a line comment continued with a backslash
                k = source.find("\n", j + 1)
                j = n if k < 0 else k
            piece = _blank(source[i:j])
            no_comments.append(piece)
            code.append(piece)
            i = j
        elif c == "/" and nxt == "*":
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            piece = _blank(source[i:j])
            no_comments.append(piece)
            code.append(piece)
            i = j
        elif c == "R" and nxt == '"' and _token_before(source, i + 1) in _RAW_PREFIXES:
            m = re.match(r'R"([^()\\ \n]{0,16})\(', source[i:])
            if m:
                end = source.find(")" + m.group(1) + '"', i + m.end())
                j = n if end < 0 else end + len(m.group(1)) + 2
                strings.append((i, source[i + m.end() : max(i + m.end(), j - len(m.group(1)) - 2)]))
                no_comments.append(source[i:j])
                code.append('R"' + _blank(source[i + 2 : j - 1]) + '"' if j - i >= 3 else _blank(source[i:j]))
                i = j
            else:
                no_comments.append(c)
                code.append(c)
                i += 1
        elif c == '"' or (c == "'" and not _is_digit_separator(source, i)):
            j = i + 1
            while j < n and source[j] != c and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            j = min(j + 1, n)
            if c == '"':
                strings.append((i, source[i + 1 : j - 1]))
            no_comments.append(source[i:j])
            code.append(c + _blank(source[i + 1 : j - 1]) + c if j - i >= 2 else _blank(source[i:j]))
            i = j
        else:
            no_comments.append(c)
            code.append(c)
            i += 1
    return _Scanned("".join(no_comments), "".join(code), strings)


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _preprocessor_spans(code: str) -> list[tuple[int, int]]:
    """(start, end) of every preprocessor directive, continuation lines included."""
    spans = []
    for m in re.finditer(r"^[ \t]*#", code, re.MULTILINE):
        end = m.start()
        while True:
            k = code.find("\n", end)
            if k < 0:
                end = len(code)
                break
            end = k
            if code[k - 1] != "\\":
                break
            end = k + 1
        spans.append((m.start(), end))
    return spans


# Macros from CUTLASS/CuTe that expand to __device__ (a source's own such macros are found too).
_DEVICE_MACROS = (
    "CUTE_DEVICE",
    "CUTE_HOST_DEVICE",
    "CUTLASS_DEVICE",
    "CUTLASS_HOST_DEVICE",
    "CUTLASS_GLOBAL",
)


def _device_markers(code: str) -> re.Pattern[str]:
    """Words that mark a function as device code: __device__, __global__ and macros expanding to them."""
    words = {"__device__", "__global__", *_DEVICE_MACROS}
    defines = re.findall(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+([^\n]*)", code, re.MULTILINE)
    changed = True
    while changed:  # macros built from other device macros
        changed = False
        for name, body in defines:
            if name not in words and any(re.search(r"\b" + re.escape(w) + r"\b", body) for w in words):
                words.add(name)
                changed = True
    return re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, words))) + r")\b")


def _host_asm_offsets(code: str) -> list[int]:
    """Offsets of `asm` statements outside device functions (macro bodies are not judged)."""
    device = _device_markers(code)
    text = list(code)
    for start, end in _preprocessor_spans(code):
        text[start:end] = _blank(code[start:end])
    flat = "".join(text)
    stack: list[str] = []  # scope kinds: "ns" (namespace, extern "C", type), "host", "device"
    header_start = 0
    found = []
    asm_hits = {m.start() for m in _ASM.finditer(flat)}
    for i, ch in enumerate(flat):
        if i in asm_hits:
            inside = next((k for k in reversed(stack) if k != "ns"), None)
            if inside != "device":
                found.append(i)
        if ch == "{":
            header = flat[header_start:i]
            enclosing = next((k for k in reversed(stack) if k != "ns"), None)
            paren = header.find("(")
            kind = re.search(r"\b(?:struct|class|union|enum)\b", header)
            if device.search(header):
                stack.append("device")
            elif enclosing is not None:
                stack.append(enclosing)
            elif re.search(r"\bnamespace\b|\bextern\s*\"\s*\"\s*$", header) or (
                kind and (paren < 0 or kind.start() < paren)
            ):
                stack.append("ns")
            else:
                stack.append("host")
            header_start = i + 1
        elif ch == "}":
            if stack:
                stack.pop()
            header_start = i + 1
        elif ch == ";":
            header_start = i + 1
    return found


def bad_source_reasons(source: str | bytes) -> list[str]:
    """Why this is not a usable source file at all (empty list = it is one)."""
    if isinstance(source, bytes):
        try:
            source = source.decode("utf-8")
        except UnicodeDecodeError as e:
            return [f"source is not UTF-8 text ({e.reason} at byte {e.start})"]
    if not isinstance(source, str):
        return [f"source must be text, got {type(source).__name__}"]
    try:
        size = len(source.encode("utf-8"))
    except UnicodeEncodeError:
        return ["source is not UTF-8 text (it holds unpaired surrogates)"]
    if "\x00" in source:
        return ["source is not text (it holds NUL characters)"]
    if not source.strip():
        return ["source is empty"]
    if size > MAX_SOURCE_BYTES:
        return [f"source is {size} bytes; at most {MAX_SOURCE_BYTES} are accepted"]
    text = _scan(source).no_comments
    definition = _HGEMM_RUN_DEF.search(text)
    if not definition:
        return ["source does not define hgemm_run(...) (the contract's entry point)"]
    block = _EXTERN_C_BLOCK.search(text)
    if not (_EXTERN_C_DECL.search(text) or (block and block.start() < definition.start())):
        return ['hgemm_run must have C linkage: declare it extern "C"']
    return []


def banned_reasons(source: str) -> list[str]:
    """Host code reaching outside its job, one reason per (line, name)."""
    scanned = _scan(source)
    code = scanned.code
    reasons: list[str] = []
    seen: set[tuple[int, str]] = set()

    def add(offset: int, what: str, why: str) -> None:
        line = _line_of(code, offset)
        if (line, what) not in seen:
            seen.add((line, what))
            reasons.append(f"line {line}: {what} is not allowed ({why})")

    for m in _INCLUDE.finditer(scanned.no_comments):
        header = m.group(2).strip()
        if header.startswith(("/", "~")) or ".." in header.split("/"):
            add(m.start(), f"#include {m.group(1)}{header}", "includes outside the include path")
        elif _BANNED_HEADERS.match(header):
            add(m.start(), f"#include <{header}>", "a header for work outside the kernel's job")

    for m in _ANY_INCLUDE.finditer(scanned.no_comments):
        if m.group(1) not in ('"', "<"):
            add(m.start(), "a computed #include", "includes must name their header literally")

    matchable = list(code)
    for m in _INCLUDE.finditer(code):  # header names were judged above
        matchable[m.start() : m.end()] = _blank(m.group(0))
    matchable_text = "".join(matchable)
    for rule in _RULES:
        for m in rule.pattern.finditer(matchable_text):
            name = m.group(0).rstrip("( \t\n").replace("\r", "").replace("\n", "\\n")
            add(m.start(), f"`{name}`", rule.why)

    for m in _DRIVER_CALL.finditer(matchable_text):
        if not m.group(1).startswith(ALLOWED_DRIVER_SYMBOLS):
            add(m.start(), f"`{m.group(1)}`", "direct driver API call")
    for offset, text in scanned.strings:
        symbol = text.strip()
        if _DRIVER_SYMBOL.match(symbol) and not symbol.startswith(ALLOWED_DRIVER_SYMBOLS):
            add(offset, f'"{symbol}"', "driver entry point outside the allowed set")

    for offset in _host_asm_offsets(code):
        add(offset, "`asm`", "inline assembly outside __device__/__global__ functions")
    return sorted(reasons, key=lambda r: int(r.split(":", 1)[0].split()[1]))


def check_source(source: str | bytes) -> list[str]:
    """All reasons to refuse the source before compiling it; an empty list means accepted."""
    bad = bad_source_reasons(source)
    if bad:
        return bad
    if isinstance(source, bytes):
        source = source.decode("utf-8")
    return banned_reasons(source)
