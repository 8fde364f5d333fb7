"""Failures as a prompt may show them: a failure kind and fields that cannot carry a candidate's prose.

`feedback(result, source=None)` turns an `EvalRecord` or a `CompileResult` into a `Feedback`, or None
when there is nothing to say against the kernel. The wording of every kind, code and number lives in
`prompts/feedback.toml`; this module only picks codes from the evaluator's messages.

Invariants:
- Every field is a fixed name (failure kind, signal, CUDA error, buffer, sanitizer tool), a code from a
  vocabulary of this module, a number formatted here (two significant digits), a line number, or a line of
  the candidate's own source scrubbed by `agent.llm.scrub` (comments gone, literals bounded). No text of a
  compiler, a crash, a runner, a sanitizer or a static check is copied: messages are only matched against
  patterns, and a match yields a code or a number, never the matched text.
- Compile errors count as the candidate's only when they point into its own file (`kernel.cu`); the
  line must exist in the normalised source nvcc compiled. Errors elsewhere (headers, ptxas, the
  assembler, the linker) are counted per code, without a location. Static-check findings are recomputed
  from the source when it is at hand (their lines then match the normalised source quoted).
- Messages are read only up to MESSAGE_SCAN characters, and at most MAX_LINES source lines are quoted.
- Numbers are chosen by the candidate in part (its errors, its return codes, where its errors fall),
  so each is rounded and each list is bounded: a narrow channel, not a closed one.
"""

from __future__ import annotations

import math
import re
import signal as _signal
from dataclasses import dataclass
from typing import Any

from hgemm.agent.llm.scrub import source_lines

from hgemm.core.record import FAILURE_KINDS, NOT_DEFECTS, EvalRecord, normalize_source

MAX_LINES = 3  # source lines quoted per failure
MESSAGE_SCAN = 200_000  # characters of a message or compiler log that are read at all
_HASH = re.compile(r"[0-9a-f]{16}")

SIGNALS = frozenset(
    "SIGSEGV SIGBUS SIGABRT SIGFPE SIGILL SIGKILL SIGTERM SIGTRAP SIGSYS SIGXCPU SIGXFSZ SIGPIPE SIGHUP "
    "SIGINT SIGQUIT SIGALRM SIGUSR1 SIGUSR2".split()
)

# cudaError_t values a kernel's host code or the runtime can plausibly report.
CUDA_ERRORS = {
    1: "cudaErrorInvalidValue",
    2: "cudaErrorMemoryAllocation",
    3: "cudaErrorInitializationError",
    9: "cudaErrorInvalidConfiguration",
    13: "cudaErrorInvalidSymbol",
    17: "cudaErrorInvalidDevicePointer",
    21: "cudaErrorInvalidMemcpyDirection",
    52: "cudaErrorMissingConfiguration",
    98: "cudaErrorInvalidDeviceFunction",
    101: "cudaErrorInvalidDevice",
    200: "cudaErrorInvalidKernelImage",
    209: "cudaErrorNoKernelImageForDevice",
    218: "cudaErrorInvalidPtx",
    222: "cudaErrorUnsupportedPtxVersion",
    400: "cudaErrorInvalidResourceHandle",
    401: "cudaErrorIllegalState",
    500: "cudaErrorSymbolNotFound",
    600: "cudaErrorNotReady",
    700: "cudaErrorIllegalAddress",
    701: "cudaErrorLaunchOutOfResources",
    702: "cudaErrorLaunchTimeout",
    710: "cudaErrorAssert",
    714: "cudaErrorHardwareStackError",
    715: "cudaErrorIllegalInstruction",
    716: "cudaErrorMisalignedAddress",
    717: "cudaErrorInvalidAddressSpace",
    718: "cudaErrorInvalidPc",
    719: "cudaErrorLaunchFailure",
    720: "cudaErrorCooperativeLaunchTooLarge",
    800: "cudaErrorNotPermitted",
    801: "cudaErrorNotSupported",
    900: "cudaErrorStreamCaptureUnsupported",
    901: "cudaErrorStreamCaptureInvalidated",
    902: "cudaErrorStreamCaptureMerge",
    903: "cudaErrorStreamCaptureUnmatched",
    904: "cudaErrorStreamCaptureUnjoined",
    905: "cudaErrorStreamCaptureIsolation",
    906: "cudaErrorStreamCaptureImplicit",
    907: "cudaErrorCapturedEvent",
    908: "cudaErrorStreamCaptureWrongThread",
    909: "cudaErrorTimeout",
    912: "cudaErrorInvalidClusterSize",
    999: "cudaErrorUnknown",
}
_CUDA_NAMES = frozenset(CUDA_ERRORS.values())
BUFFERS = ("A", "B", "Bt", "C", "workspace")
SANITIZER_TOOLS = ("memcheck", "racecheck")

