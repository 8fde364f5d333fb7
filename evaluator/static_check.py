"""Static check of a candidate's source, before it is compiled: `check_source` returns the reasons to refuse
it (empty: accepted); `expanded_reasons` applies the same rules to the candidate's own lines of nvcc's
preprocessed host translation unit (macros expanded).

- It reads `normalize_source(source)`: exactly the bytes the compile pipeline hands nvcc.
- Its lexer follows the C++ translation phases nvcc's host preprocessor applies (splices first, then
  comments, literals, raw strings and header names; adjacent string literals are joined and decoded), so a
  name cannot hide in a form the compiler reads differently.
- Refused: host code reaching outside its job (processes, files, sockets, loading, threads, environment,
  stream and device control, synchronisation, allocation, persisting-L2 policy, load-time code, symbol
  aliasing, host assembly), driver entry points outside the allowed set, includes other than
  `#include <header>`, pragmas other than loop, packing and diagnostics, and name-hiding tricks.
- Each reason names the line it comes from. The check raises the bar; the object audit, the sandbox and
  the judge's separate process are what contain a candidate.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from hgemm.core.record import normalize_source

MAX_SOURCE_BYTES = 1_000_000

# Driver entry points a kernel may fetch through cudaGetDriverEntryPoint* (TMA descriptors, error text),
# always by one literal name from this set.
ALLOWED_DRIVER_SYMBOLS = (
    "cuTensorMapEncodeTiled",
    "cuTensorMapEncodeIm2col",
    "cuTensorMapReplaceAddress",
    "cuGetErrorString",
    "cuGetErrorName",
)
# cuComplex.h helpers, named like driver calls but plain inline arithmetic.
_CUCOMPLEX = frozenset(
    "cuCrealf cuCimagf cuConjf cuCaddf cuCsubf cuCmulf cuCdivf cuCabsf cuCfmaf cuCreal cuCimag cuConj cuCadd "
    "cuCsub cuCmul cuCdiv cuCabs cuCfma cuComplex cuFloatComplex cuDoubleComplex cuComplexFloatToDouble "
    "cuComplexDoubleToFloat".split()
)

_IDENT_CHAR = r"A-Za-z0-9_$\u0080-\U0010ffff"
_NOT_IDENT_BEFORE = rf"(?<![{_IDENT_CHAR}])"
# Variants the C library exports under other names: fopen64, __open_2, __fprintf_chk, fwrite_unlocked.
_LIBC_SUFFIX = r"(?:64|_unlocked)?(?:_2|_chk)?"


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str]
    why: str


def _names(names: str, why: str, call_only: bool = False, libc: bool = False) -> _Rule:
    """A rule matching any of the space-separated identifiers (`x*` = any identifier with that prefix).

    `libc` names also match with leading underscores and the C library's suffixed variants
    (`__environ`, `fopen64`). `call_only` names are common words: they count when called
    (`open(`, `(open)(`) or when their address is taken (`&open`), not as a member (`obj.write(`).
    """
    alts = []
    for n in names.split():
        if n.endswith("*"):
            alts.append(re.escape(n[:-1]) + rf"[{_IDENT_CHAR}]*")
        else:
            alts.append(re.escape(n) + (_LIBC_SUFFIX if libc else "") + rf"(?![{_IDENT_CHAR}])")
    body = ("_*" if libc else "") + "(?:" + "|".join(alts) + ")"
    if call_only:
        use = r"(?=\s*\(|\s*\)\s*\()"
        return _Rule(re.compile(rf"(?<![{_IDENT_CHAR}.>])(?:{body}{use}|(?<=&){body}|(?<=&\s){body})"), why)
    return _Rule(re.compile(_NOT_IDENT_BEFORE + body), why)


_PROCESS = "process creation"
_FILES = "file I/O"
_RULES: tuple[_Rule, ...] = (
    _names(
        "system popen pclose fork vfork execl execlp execle execv execvp execvpe execve fexecve",
        _PROCESS,
        libc=True,
    ),
    _names("posix_spawn* wordexp ptrace prctl", "process control", libc=True),
    _names(
        "clone kill raise signal sigaction exit _exit _Exit quick_exit abort atexit at_quick_exit",
        "process control",
        True,
    ),
    _names(
        "fopen freopen fdopen fclose fprintf vfprintf fputs fputc putc fwrite fread fscanf fgets fgetc fflush "
        "fseek fseeko ftell ftello fopencookie",
        _FILES,
        libc=True,
    ),
    _names(
        "tmpfile tmpnam tempnam mkstemp mkstemps mkostemp mkdtemp opendir fdopendir readdir scandir unlink unlinkat "
        "rmdir mkdir mkdirat mkfifo mknod chmod fchmod chown fchown lchown chdir fchdir getcwd readlink readlinkat "
        "realpath symlink symlinkat renameat renameat2 ftruncate nftw inotify_init inotify_add_watch",
        _FILES,
        libc=True,
    ),
    _names("ifstream ofstream fstream filebuf", _FILES),
    _Rule(re.compile(r"\bstd\s*::\s*filesystem\b"), _FILES),
    _names(
        "open openat creat read write pread pwrite readv writev close remove rename link truncate stat lstat fstat "
        "access dup dup2 dup3 pipe pipe2 ioctl fcntl",
        _FILES,
        True,
        libc=True,
    ),
    _names("socket socketpair getaddrinfo gethostbyname inet_pton inet_addr", "socket I/O", libc=True),
    _names(
        "connect bind listen accept accept4 send sendto sendmsg recv recvfrom recvmsg", "socket I/O", True
    ),
    _names(
        "dlopen dlmopen dlsym dlvsym dladdr dlinfo LoadLibrary LoadLibraryA LoadLibraryW", "dynamic loading"
    ),
    _names("mmap munmap mprotect mremap shm_open memfd_create", "memory mapping", libc=True),
    _names("syscall __NR_* SYS_*", "raw system calls"),
    _Rule(re.compile(r"\bstd\s*::\s*(?:j?thread|async|launch)\b"), "threads"),
    _names("pthread_* thrd_create", "threads"),
    _names("async", "threads", True),
    _Rule(re.compile(r"#\s*pragma\s+omp\b"), "threads (OpenMP)"),
    _names(
        "getenv secure_getenv setenv putenv unsetenv clearenv environ program_invocation_name "
        "program_invocation_short_name progname",
        "reading or changing the environment",
        libc=True,
    ),
    _names(
        "getauxval dl_iterate_phdr _r_debug _dl_* _DYNAMIC _GLOBAL_OFFSET_TABLE_ __ehdr_start __executable_start "
        "__builtin_frame_address __builtin_return_address __builtin_extract_return_addr",
        "walking the process's loader or stack data",
    ),
    _names(
        "uname gethostname getlogin getpwnam getpwuid getpwent getgrnam getgrgid",
        "reading the host's identity",
    ),
    _names(
        "malloc calloc realloc aligned_alloc posix_memalign memalign valloc pvalloc",
        "heap allocation",
        libc=True,
    ),
    _names("free", "heap allocation", True),
    _names("cudaStreamCreate* cudaStreamDestroy", "creating or destroying streams (launch only on `stream`)"),
    _names("cudaEventCreate* cudaEventDestroy", "creating events (launch only on `stream`)"),
    _names(
        "cudaDeviceReset cudaSetDevice* cudaDeviceSet* cudaSetValidDevices cudaThreadSetLimit cudaInitDevice",
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
        "cudaStreamBeginCapture* cudaStreamEndCapture cudaGraph* cudaThreadExchangeStreamCaptureMode "
        "cudaStreamIsCapturing cudaStreamGetCaptureInfo*",
        "graph or capture control",
    ),
    _names("cudaLaunchHostFunc cudaStreamAddCallback", "host callbacks"),
    _names(
        "cudaLibrary* cudaGetExportTable cudaImportExternal* cudaExternal*",
        "loading code or reaching runtime internals",
    ),
    _names("__libc_* _IO_* __GI_*", "libc internals"),
    _Rule(re.compile(r"(?<![\w$])__(?:cuda[A-Z]|sti__)\w*"), "nvcc's own registration and launch internals"),
)
# Names only the source may not spell: macros of the system headers expand to them legitimately.
_SOURCE_ONLY_RULES: tuple[_Rule, ...] = (
    _names("__assert_fail __assert_perror_fail __assert", "writing to the worker's log (use assert())"),
)

# Attributes that make aliases of other symbols, run code at load time or place code in chosen sections.
_ALIAS_ATTRS = {"alias", "weakref", "weak", "ifunc", "symver", "target_clones", "target", "copy"}
_LOAD_ATTRS = {"constructor", "destructor", "init_priority", "section", "noinit", "persistent", "retain"}
_ATTR_WHY = {
    **{a: "symbol aliasing or multiversioning, which can reach any library function" for a in _ALIAS_ATTRS},
    **{a: "load-time code or custom sections" for a in _LOAD_ATTRS},
}
# Spellings that never mean anything but the attribute, judged wherever they appear (macros included).
_ATTR_WORDS = re.compile(
    r"\b(?:weakref|ifunc|symver|init_priority|target_clones|__(?:"
    + "|".join(sorted(_ALIAS_ATTRS | _LOAD_ATTRS))
    + r")__)\b"
)

# Pragmas a kernel may use: loop unrolling, packing, diagnostics and include guards.
_ALLOWED_PRAGMA = re.compile(
    r"^(?:unroll\b|nounroll\b|once$|pack\b|ivdep\b|(?:GCC|clang)\s+(?:diagnostic|unroll|ivdep)\b|"
    r"nv_diag_\w+|nv_diagnostic\b|diag_\w+|nv_exec_check_disable\b|hd_warning_disable\b)"
)

_DRIVER_IDENT = re.compile(r"(?<![\w$])(cu[A-Z][A-Za-z0-9_]*)")
_DRIVER_SYMBOL = re.compile(r"^cu[A-Z][A-Za-z0-9_]*$")
_ENTRY_POINT = re.compile(r"(?<![\w$])cudaGetDriverEntryPoint\w*")
_ASSEMBLER_FILE_DIRECTIVE = re.compile(r"\.(?:incbin|include)\b", re.IGNORECASE)

_BANNED_HEADERS = re.compile(
    r"^(?:thread|future|mutex|shared_mutex|condition_variable|stop_token|latch|barrier|semaphore|fstream|"
    r"filesystem|execution|csignal|signal\.h|unistd\.h|dlfcn\.h|link\.h|pthread\.h|omp\.h|spawn\.h|fcntl\.h|"
    r"netdb\.h|semaphore\.h|syscall\.h|dirent\.h|ftw\.h|glob\.h|pwd\.h|grp\.h|termios\.h|windows\.h|"
    r"(?:sys|netinet|arpa|linux|asm|bits)/.*)$"
)
_HEADER_NAME = re.compile(
    r"^[A-Za-z0-9_+-]+(?:\.[A-Za-z0-9_+-]+)*(?:/[A-Za-z0-9_+-]+(?:\.[A-Za-z0-9_+-]+)*)*$"
)
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*([A-Za-z_]\w*|\d)?", re.MULTILINE)

_ASM = re.compile(r"\b(?:asm|__asm__|__asm)\b")
_HGEMM_RUN_DEF = re.compile(r"\bhgemm_run\s*\([^;{}]*\)\s*\{")
_EXTERN_C_DECL = re.compile(r'\bextern\s*"C"[^;{}]*\bhgemm_run\b')
_EXTERN_C_BLOCK = re.compile(r'\bextern\s*"C"\s*\{')
_TRIGRAPH = re.compile(r"\?\?[=/'()!<>-]")
_DIRECTIVE_START = re.compile(r"[ \t]*#")


# ------------------------------------------------------------------------------------------------ lexer


@dataclass
class _Literal:
    start: int  # offsets in the spliced text
    end: int
    text: str  # decoded contents
    string: bool  # string literal (False: character literal)


@dataclass
class _Scanned:
    spliced: str  # the text after line splicing (translation phase 2)
    no_comments: str  # comments blanked, literals kept
    code: str  # comments, literal contents and header names blanked (delimiters kept)
    literals: list[_Literal]
    groups: list[tuple[int, int, str]]  # adjacent string literals concatenated: (start, end, decoded text)
    headers: list[tuple[int, str, str]]  # (offset, context, header name): `include`, `__has_include`, ...
    problems: list[tuple[int, str, str]] = field(default_factory=list)  # lexical tricks: (offset, what, why)
    _splices: list[int] = field(default_factory=list)  # spliced offsets where a splice was removed
    _newlines: list[int] = field(default_factory=list)  # newline offsets of the original text
    line_map: list[int] | None = None  # for expanded text: the candidate line of each line

    def orig(self, offset: int) -> int:
        return offset + 2 * bisect.bisect_right(self._splices, offset)

    def line(self, offset: int) -> int:
        line = bisect.bisect_left(self._newlines, self.orig(offset)) + 1
        return self.line_map[line - 1] if self.line_map else line


_TOKEN = re.compile(
    rf"(?P<lc>//[^\n]*)|(?P<bc>/\*.*?(?:\*/|\Z))|(?P<id>[A-Za-z_$\u0080-\U0010ffff][{_IDENT_CHAR}]*)"
    rf"|(?P<num>\.?[0-9](?:[eEpP][+-]|'[{_IDENT_CHAR}]|[{_IDENT_CHAR}.])*)|(?P<q>[\"'])|(?P<nl>\n)|(?P<ws>[ \t\f\v]+)"
    r"|(?P<other>.)",
    re.DOTALL,
)
_STRING_BODY = {
    '"': re.compile(r'(?:[^"\\\n]|\\.)*"?', re.DOTALL),
    "'": re.compile(r"(?:[^'\\\n]|\\.)*'?", re.DOTALL),
}
_RAW_PREFIXES = {"R", "LR", "uR", "UR", "u8R"}
_ENCODING_PREFIXES = {"L", "u", "U", "u8"}
_RAW_OPEN = re.compile(r'"([^()\\\s]{0,16})\(')
_HEADER_DIRECTIVES = {"include", "include_next", "import", "embed"}
_HEADER_OPERATORS = {"__has_include", "__has_include_next", "__has_embed"}
_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9A-Fa-f]+)|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))", re.DOTALL)
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "e": "\x1b"}


def _decode(body: str) -> str:
    """A literal's contents with its escape sequences decoded (`\\x53` -> `S`)."""

    def one(m: re.Match[str]) -> str:
        octal, hexa, u4, u8, other = m.groups()
        if other is not None:
            return _SIMPLE_ESCAPES.get(other, other)
        value = int(octal, 8) if octal else int(hexa or u4 or u8, 16)
        return chr(value) if value < 0x110000 else "\ufffd"

    return _ESCAPE.sub(one, body)


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def _splice(text: str) -> tuple[str, list[int], list[int]]:
    """Translation phase 2: (spliced text, spliced offsets where a splice was removed, original offsets)."""
    spliced_at, original_at, parts, last = [], [], [], 0
    for m in re.finditer(r"\\\n", text):
        parts.append(text[last : m.start()])
        original_at.append(m.start())
        spliced_at.append(m.start() - 2 * len(spliced_at))
        last = m.end()
    parts.append(text[last:])
    return "".join(parts), spliced_at, original_at


