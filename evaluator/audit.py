"""Audit of what nvcc built from a candidate, before any of it is linked or loaded.

`audit_build` judges the candidate's own lines of nvcc's preprocessed host translation unit
(`static_check.expanded_reasons`), its host object and ptxas' report of its device memory; `library_reasons`
judges the linked `.so`. Each returns the reasons to refuse (empty: accepted), failure kind "object_audit".

- The object audited is the object linked, and only once it passed: `nvcc -c`, audit, link that same file.
- Every undefined symbol is in `ALLOWED_IMPORTS` (by name, before any `@version`); any other refuses, named.
- The object defines no C-named function but `hgemm_run`, `hgemm_supports` and extern "C" kernels, no
  reserved or C-library variable name, and nothing of operator new/delete, std::, the C++ ABI or the CUDA
  runtime: such a definition would replace the library's own inside the linked `.so`.
- Host code holds no system-call instruction, aligned or hidden in another's bytes, and no `int` or far
  transfer.
- Load-time code is nvcc's registration only, plus the per-file iostream initialiser of g++ before 13
  (recognised by everything it touches); no other init/fini entry, IFUNC, thread-local storage or unexpected
  section, executable code only in `.text*`, no executable stack.
- Sizes stay under caps (see the constants); the only external tool is `objdump`, run through `run_tool`.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hgemm.evaluator.static_check import expanded_reasons

from hgemm.core.errors import NoCompiler

# ---------------------------------------------------------------------------------------------- caps

# Our largest family object is about 0.1 MiB and its linked library about 1 MiB (most of it the static
# CUDA runtime); 32 MiB leaves room for heavily instantiated candidates and stops a giant table.
MAX_LIBRARY_BYTES = 32 << 20
# `__device__`/`__constant__` memory a module allocates when it loads and keeps while it stays loaded. Our
# families use at most 6 KiB (stream-K flags); scratch belongs in the 64 MiB workspace.
MAX_DEVICE_STATIC_BYTES = 4 << 20
# Host `.data`/`.bss`/`.rodata`: our families use well under 4 KiB.
MAX_HOST_STATIC_BYTES = 16 << 20

# ------------------------------------------------------------------------------------------ imports

# nvcc's own code in every object: fat-binary registration, kernel stubs, launch configuration.
_NVCC_HELPERS = (
    "__cudaRegisterFatBinary __cudaRegisterFatBinaryEnd __cudaUnregisterFatBinary __cudaRegisterFunction "
    "__cudaRegisterVar __cudaInitModule __cudaPushCallConfiguration __cudaPopCallConfiguration "
    "__cudaLaunchKernel __cudaGetKernel atexit"
)
# The contract's launch-side runtime calls: query the device, set attributes, size grids, launch, clear.
_RUNTIME_CALLS = (
    "cudaLaunchKernel cudaLaunchKernelExC cudaLaunchCooperativeKernel cudaFuncSetAttribute "
    "cudaFuncGetAttributes cudaFuncSetCacheConfig cudaGetLastError cudaPeekAtLastError cudaGetErrorString "
    "cudaGetErrorName cudaGetDevice cudaGetDeviceCount cudaDeviceGetAttribute cudaGetDeviceProperties "
    "cudaGetDeviceProperties_v2 cudaDriverGetVersion cudaRuntimeGetVersion cudaMemsetAsync cudaMemset2DAsync "
    "cudaMemcpyAsync cudaMemcpy2DAsync cudaMemcpyToSymbolAsync cudaMemcpyFromSymbolAsync cudaGetSymbolAddress "
    "cudaGetSymbolSize cudaOccupancyMaxActiveBlocksPerMultiprocessor "
    "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags cudaOccupancyMaxActiveClusters "
    "cudaOccupancyMaxPotentialClusterSize cudaOccupancyAvailableDynamicSMemPerBlock "
    # by one literal name from the static check's allowed set (TMA descriptors): judged in the source
    "cudaGetDriverEntryPoint cudaGetDriverEntryPointByVersion"
)
# What g++ emits for C++: guards of function-local statics, unwinding and catching (not throwing: an uncaught
# exception's text would reach the worker's log), RTTI, deletes.
_CXX_ABI = (
    "__cxa_guard_acquire __cxa_guard_release __cxa_guard_abort __cxa_atexit __dso_handle __cxa_pure_virtual "
    "__cxa_deleted_virtual __gxx_personality_v0 _Unwind_Resume __cxa_begin_catch __cxa_end_catch __cxa_rethrow "
    "__cxa_call_terminate _ZSt9terminatev "
    "__stack_chk_fail _ZdlPv _ZdlPvm _ZdaPv _ZdaPvm _ZTVN10__cxxabiv117__class_type_infoE "
    "_ZTVN10__cxxabiv120__si_class_type_infoE _ZTVN10__cxxabiv121__vmi_class_type_infoE"
)
# C library functions plain code compiles to: copies and fills, string compares, assert, arithmetic.
_C_HELPERS = "memcpy memmove memset memcmp strlen strcmp strncmp __assert_fail abs labs llabs"
_MATH = " ".join(
    f"{f} {f}f"
    for f in (
        "sqrt cbrt ceil floor round lround llround trunc fmod log log2 log10 log1p exp exp2 expm1 pow fabs fmin fmax "
        "frexp ldexp ilogb nearbyint rint lrint llrint hypot sin cos tan atan atan2 tanh erf"
    ).split()
)
# Console output (the worker's own log), never files.
_CONSOLE = "printf puts putchar snprintf vsnprintf sprintf vsprintf"
# What g++ emits for a file that includes <iostream>, as CuTe's headers do: before g++ 13 a per-file
# initialiser (judged on its own below), from g++ 13 on a reference to libstdc++'s own initialiser
# (std::ios_base_library_init, no code in the object); and the GOT anchor the assembler names.
_TOOLCHAIN = "_ZNSt8ios_base4InitC1Ev _ZNSt8ios_base4InitD1Ev _ZSt21ios_base_library_initv _GLOBAL_OFFSET_TABLE_"

ALLOWED_IMPORTS = frozenset(
    " ".join((_NVCC_HELPERS, _RUNTIME_CALLS, _CXX_ABI, _C_HELPERS, _MATH, _CONSOLE, _TOOLCHAIN)).split()
)


def import_allowed(name: str) -> bool:
    """True for an allowed import, also in the fortified (`__printf_chk`) and finite-math spellings."""
    base = name.split("@", 1)[0]
    if base in ALLOWED_IMPORTS:
        return True
    m = re.fullmatch(r"__(\w+?)_(?:chk|finite)", base)
    return bool(m and m.group(1) in ALLOWED_IMPORTS)


# Mangled names a candidate must not define: global operator new/delete replace the process's for the
# whole library, and std::, the C++ ABI and the CUDA runtime's own names would stand in for theirs.
_FOREIGN_MANGLED = re.compile(
    r"^_Z(?:n[wa]|d[la]|St|NSt|NKSt|N9__gnu_cxx|N10__cxxabiv1|N6cudart|T[VIS]St|T[VIS]N10__cxxabiv1)"
)
_C_ENTRY_POINTS = {"hgemm_run", "hgemm_supports"}
# The C library's own variables, which a candidate's globals must not shadow.
_LIBC_DATA = frozenset(
    "environ stdin stdout stderr optarg optind opterr optopt timezone daylight tzname signgam "
    "program_invocation_name program_invocation_short_name".split()
)
_HIDDEN_SYSCALLS = {b"\x0f\x05": "syscall", b"\x0f\x34": "sysenter", b"\xcd\x80": "int 0x80"}
HIDDEN_BYTES_REASON = "host code holds the bytes of"  # how every reason about those bytes begins
_BANNED_MNEMONICS = re.compile(
    r"^(?:syscall|sysenter|sysexit|sysret[lq]?|int[13o]?|into|icebp|ljmp[lqw]?|lcall[lqw]?)$"
)

_SECTION_OK = re.compile(
    r"^(?:|\.text(?:\..*)?|\.data(?:\..*)?|\.bss(?:\..*)?|\.rodata(?:\..*)?|\.nv_fatbin|\.nvFatBinSegment|"
    r"__nv_module_id|\.init_array|\.fini_array|\.comment|\.note\.GNU-stack|\.note\.gnu\.property|\.eh_frame|"
    r"\.gcc_except_table(?:\..*)?|\.group|\.symtab|\.strtab|\.shstrtab|\.symtab_shndx|\.rela?\..+|\.debug_\w+)$"
)
# nvcc's registration function (`__sti____cudaRegisterAll`), the one load-time entry of every object.
_REGISTRATION = re.compile(r"__sti____cudaRegisterAll")
# What g++ (before 13) runs at load time for a file that includes <iostream>.
_IOSTREAM_INIT = frozenset(
    ("_ZNSt8ios_base4InitC1Ev", "_ZNSt8ios_base4InitD1Ev", "_ZStL8__ioinit", "__cxa_atexit", "__dso_handle")
)
_HOST_STATIC = re.compile(r"^\.(?:data|bss|rodata|tdata|tbss)(?:\..*)?$")

# ELF constants
_SHT_SYMTAB, _SHT_RELA, _SHT_NOBITS, _SHT_REL = 2, 4, 8, 9
_SHT_INIT_ARRAY, _SHT_FINI_ARRAY, _SHT_PREINIT_ARRAY = 14, 15, 16
_SHF_WRITE, _SHF_EXECINSTR, _SHF_TLS = 0x1, 0x4, 0x400
_STT_OBJECT, _STT_FUNC, _STT_SECTION, _STT_FILE, _STT_TLS, _STT_GNU_IFUNC = 1, 2, 3, 4, 6, 10
_STB_LOCAL, _STB_GLOBAL = 0, 1


def _policy_id() -> str:
    """Changes whenever this module or the static check changes, so cached verdicts are re-judged."""
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for name in ("audit.py", "static_check.py"):
        digest.update((here / name).read_bytes())
    return digest.hexdigest()[:16]


POLICY_ID = _policy_id()


# ---------------------------------------------------------------------------------------------- ELF


class ElfError(ValueError):
    pass


@dataclass
class Section:
    index: int
    name: str
    type: int
    flags: int
    offset: int
    size: int
    entsize: int
    link: int = 0
    info: int = 0


@dataclass
class Symbol:
    name: str
    type: int
    bind: int
    shndx: int
    size: int
    value: int = 0


@dataclass
class Relocation:
    offset: int  # where, in the section it applies to
    symbol: int  # index into the symbol table
    addend: int


@dataclass
class Elf:
    data: bytes
    sections: list[Section]
    symbols: list[Symbol]  # the symbol table, in order (relocations index it)

    def content(self, s: Section) -> bytes:
        return b"" if s.type == _SHT_NOBITS else self.data[s.offset : s.offset + s.size]

    def relocations(self, target: Section) -> list[Relocation]:
        """The RELA entries that apply to `target`."""
        out = []
        for s in self.sections:
            if s.type == _SHT_RELA and s.info == target.index:
                for k in range(s.size // 24):
                    r_offset, r_info, r_addend = struct.unpack_from("<QQq", self.data, s.offset + 24 * k)
                    if r_info >> 32 >= len(self.symbols):
                        raise ElfError(f"a relocation in {s.name} names no symbol")
                    out.append(Relocation(r_offset, r_info >> 32, r_addend))
        return out

    def covering(self, shndx: int, offset: int, kinds: tuple[int, ...]) -> Symbol | None:
        """The symbol of one of `kinds` whose extent in section `shndx` holds `offset`."""
        for sym in self.symbols:
            if (
                sym.shndx == shndx
                and sym.type in kinds
                and sym.value <= offset < sym.value + max(sym.size, 1)
            ):
                return sym
        return None


def _cstr(table: bytes, offset: int) -> str:
    if not 0 <= offset < len(table):
        raise ElfError("a name lies outside its string table")
    end = table.find(b"\0", offset)
    return table[offset : end if end >= 0 else len(table)].decode("utf-8", "replace")


def read_elf(data: bytes) -> Elf:
    """Sections, symbols and relocations of a 64-bit little-endian x86-64 relocatable object; ElfError otherwise."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ElfError("not a 64-bit little-endian ELF file")
    e_type, e_machine = struct.unpack_from("<HH", data, 16)
    if e_type != 1 or e_machine != 62:
        raise ElfError("not an x86-64 relocatable object")
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shentsize != 64 or shoff + shnum * 64 > len(data) or shstrndx >= max(shnum, 1):
        raise ElfError("section headers out of bounds")
    raw = []
    for i in range(shnum):
        name, typ, flags, _addr, off, size, link, info, _align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, shoff + 64 * i
        )
        if typ != _SHT_NOBITS and off + size > len(data):
            raise ElfError(f"section {i} out of bounds")
        raw.append((name, typ, flags, off, size, entsize, link, info))
    strtab = data[raw[shstrndx][3] : raw[shstrndx][3] + raw[shstrndx][4]]
    sections = [Section(i, _cstr(strtab, r[0]), *r[1:]) for i, r in enumerate(raw)]
    symtabs = [s for s in sections if s.type == _SHT_SYMTAB]
    if len(symtabs) > 1:
        raise ElfError("more than one symbol table")
    symbols: list[Symbol] = []
    for s in symtabs:
        if s.link >= len(sections):
            raise ElfError("symbol table names no string table")
        names = data[sections[s.link].offset : sections[s.link].offset + sections[s.link].size]
        for k in range(s.size // 24):
            st_name, st_info, _other, st_shndx, st_value, st_size = struct.unpack_from(
                "<IBBHQQ", data, s.offset + 24 * k
            )
            symbols.append(
                Symbol(_cstr(names, st_name), st_info & 0xF, st_info >> 4, st_shndx, st_size, st_value)
            )
    return Elf(data, sections, symbols)


# ----------------------------------------------------------------------------------------- the audit


def run_tool(cmd: list[str], timeout_s: float = 120) -> tuple[int, str]:
    """Run an inspection tool on a build product, in the sandbox: (exit code, stdout). The one
    place tools are started; a tool that runs out of time raises subprocess.TimeoutExpired."""
    from hgemm.evaluator import sandbox

    folder = sandbox.private_folder("tool-")
    try:
        code, out = sandbox.run(cmd, "compile", folder, timeout_s, with_stderr=False)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    if code is None:
        raise subprocess.TimeoutExpired(cmd, timeout_s)
    return code, out


def _name_demangled(reasons: list[str]) -> None:
    """Add the C++ spelling to every mangled name quoted in `reasons` (`_Znwm` -> operator new(unsigned long))."""
    names = sorted({m for r in reasons for m in re.findall(r"`(_Z\w+)`", r)})
    tool = shutil.which("c++filt")
    if not names or not tool:
        return
    try:
        code, out = run_tool([tool, *names], timeout_s=30)
    except (OSError, subprocess.SubprocessError):
        return
    plain = dict(zip(names, out.splitlines())) if code == 0 else {}
    for k, r in enumerate(reasons):
        for name, spelled in plain.items():
            if spelled != name and f"`{name}`" in r and f"`{name}` (" not in r:
                r = r.replace(f"`{name}`", f"`{name}` ({spelled})")
        reasons[k] = r


def find_objdump() -> str:
    path = shutil.which("objdump")
    if not path:
        raise NoCompiler(
            "objdump was not found on PATH; install binutils (the object audit disassembles host code)"
        )
    return path


def _iostream_inits(elf: Elf) -> int:
    """1 when the object holds g++'s per-file iostream initialiser (judged by `_startup_reasons`), else 0."""
    return int(any(sym.name == "_ZStL8__ioinit" and sym.size == 1 for sym in elf.symbols))


def _is_init(s: Section) -> bool:
    return s.type in (_SHT_INIT_ARRAY, _SHT_PREINIT_ARRAY) or s.name.startswith(
        (".init_array", ".ctors", ".preinit_array")
    )


def _is_fini(s: Section) -> bool:
    return s.type == _SHT_FINI_ARRAY or s.name.startswith((".fini_array", ".dtors"))


def load_time_entries(elf: Elf) -> tuple[int, int]:
    """(entries run when the library loads, entries run when it unloads)."""
    init = sum(s.size // 8 for s in elf.sections if _is_init(s))
    fini = sum(s.size // 8 for s in elf.sections if _is_fini(s) and not _is_init(s))
    return init, fini


def _target(elf: Elf, rel: Relocation) -> tuple[int, int, str]:
    """(section index, offset, name) a relocation points at (a section symbol's addend is the offset)."""
    sym = elf.symbols[rel.symbol]
    if sym.type == _STT_SECTION:
        return sym.shndx, rel.addend, ""
    return sym.shndx, sym.value + rel.addend, sym.name


def _startup_reasons(elf: Elf) -> list[str]:
    """What runs at load time besides nvcc's registration: only the per-file iostream initialiser that g++ before
    13 emits for any file including <iostream> (CuTe's headers do) is accepted; anything else names itself."""
    reasons = []
    for section in elf.sections:
        if not _is_init(section):
            continue
        for rel in elf.relocations(section):
            shndx, offset, _ = _target(elf, rel)
            fn = elf.covering(shndx, offset, (_STT_FUNC,))
            if fn is None:
                reasons.append(f"a load-time entry of `{section.name}` points at no function")
                continue
            if _REGISTRATION.search(fn.name):
                continue  # nvcc's own registration of the fat binary and its kernels
            code = elf.sections[fn.shndx] if fn.shndx < len(elf.sections) else None
            touched = set()
            for inner in elf.relocations(code) if code else []:
                if fn.value <= inner.offset < fn.value + fn.size:
                    t_shndx, t_offset, name = _target(elf, inner)
                    if not name:  # a section-relative reference: name the object it lands in
                        obj = elf.covering(t_shndx, t_offset + 4, (_STT_OBJECT,)) or elf.covering(
                            t_shndx, t_offset, (_STT_OBJECT,)
                        )
                        name = obj.name if obj else f"{elf.sections[t_shndx].name}+{t_offset:#x}"
                    touched.add(name)
            extra = sorted(touched - _IOSTREAM_INIT)
            if not extra and "_ZNSt8ios_base4InitC1Ev" not in touched:
                extra = ["no std::ios_base::Init"]
            if extra:
                reasons.append(
                    f"code runs when the library loads ({fn.name}, which uses {', '.join(extra[:6])}): a "
                    "namespace-scope object with a constructor or a dynamic initialiser, or a constructor function; "
                    "compute it in hgemm_run (function-local statics are fine)"
                )
    return reasons


@dataclass
class Baseline:
    """What an empty contract kernel's object holds that a candidate's may hold too."""

    init_entries: int
    fini_entries: int

    @classmethod
    def of(cls, obj: Path) -> Baseline:
        return cls(*load_time_entries(read_elf(obj.read_bytes())))


@dataclass
class AuditReport:
    reasons: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)


_GMEM = re.compile(r"^ptxas info\s*:\s*(\d+) bytes gmem", re.MULTILINE)


def device_static_bytes(ptxas_log: str) -> int:
    """The most `__device__`/`__constant__` global memory ptxas reports for any architecture."""
    return max((int(m.group(1)) for m in _GMEM.finditer(ptxas_log)), default=0)


def _kernel_c_names(elf: Elf) -> set[str]:
    """Names of extern "C" kernels, from the host stub nvcc gives each: `_Z<n>__device_stub__Z<len><name>...`
    (a C++-mangled stub) or `__device_stub__<name>`."""
    names = set()
    for sym in elf.symbols:
        m = re.search(r"__device_stub__Z(\d+)", sym.name)
        if m:
            names.add(sym.name[m.end() : m.end() + int(m.group(1))])
        m = re.fullmatch(r"__device_stub__([A-Za-z_]\w*)", sym.name)
        if m:
            names.add(m.group(1))
    return names


def _disassembly_reasons(obj: Path, elf: Elf) -> list[str]:
    code, out = run_tool([find_objdump(), "-d", "--no-show-raw-insn", "-w", str(obj)])
    if code != 0:
        return ["the object could not be disassembled"]
    reasons, section = [], ""
    for line in out.splitlines():
        m = re.match(r"^Disassembly of section (\S+):", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(
            r"^\s*([0-9a-f]+):\s+(?:(?:rex\.?\w*|lock|rep\w*|notrack|bnd|data16|addr32|cs|ds|ss|es|fs|gs)\s+)*(\S+)",
            line,
        )
        if m and _BANNED_MNEMONICS.match(m.group(2)):
            reasons.append(f"host code holds a `{m.group(2)}` instruction ({section}+0x{m.group(1)})")
    for s in elf.sections:
        if not s.flags & _SHF_EXECINSTR:
            continue
        body = elf.content(s)
        for pattern, what in _HIDDEN_SYSCALLS.items():
            at = body.find(pattern)
            if at >= 0:
                reasons.append(f"{HIDDEN_BYTES_REASON} a `{what}` instruction ({s.name}+0x{at:x})")
    return reasons


def audit_object(obj: Path, baseline: Baseline) -> AuditReport:
    """Imports, exports, instructions, load-time code, sections and sizes of the candidate's host object."""
    report = AuditReport()
    reasons, facts = report.reasons, report.facts
    size = obj.stat().st_size
    facts["object_bytes"] = size
    if size > MAX_LIBRARY_BYTES:
        reasons.append(
            f"the object is {size} bytes; at most {MAX_LIBRARY_BYTES} are accepted (a giant table?)"
        )
        return report
    try:
        elf = read_elf(obj.read_bytes())
    except (ElfError, struct.error) as e:
        reasons.append(f"the object is not a readable ELF file ({e})")
        return report

    imports = sorted(
        {s.name for s in elf.symbols if s.shndx == 0 and s.name and s.type not in (_STT_SECTION, _STT_FILE)}
    )
    facts["imports"] = imports
    for name in imports:
        if not import_allowed(name):
            reasons.append(f"host code imports `{name}`, which is not among the calls the contract allows")

    kernels = _kernel_c_names(elf)
    for sym in elf.symbols:
        if sym.bind == _STB_LOCAL or sym.shndx == 0 or not sym.name or sym.type in (_STT_SECTION, _STT_FILE):
            continue
        name = sym.name
        if name.startswith("_Z"):
            # template instantiations are weak copies of the headers' code; a strong definition, or any
            # operator new/delete, replaces the library's own
            if _FOREIGN_MANGLED.match(name) and (sym.bind == _STB_GLOBAL or name.startswith(("_Zn", "_Zd"))):
                reasons.append(
                    f"the object defines `{name}`, a name of the C++ or CUDA runtime it would replace"
                )
        elif name in _C_ENTRY_POINTS or name.startswith("DW.ref.") or name in kernels:
            continue
        elif sym.type == _STT_OBJECT and not name.startswith("_") and name not in _LIBC_DATA:
            continue  # a plain global variable (`int g_sms;` at namespace scope has a C name in C++ too)
        else:
            reasons.append(
                f'the object defines the C symbol `{name}`: only hgemm_run, hgemm_supports, extern "C" kernels '
                "and plain global variables may (a C function or a reserved name could take the place of a "
                "library's inside the linked library)"
            )
    for sym in elf.symbols:
        if sym.type == _STT_GNU_IFUNC:
            reasons.append(f"`{sym.name}` is an IFUNC symbol (its resolver runs when the library loads)")
        elif sym.type == _STT_TLS:
            reasons.append(f"`{sym.name}` is thread-local storage (not part of the contract)")

    init, fini = load_time_entries(elf)
    facts["load_time_entries"] = init
    startup = _startup_reasons(elf)
    reasons.extend(startup)
    if not startup and (init > baseline.init_entries + _iostream_inits(elf) or fini > baseline.fini_entries):
        reasons.append(
            f"code runs when the library loads or unloads ({init} + {fini} entries; an empty kernel has "
            f"{baseline.init_entries} + {baseline.fini_entries})"
        )

    host_static = 0
    for s in elf.sections:
        if not _SECTION_OK.match(s.name):
            reasons.append(f"the object has a section `{s.name}`, which plain code never produces")
        elif s.name.startswith(".rel") and s.type not in (_SHT_RELA, _SHT_REL):
            reasons.append(f"the object has a section `{s.name}` that is not a relocation table")
        elif s.type in (_SHT_INIT_ARRAY, _SHT_FINI_ARRAY, _SHT_PREINIT_ARRAY) and s.name not in (
            ".init_array",
            ".fini_array",
        ):
            reasons.append(f"the object has a load-time section `{s.name}`")
        if s.flags & _SHF_EXECINSTR and not (s.name == ".text" or s.name.startswith(".text.")):
            reasons.append(f"the section `{s.name}` is executable")
        if s.flags & _SHF_TLS:
            reasons.append(f"the section `{s.name}` is thread-local storage")
        if _HOST_STATIC.match(s.name):
            host_static += s.size
    facts["host_static_bytes"] = host_static
    if host_static > MAX_HOST_STATIC_BYTES:
        reasons.append(
            f"host static data is {host_static} bytes; at most {MAX_HOST_STATIC_BYTES} are accepted"
        )
    if not any(s.name == ".note.GNU-stack" for s in elf.sections):
        reasons.append("the object does not declare a non-executable stack")
    reasons.extend(_disassembly_reasons(obj, elf))
    _name_demangled(reasons)
    return report


def audit_build(
    obj: Path, preprocessed: Path | None, filename: str, ptxas_log: str, baseline: Baseline
) -> AuditReport:
    """Everything judged between compiling the object and linking it: expanded source, object, device memory."""
    report = AuditReport()
    if preprocessed is None or not preprocessed.is_file():
        report.reasons.append("nvcc left no preprocessed host translation unit to audit")
    else:
        report.reasons.extend(expanded_reasons(preprocessed.read_text(errors="replace"), filename))
    gmem = device_static_bytes(ptxas_log)
    report.facts["device_static_bytes"] = gmem
    if gmem > MAX_DEVICE_STATIC_BYTES:
        report.reasons.append(
            f"device code declares {gmem} bytes of __device__/__constant__ memory; at most {MAX_DEVICE_STATIC_BYTES} "
            "are accepted (use the workspace)"
        )
    obj_report = audit_object(obj, baseline)
    report.reasons.extend(obj_report.reasons)
    report.facts.update(obj_report.facts)
    return report


def library_reasons(lib: Path) -> tuple[list[str], int]:
    """(reasons, size) for the linked library."""
    size = os.path.getsize(lib)
    if size > MAX_LIBRARY_BYTES:
        return [f"the library is {size} bytes; at most {MAX_LIBRARY_BYTES} are accepted"], size
    return [], size