# What a compile error in the candidate's own file is about: (code, pattern over the diagnostic's text).
COMPILE_CODES: tuple[tuple[str, str], ...] = (
    ("static_assertion", r"static assertion|static_assert"),
    ("error_directive", r"#error"),
    (
        "host_call_in_device_code",
        r"__host__ function.*from a __(?:global|device)__|in device code|"
        r"cannot be called from|not allowed in (?:a )?__(?:global|device)__",
    ),
    ("undefined_identifier", r"is undefined|was not declared|undeclared identifier|has not been declared"),
    ("missing_member", r"has no member|is not a member"),
    ("argument_count", r"too (?:many|few) (?:template )?arguments"),
    ("no_matching_call", r"no instance of|no matching|no suitable|more than one instance|ambiguous"),
    (
        "type_mismatch",
        r"cannot be used to initiali[sz]e|cannot be assigned|incompatible|cannot convert|"
        r"invalid conversion|invalid type conversion|cast",
    ),
    ("not_constant", r"constant value|constant expression|not a constant|must be a constant"),
    ("redefinition", r"already been defined|redefinition|redeclar|multiple definition|previous definition"),
    ("incomplete_type", r"incomplete type"),
    ("inline_asm", r"\basm\b|asm operand|constraint"),
    ("missing_include", r"cannot open source file|No such file"),
    ("template", r"template"),
    ("syntax", r"\bexpected\b|unexpected|unrecognized token|missing|no storage class or type specifier"),
)
# Where an error outside the candidate's file came from: (code, pattern over the whole log line).
ELSEWHERE_CODES: tuple[tuple[str, str], ...] = (
    ("ptxas_shared_memory", r"^ptxas.*too much shared data"),
    ("ptxas_registers", r"^ptxas.*(?:registers|too many resources)"),
    ("ptxas_unresolved", r"^ptxas.*(?:Unresolved|undefined)"),
    (
        "ptxas_instruction",
        r"^ptxas.*(?:Unknown|known instruction|Arguments mismatch|syntax error|[Ii]llegal|"
        r"not supported|requires)",
    ),
    ("ptxas", r"^ptxas"),
    ("linker", r"^nvlink|/ld\b|\bld: |undefined reference|multiple definition"),
    ("assembler", r"Assembler messages|: Error:|\.s:\d+:"),
    ("header", r"^\S+(?:\(\d+\)|:\d+(?::\d+)?):.*\berror\b"),
)
# The static check's reasons (evaluator.static_check) and their codes.
STATIC_CHECK_CODES = {
    "process creation": "process_creation",
    "process control": "process_control",
    "file I/O": "file_io",
    "socket I/O": "sockets",
    "dynamic loading": "dynamic_loading",
    "memory mapping": "memory_mapping",
    "raw system calls": "system_calls",
    "threads": "threads",
    "threads (OpenMP)": "threads",
    "reading or changing the environment": "environment",
    "heap allocation": "heap_allocation",
    "creating or destroying streams (launch only on `stream`)": "streams",
    "creating events (launch only on `stream`)": "events",
    "device control": "device_control",
    "host synchronisation (the result must be complete on an event recorded on `stream`)": "host_sync",
    "blocking copy (use cudaMemcpyAsync on `stream`)": "blocking_copy",
    "blocking memset (use cudaMemsetAsync on `stream`)": "blocking_memset",
    "allocation (the workspace is given)": "device_allocation",
    "persisting-L2 policy": "l2_policy",
    "graph or capture control": "graph_control",
    "host callbacks": "host_callbacks",
    "load-time code or custom sections": "load_time_code",
    "libc internals": "libc_internals",
    "token pasting, which can hide names from this check": "token_pasting",
    "digraphs, which can hide directives from this check": "digraphs",
    "universal character names in code, which can hide names": "universal_character_names",
    "a line splice inside a name, which can hide names": "splice_in_name",
    "includes outside the include path": "include_path",
    "a header for work outside the kernel's job": "banned_header",
    "includes must name their header literally": "computed_include",
    "direct driver API call": "driver_call",
    "driver entry point outside the allowed set": "driver_entry_point",
    "inline assembly outside __device__/__global__ functions": "host_asm",
    "a header name with a path trick or odd characters (./, .., absolute paths)": "include_path",
    "it reads host files into the build": "host_file_read",
    "loading code or reaching runtime internals": "runtime_internals",
    "nvcc's own registration and launch internals": "nvcc_internals",
    "reading the host's identity": "host_identity",
    "walking the process's loader or stack data": "loader_walk",
}
_STATIC_REASON = re.compile(
    r"line (\d{1,7}): .*? is not allowed \(("
    + "|".join(re.escape(why) for why in sorted(STATIC_CHECK_CODES, key=len, reverse=True))
    + r")\)"
)
# Details other kinds can carry: (kind, code, pattern over the message).
DETAIL_CODES: tuple[tuple[str, str, str], ...] = (
    ("bad_source", "not_text", r"not UTF-8|not text|must be text"),
    ("bad_source", "empty", r"source is empty"),
    ("bad_source", "too_large", r"bytes; at most"),
    ("bad_source", "no_entry_point", r"does not define hgemm_run"),
    ("bad_source", "no_c_linkage", r"C linkage"),
    ("load_error", "undefined_symbol", r"undefined symbol"),
    ("load_error", "no_entry_point", r"hgemm_run"),
    ("timeout", "compile_timeout", r"^nvcc ran past"),
    ("sanitizer", "invalid_global_access", r"Invalid __global__"),
    ("sanitizer", "invalid_shared_access", r"Invalid __shared__"),
    ("sanitizer", "invalid_local_access", r"Invalid __local__"),
    ("sanitizer", "misaligned_access", r"[Mm]isaligned"),
    ("sanitizer", "race", r"[Rr]ace|[Hh]azard"),
    ("sanitizer", "sanitizer_timeout", r"^\w+: ran past"),
)
# Numbers the evaluator's own messages hold: (kind, pattern with named numeric groups).
MESSAGE_NUMBERS: tuple[tuple[str, str], ...] = (
    (
        "incorrect",
        r"relative error (?P<relative_error>\S+) \(bound (?P<relative_bound>\S+)\), "
        r"max error (?P<max_error>[^\s,;]+)",
    ),
    ("incorrect", r"(?P<nonfinite_elements>\d+) elements of C are NaN or Inf"),
    ("incorrect", r"(?P<wrong_rows>\d+) rows of C disagree"),
    (
        "unwritten_output",
        r"(?P<unwritten_elements>\d+) of (?P<output_elements>\d+) elements of C never written",
    ),
    ("unwritten_output", r"(?P<unwritten_elements>\d+) elements of C never written"),
    ("timeout", r"ran past (?:its )?(?P<limit_s>[\d.]+) s"),
    (
        "suspicious_speed",
        r"^\w+: (?P<median_us>[\d.]+) us is below the physical floor (?P<floor_us>[\d.]+) us",
    ),
)
NUMBER_NAMES = (
    "relative_error",
    "relative_bound",
    "max_error",
    "nonfinite_elements",
    "wrong_rows",
    "unwritten_elements",
    "output_elements",
    "limit_s",
    "median_us",
    "floor_us",
    "max_rel_err",
    "ref_rel_err",
    "exit_code",
)
_LOCATION = re.compile(
    r"^(?:kernel\.cu\((?P<paren>\d{1,7})\)|kernel\.cu:(?P<colon>\d{1,7})(?::\d+)?):\s*"
    r"(?:fatal |catastrophic )?error\b[^:]*:(?P<text>.*)$"
)
_ERROR_LINE = re.compile(r"\berror\b|\bError\b|\bfatal\b")
_NOT_AN_ERROR = re.compile(
    r"^\S+(?:\(\d+\)|:\d+(?::\d+)?):\s*(?:warning|remark|note)\b|errors? detected|Error limit|aborted due to errors"
)
_CRASH_SIGNAL = re.compile(r"^runner died (?:during|before) [\w-]+ \(signal (SIG[A-Z0-9]+)\)")
_CRASH_EXIT = re.compile(r"^worker died during [\w-]+ \(exit (-?\d{1,4})\)")
_CRASH_CUDA = re.compile(r"^[\w-]+: CUDA error (cudaError\w{1,40})$")
_RETURNED = re.compile(r"^hgemm_run returned CUDA error (-?\d{1,10})\b")
_BUFFER = re.compile(r"(?:guard band around|input) (A|B|Bt|C|workspace)\b")