def _scan(source: str) -> _Scanned:
    """Lex `source` as the C preprocessor does, keeping every offset of the spliced text."""
    original = source
    text, splices, original_splices = _splice(source)
    scanned = _Scanned(text, "", "", [], [], [], _splices=splices)
    scanned._newlines = [m.start() for m in re.finditer("\n", original)]
    problems = scanned.problems
    for k, q in enumerate(original_splices):
        before, after = original[q - 1 : q], original[q + 2 : q + 3]
        if (
            before
            and after
            and re.match(rf"[{_IDENT_CHAR}]", before)
            and re.match(rf"[{_IDENT_CHAR}]", after)
        ):
            problems.append((splices[k], "a line splice inside a name", "it can hide names from this check"))

    n = len(text)
    no_comments: list[str] = []
    code: list[str] = []
    literals = scanned.literals
    at_line_start = True  # only whitespace and comments so far on this line
    directive: str | None = None  # None, "#" (just saw it) or the directive's name
    i = 0
    while i < n:
        m = _TOKEN.match(text, i)
        kind, tok = m.lastgroup, m.group(0)
        j = m.end()
        if kind in ("lc", "bc"):
            piece = _blank(tok)
            no_comments.append(piece)
            code.append(piece)
            i = j
            continue
        if kind == "nl":
            at_line_start, directive = True, None
            no_comments.append(tok)
            code.append(tok)
            i = j
            continue
        if kind == "ws":
            no_comments.append(tok)
            code.append(tok)
            i = j
            continue
        if kind == "other" and tok == "<" and directive in _HEADER_DIRECTIVES:
            j = _header_name(scanned, no_comments, code, i, directive)
            directive, at_line_start = "done", False
            i = j
            continue
        if kind == "id" and tok in _HEADER_OPERATORS:
            op = re.compile(r"[ \t]*\([ \t]*").match(text, j)
            if op and text[op.end() : op.end() + 1] == "<":  # __has_include(<name>): a header name as well
                no_comments.append(text[i : op.end()])
                code.append(text[i : op.end()])
                i = _header_name(scanned, no_comments, code, op.end(), tok)
                at_line_start = False
                continue
        if kind == "q" or (
            kind == "id"
            and j < n
            and text[j] in "\"'"
            and (tok in _ENCODING_PREFIXES or (tok in _RAW_PREFIXES and text[j] == '"'))
        ):
            prefix = "" if kind == "q" else tok
            quote_at = i + len(prefix)
            quote = text[quote_at]
            if prefix in _RAW_PREFIXES:
                raw = _raw_string(scanned, original, original_splices, quote_at)
                if raw is not None:
                    end, contents = raw
                    literals.append(_Literal(i, end, contents, True))
                    if re.search(r"\n[ \t]*#", contents):  # the preprocessor prints it verbatim, line by line
                        problems.append(
                            (i, "a raw string line that starts with #", "it can pose as a line marker")
                        )
                    no_comments.append(text[i:end])
                    code.append(text[i:quote_at] + '"' + _blank(text[quote_at + 1 : end - 1]) + '"')
                    i = end
                    at_line_start = False
                    if directive == "#":
                        directive = "done"
                    continue
            body = _STRING_BODY[quote].match(text, quote_at + 1)
            j = body.end()
            closed = text[j - 1 : j] == quote and j - 1 > quote_at
            contents = text[quote_at + 1 : j - 1 if closed else j]
            literals.append(_Literal(i, j, _decode(contents), quote == '"'))
            no_comments.append(text[i:j])
            code.append(prefix + quote + _blank(contents) + (quote if closed else ""))
            i = j
            at_line_start = False
            if directive == "#":
                directive = "done"
            continue
        if kind == "other" and tok == "#" and at_line_start:
            directive = "#"
        elif kind == "id" and directive == "#":
            directive = tok
        elif directive == "#":
            directive = "done"
        at_line_start = False
        no_comments.append(tok)
        code.append(tok)
        i = j

    scanned.no_comments = "".join(no_comments)
    scanned.code = "".join(code)
    scanned.groups = _string_groups(scanned)
    return scanned


def _header_name(scanned: _Scanned, no_comments: list[str], code: list[str], i: int, context: str) -> int:
    """Record the header name that starts with `<` at `i` (no comment, literal or splice inside it); its end."""
    text = scanned.spliced
    eol = text.find("\n", i)
    eol = len(text) if eol < 0 else eol
    close = text.find(">", i, eol)
    j = eol if close < 0 else close + 1
    name = text[i + 1 : close if close >= 0 else eol]
    scanned.headers.append((i, context, name))
    no_comments.append(text[i:j])
    code.append("<" + _blank(name) + (">" if close >= 0 else ""))
    return j


def _raw_string(
    scanned: _Scanned, original: str, original_splices: list[int], quote_at: int
) -> tuple[int, str] | None:
    """(end in the spliced text, contents) of the raw string whose quote is at `quote_at`, found as the compiler
    finds it: in the original text, where splices are reverted. None when the opening is malformed."""
    m = _RAW_OPEN.match(scanned.spliced, quote_at)
    if not m:
        return None
    body_start = scanned.orig(m.end())
    terminator = ")" + m.group(1) + '"'
    found = original.find(terminator, body_start)
    body_end = len(original) if found < 0 else found
    orig_end = len(original) if found < 0 else found + len(terminator)
    if any(scanned.orig(quote_at) <= q < orig_end for q in original_splices):
        scanned.problems.append(
            (
                quote_at,
                "a line splice inside a raw string literal",
                "compilers and this check may split it apart",
            )
        )
    removed = bisect.bisect_left(original_splices, orig_end)  # splices before the end, in spliced coordinates
    return min(len(scanned.spliced), orig_end - 2 * removed), original[body_start:body_end]