@dataclass(frozen=True)
class SourceLine:
    """One error in the candidate's own file: its line, a code, and that line of its own source."""

    line: int
    code: str  # a key of COMPILE_CODES or a value of STATIC_CHECK_CODES ("other" when none matched)
    text: str = ""  # the candidate's line, scrubbed (empty when the source is not at hand)


@dataclass(frozen=True)
class Feedback:
    """What a prompt says about one failed candidate."""

    hash: str
    kind: str  # one of FAILURE_KINDS
    signal: str | None = None  # one of SIGNALS
    cuda_error: str | None = None  # one of CUDA_ERRORS' names
    buffer: str | None = None  # one of BUFFERS
    tool: str | None = None  # one of SANITIZER_TOOLS
    details: tuple[str, ...] = ()  # codes of DETAIL_CODES
    numbers: tuple[tuple[str, str], ...] = ()  # (one of NUMBER_NAMES, the number as formatted here)
    lines: tuple[SourceLine, ...] = ()
    more_lines: int = 0  # errors in the candidate's own file beyond those quoted
    elsewhere: tuple[
        tuple[str, int], ...
    ] = ()  # (code of ELSEWHERE_CODES, "outside_source" or "other", count)


def number(value: Any) -> str | None:
    """A finite number as two significant digits (integers below a million whole), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    x = float(value)
    if not math.isfinite(x):
        return None
    rounded = float(f"{x:.2g}")
    if rounded == int(rounded) and abs(rounded) < 1e6:
        return str(int(rounded))
    return f"{x:.2g}"


def _first_match(table: tuple[tuple[str, str], ...], text: str, flags: int = 0) -> str | None:
    return next((code for code, pattern in table if re.search(pattern, text, flags)), None)


def _compile_errors(log: str, source: str | None) -> tuple[list[SourceLine], int, list[tuple[str, int]]]:
    """The errors of a compiler log: those in the candidate's file (quoted up to MAX_LINES), how many
    more there were, and counts per code of those elsewhere."""
    lines = source_lines(source) if source is not None else None
    own: list[SourceLine] = []
    seen: set[tuple[int, str]] = set()
    more = 0
    elsewhere: dict[str, int] = {}
    for raw in log[:MESSAGE_SCAN].split("\n"):
        line = raw.strip()
        if not _ERROR_LINE.search(line) or _NOT_AN_ERROR.search(line):
            continue
        m = _LOCATION.match(line)
        if m:
            n = int(m.group("paren") or m.group("colon"))
            if lines is not None and not 1 <= n <= len(lines):
                elsewhere["outside_source"] = elsewhere.get("outside_source", 0) + 1
                continue
            code = _first_match(COMPILE_CODES, m.group("text"), re.IGNORECASE) or "other"
            if (n, code) in seen:
                continue
            seen.add((n, code))
            if len(own) < MAX_LINES:
                own.append(SourceLine(n, code, lines[n - 1] if lines is not None else ""))
            else:
                more += 1
            continue
        code = _first_match(ELSEWHERE_CODES, line) or "other"
        elsewhere[code] = elsewhere.get(code, 0) + 1
    return own, more, sorted(elsewhere.items())


def _static_check(message: str, source: str | None) -> tuple[list[SourceLine], int]:
    """The static check's findings. With the source at hand the check runs again on the normalised text,
    so line numbers match the lines quoted (the archive keeps sources normalised)."""
    lines = None
    if source is not None:
        from hgemm.evaluator.static_check import banned_reasons

        text = normalize_source(source)
        message = "; ".join(banned_reasons(text))
        lines = source_lines(text)
    found: list[SourceLine] = []
    seen: set[tuple[int, str]] = set()
    more = 0
    for m in _STATIC_REASON.finditer(message[:MESSAGE_SCAN]):
        n, code = int(m.group(1)), STATIC_CHECK_CODES[m.group(2)]
        if (n, code) in seen or (lines is not None and not 1 <= n <= len(lines)):
            continue
        seen.add((n, code))
        if len(found) < MAX_LINES:
            found.append(SourceLine(n, code, lines[n - 1] if lines is not None else ""))
        else:
            more += 1
    return found, more


def _numbers(kind: str, message: str, record: EvalRecord | None) -> tuple[tuple[str, str], ...]:
    out: dict[str, str] = {}
    for k, pattern in MESSAGE_NUMBERS:
        if k != kind:
            continue
        m = re.search(pattern, message)
        if not m:
            continue
        for name, text in m.groupdict().items():
            try:
                value = number(float(text.rstrip(".")))
            except ValueError:
                continue
            if value is not None:
                out.setdefault(name, value)
    if record is not None and kind == "incorrect":
        for name in ("max_rel_err", "ref_rel_err"):
            value = number(getattr(record, name, None))
            if value is not None:
                out.setdefault(name, value)
    return tuple((name, out[name]) for name in NUMBER_NAMES if name in out)


def _crash(message: str) -> tuple[str | None, str | None, tuple[tuple[str, str], ...]]:
    """(signal, CUDA error name, numbers) of a crash message, from the evaluator's own phrasings."""
    m = _CRASH_SIGNAL.match(message)
    if m and m.group(1) in SIGNALS:
        return m.group(1), None, ()
    m = _CRASH_EXIT.match(message)
    if m:
        code = int(m.group(1))
        if code < 0:
            try:
                name = _signal.Signals(-code).name
            except ValueError:
                name = None
            if name in SIGNALS:
                return name, None, ()
        value = number(code)
        return None, None, (("exit_code", value),) if value is not None else ()
    m = _CRASH_CUDA.match(message)
    if m and m.group(1) in _CUDA_NAMES:
        return None, m.group(1), ()
    return None, None, ()