def _string_groups(scanned: _Scanned) -> list[tuple[int, int, str]]:
    """String literals separated only by whitespace or comments, concatenated (translation phase 6). Directive
    lines between two literals of code are gone by then; a literal inside a directive joins only its own line's."""
    code = scanned.code

    def in_directive(offset: int) -> bool:
        return _DIRECTIVE_START.match(code, code.rfind("\n", 0, offset) + 1) is not None

    groups: list[tuple[int, int, str]] = []
    last_in_directive = False
    for lit in scanned.literals:
        if not lit.string:
            continue
        here = in_directive(lit.start)
        if groups:
            gap = code[groups[-1][1] : lit.start]
            if here or last_in_directive:
                joined = "\n" not in gap and not gap.strip()
            else:
                joined = not re.sub(r"(?m)^[ \t]*#.*$", "", gap).strip()
            if joined:
                start, _, text = groups[-1]
                groups[-1] = (start, lit.end, text + lit.text)
                continue
        groups.append((lit.start, lit.end, lit.text))
        last_in_directive = here
    return groups


# ------------------------------------------------------------------------------------------ structure


def _preprocessor_spans(code: str) -> list[tuple[int, int]]:
    """(start, end) of every preprocessor directive (the text is already spliced)."""
    spans = []
    for m in re.finditer(r"^[ \t]*#", code, re.MULTILINE):
        end = code.find("\n", m.start())
        spans.append((m.start(), len(code) if end < 0 else end))
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


# After preprocessing, nvcc's host pass spells the execution spaces as attributes.
_EXPANDED_DEVICE = re.compile(r"__attribute__\s*\(\(\s*(?:device|global)\s*\)\)")
_EXPANDED_HOST = re.compile(r"__attribute__\s*\(\(\s*host\s*\)\)")


def _outside_parens(pattern: re.Pattern[str], header: str) -> bool:
    """True when `pattern` occurs in a function header outside any parentheses, where an execution space is
    declared (a `__device__` lambda in a default argument does not make the function device code)."""
    for m in pattern.finditer(header):
        before = header[: m.start()]
        if before.count("(") - before.count(")") == 0 and before.count("[") - before.count("]") == 0:
            return True
    return False


def _host_asm_offsets(code: str, device: re.Pattern[str], host: re.Pattern[str] | None = None) -> list[int]:
    """Offsets of `asm` statements outside device functions (directives are not judged).

    A function counts as device code when its header matches `device` and, if `host` is given, does not
    match `host` (in the host pass of nvcc, what is left of a __host__ __device__ function is host code).
    """
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
            if _outside_parens(device, header) and not (host and _outside_parens(host, header)):
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


def _attribute_regions(code: str) -> list[tuple[int, int]]:
    """(start, end) of every `__attribute__((...))`, `[[...]]` and `__declspec(...)`."""
    regions = []
    for m in re.finditer(r"\b(?:__attribute__|__attribute|__declspec)\s*\(|\[\s*\[", code):
        depth, k = 0, m.start()
        opener, closer = ("[", "]") if m.group(0).startswith("[") else ("(", ")")
        while k < len(code):
            if code[k] == opener:
                depth += 1
            elif code[k] == closer:
                depth -= 1
                if depth == 0:
                    break
            k += 1
        regions.append((m.start(), k + 1))
    return regions