def feedback(result: Any, source: str | None = None) -> Feedback | None:
    """The safe form of an `EvalRecord` or a `CompileResult` that failed; None when it did not fail, or
    failed for a reason that says nothing against the kernel. `source` is the candidate's source (its
    lines are quoted for compile errors and static-check findings)."""
    kind = getattr(result, "failure_kind", None)
    if kind not in FAILURE_KINDS or kind in NOT_DEFECTS:
        return None
    if isinstance(result, EvalRecord) and result.ok:
        return None
    h = getattr(result, "kernel_hash", "")
    if not (isinstance(h, str) and _HASH.fullmatch(h)):
        return None
    raw = getattr(result, "failure_message", None)
    if raw is None:
        raw = getattr(result, "message", None)
    message = (raw if isinstance(raw, str) else "")[:MESSAGE_SCAN]
    if source is not None and not isinstance(source, str):
        source = None
    record = result if isinstance(result, EvalRecord) else None
    out: dict[str, Any] = {"hash": h, "kind": kind}
    if kind == "compile_error":
        log = getattr(result, "log", None)
        text = log if record is None and isinstance(log, str) and log else message
        own, more, elsewhere = _compile_errors(text, source)
        out.update(lines=tuple(own), more_lines=more, elsewhere=tuple(elsewhere))
    elif kind == "static_check":
        found, more = _static_check(message, source)
        out.update(lines=tuple(found), more_lines=more)
    elif kind == "crash":
        out["signal"], out["cuda_error"], out["numbers"] = _crash(message)
    elif kind in ("launch_error", "not_capturable"):
        m = _RETURNED.match(message)
        if m:
            out["cuda_error"] = CUDA_ERRORS.get(int(m.group(1)), "cudaErrorUnknown")
    elif kind in ("out_of_bounds", "input_modified"):
        m = _BUFFER.search(message)
        out["buffer"] = m.group(1) if m else None
    elif kind == "sanitizer":
        m = re.match(r"(memcheck|racecheck)\b", message)
        out["tool"] = m.group(1) if m else None
    details = [code for k, code, pattern in DETAIL_CODES if k == kind and re.search(pattern, message)]
    out["details"] = tuple(dict.fromkeys(details))[:3]
    if "numbers" not in out or not out["numbers"]:
        out["numbers"] = _numbers(kind, message, record)
    return Feedback(**out)