# ---------------------------------------------------------------------------------------------- rules


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
    text = _scan(normalize_source(source)).no_comments
    definition = _HGEMM_RUN_DEF.search(text)
    if not definition:
        return ["source does not define hgemm_run(...) (the contract's entry point)"]
    block = _EXTERN_C_BLOCK.search(text)
    if not (_EXTERN_C_DECL.search(text) or (block and block.start() < definition.start())):
        return ['hgemm_run must have C linkage: declare it extern "C"']
    return []


class _Reasons:
    def __init__(self, scanned: _Scanned, suffix: str = "") -> None:
        self.scanned = scanned
        self.suffix = suffix
        self.found: dict[tuple[int, str], str] = {}

    def add(self, offset: int, what: str, why: str) -> None:
        line = self.scanned.line(offset)
        self.found.setdefault((line, what), f"line {line}{self.suffix}: {what} is not allowed ({why})")

    def sorted(self) -> list[str]:
        return [self.found[k] for k in sorted(self.found, key=lambda k: k[0])]


def _name_rules(r: _Reasons, code: str, rules: tuple[_Rule, ...] = _RULES) -> None:
    for rule in rules:
        for m in rule.pattern.finditer(code):
            name = m.group(0).rstrip("( \t\n").replace("\n", "\\n")
            r.add(m.start(), f"`{name}`", rule.why)


def _attribute_rules(r: _Reasons, code: str) -> None:
    for start, end in _attribute_regions(code):
        for m in re.finditer(r"\b(?:gnu\s*::\s*|__gnu__\s*::\s*)?_*([A-Za-z]\w*?)_*\b", code[start:end]):
            word = m.group(1)
            if word in _ATTR_WHY:
                r.add(start + m.start(), f"attribute `{word}`", _ATTR_WHY[word])
    for m in _ATTR_WORDS.finditer(code):
        word = m.group(0).strip("_")
        r.add(m.start(), f"attribute `{word}`", _ATTR_WHY.get(word, "symbol aliasing"))


def _pragma_rules(r: _Reasons, scanned: _Scanned, code: str) -> None:
    for m in re.finditer(r"^[ \t]*#[ \t]*pragma\b[ \t]*([^\n]*)", code, re.MULTILINE):
        body = scanned.no_comments[m.start(1) : m.end(1)].strip()
        if not _ALLOWED_PRAGMA.match(body):
            r.add(
                m.start(), f"`#pragma {body[:40]}`", "only loop, packing and diagnostic pragmas are accepted"
            )
    for m in re.finditer(r"\b_Pragma\s*\(", code):
        group = _literal_group_at(scanned, m.end())
        if group is None:
            r.add(m.start(), "`_Pragma` without one string literal", "pragmas must be spelled out")
            continue
        _, body = group
        if not _ALLOWED_PRAGMA.match(body.strip()):
            r.add(
                m.start(),
                f'`_Pragma("{body.strip()[:40]}")`',
                "only loop, packing and diagnostic pragmas are accepted",
            )


def _literal_group_at(scanned: _Scanned, offset: int) -> tuple[int, str] | None:
    """(end, decoded text) of the string literal group starting at the first token after `offset`."""
    k = offset
    code = scanned.code
    while k < len(code) and code[k].isspace():
        k += 1
    starts = {g[0]: g for g in scanned.groups}
    lit = next((x for x in scanned.literals if x.start == k), None)
    if lit is None or not lit.string or k not in starts:
        return None
    _, end, text = starts[k]
    return end, text


def _driver_rules(r: _Reasons, scanned: _Scanned, code: str) -> None:
    for m in _DRIVER_IDENT.finditer(code):
        name = m.group(1)
        if not name.startswith(ALLOWED_DRIVER_SYMBOLS) and name not in _CUCOMPLEX:
            r.add(m.start(), f"`{name}`", "direct driver API use")
    for start, _, text in scanned.groups:
        symbol = text.strip()
        if _DRIVER_SYMBOL.match(symbol) and symbol not in ALLOWED_DRIVER_SYMBOLS:
            r.add(start, f'"{symbol}"', "driver entry point outside the allowed set")
        if _ASSEMBLER_FILE_DIRECTIVE.search(text):
            r.add(start, "an assembler `.incbin`/`.include`", "it reads host files into the build")
    for m in _ENTRY_POINT.finditer(code):
        k = m.end()
        while k < len(code) and code[k].isspace():
            k += 1
        group = _literal_group_at(scanned, k + 1) if code[k : k + 1] == "(" else None
        after = group[0] if group else 0
        while group and after < len(code) and code[after].isspace():
            after += 1
        if group is None or code[after : after + 1] != "," or group[1] not in ALLOWED_DRIVER_SYMBOLS:
            r.add(
                m.start(),
                f"`{m.group(0)}` without one literal name from the allowed set",
                "driver entry points are fetched by name: " + ", ".join(ALLOWED_DRIVER_SYMBOLS),
            )


def _include_rules(r: _Reasons, scanned: _Scanned) -> None:
    for m in _DIRECTIVE.finditer(scanned.code):
        name = m.group(1)
        if name is None:
            continue
        if name == "line" or name.isdigit():
            r.add(m.start(), "`#line` and line markers", "they make code claim to come from elsewhere")
        elif name in ("include_next", "import", "embed"):
            r.add(
                m.start(), f"`#{name}`", "a candidate is one file that includes headers with #include <...>"
            )
        elif name == "include":
            eol = scanned.code.find("\n", m.end())
            rest = scanned.code[m.end() : len(scanned.code) if eol < 0 else eol].lstrip()
            if rest.startswith('"'):
                r.add(
                    m.start(),
                    "a quoted #include",
                    "a candidate is one self-contained file: inline what it needs",
                )
            elif not rest.startswith("<"):
                r.add(m.start(), "a computed #include", "includes must name their header literally")
    for m in re.finditer(r"\b(__has_include_next|__has_include|__has_embed)\b", scanned.code):
        word = m.group(1)
        rest = scanned.code[m.end() :].lstrip()
        if word == "__has_embed" or not rest.startswith("(") or not rest[1:].lstrip().startswith("<"):
            r.add(
                m.start(),
                f"`{word}` other than with one <header>",
                "includes must name their header literally",
            )
    for offset, context, header in scanned.headers:
        if context in ("embed", "__has_embed", "import", "include_next"):
            continue  # refused above, whatever they name
        shown = f"#include <{header}>" if context == "include" else f"{context}(<{header}>)"
        if not _HEADER_NAME.match(header):
            r.add(offset, shown, "a header name with a path trick or odd characters (./, .., absolute paths)")
        elif _BANNED_HEADERS.match(header):
            r.add(offset, shown, "a header for work outside the kernel's job")


def _lexical_rules(r: _Reasons, scanned: _Scanned, code: str) -> None:
    for offset, what, why in scanned.problems:
        r.add(offset, what, why)
    for m in re.finditer(r"##", code):
        r.add(m.start(), "`##`", "token pasting, which can hide names from this check")
    for m in re.finditer(r"%:", code):
        r.add(m.start(), "`%:`", "digraphs, which can hide directives from this check")
    for m in re.finditer(r"\\[uU][0-9A-Fa-f]{4}", code):
        r.add(m.start(), f"`{m.group(0)}`", "universal character names in code, which can hide names")
    for m in re.finditer(r"\?\?/", scanned.spliced):
        r.add(m.start(), "the trigraph `??/`", "compilers disagree on trigraphs")
    for m in _TRIGRAPH.finditer(code):
        r.add(m.start(), f"the trigraph `{m.group(0)}`", "compilers disagree on trigraphs")


def _matchable(scanned: _Scanned) -> str:
    """`code` with #include lines blanked (their header names are judged on their own)."""
    code = list(scanned.code)
    for m in re.finditer(
        r"^[ \t]*#[ \t]*(?:include|include_next|import|embed)\b[^\n]*", scanned.code, re.MULTILINE
    ):
        code[m.start() : m.end()] = _blank(m.group(0))
    return "".join(code)


def banned_reasons(source: str) -> list[str]:
    """Host code reaching outside its job, one reason per (line, name); lines of the normalised source."""
    scanned = _scan(normalize_source(source))
    r = _Reasons(scanned)
    code = _matchable(scanned)
    _include_rules(r, scanned)
    _lexical_rules(r, scanned, scanned.code)
    _pragma_rules(r, scanned, code)
    _name_rules(r, code, _RULES + _SOURCE_ONLY_RULES)
    _attribute_rules(r, code)
    _driver_rules(r, scanned, code)
    for offset in _host_asm_offsets(scanned.code, _device_markers(scanned.code)):
        r.add(offset, "`asm`", "inline assembly outside __device__/__global__ functions")
    return r.sorted()


def check_source(source: str | bytes) -> list[str]:
    """All reasons to refuse the source before compiling it; an empty list means accepted."""
    bad = bad_source_reasons(source)
    if bad:
        return bad
    if isinstance(source, bytes):
        source = source.decode("utf-8")
    return banned_reasons(source)


# ------------------------------------------------------------------------------ after macro expansion

_LINE_MARKER = re.compile(r'^#(?:line)? (\d+) "((?:[^"\\]|\\.)*)"')


def candidate_lines(preprocessed: str, filename: str) -> list[tuple[int, str]]:
    """(line in the candidate, text) of every line a preprocessor's output attributes to `filename`."""
    lines: list[tuple[int, str]] = []
    current, line_no = None, 0
    for raw in preprocessed.split("\n"):
        m = _LINE_MARKER.match(raw)
        if m:
            current, line_no = m.group(2), int(m.group(1))
            continue
        if current == filename and raw.strip():
            lines.append((line_no, raw))
        line_no += 1
    return lines


def expanded_reasons(preprocessed: str, filename: str) -> list[str]:
    """The rules applied to the candidate's own lines of a preprocessed host translation unit, so that
    names, pragmas, attributes and literals built by macros are judged as the compiler sees them."""
    lines = candidate_lines(preprocessed, filename)
    if not lines:
        return []
    scanned = _scan("\n".join(text for _, text in lines) + "\n")
    scanned.line_map = [no for no, _ in lines] + [lines[-1][0]]
    r = _Reasons(scanned, " (after macro expansion)")
    code = scanned.code
    _pragma_rules(r, scanned, code)
    _name_rules(r, code)
    _attribute_rules(r, code)
    _driver_rules(r, scanned, code)
    for offset in _host_asm_offsets(code, _EXPANDED_DEVICE, _EXPANDED_HOST):
        r.add(
            offset,
            "`asm`",
            "inline assembly in host code (a __host__ __device__ function's host half counts)",
        )
    return r.sorted()
