"""The test kernels on disk: adversarial ones (tests/adversarial) and honest ones (tests/honest).

Each adversarial `.cu` opens with `// CHEAT: <how it cheats or breaks>` and
`// EXPECT: <failure kind>[|<alternative>...]`, optionally followed by `// NO-BUILD: <why>` for a
kernel the tests must never hand to nvcc (a compile bomb); each honest one with
`// HONEST: <what it is>`. `// EXPECT: no_gain` plus `// TWIN: <honest kernel>` marks a cheat the
evaluator makes pointless rather than refuses: it must be accepted, and timed no faster than its honest
twin. `adversarial()` and `honest()` read and validate these headers, so a malformed kernel file fails
every test that uses it. Sources are the files' exact bytes (a lone carriage return stays one).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hgemm.core.record import FAILURE_KINDS

TESTS = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class KernelFile:
    name: str  # file stem
    path: Path
    source: str
    summary: str  # the CHEAT or HONEST line
    expect: tuple[str, ...] = ()  # accepted failure kinds; empty for honest kernels; ("no_gain",) for neutralised
    builds: bool = True  # False: never compiled by the tests (NO-BUILD)
    twin: str = ""  # for no_gain: the honest kernel it must not beat

    @property
    def static(self) -> bool:
        """True when the static check must refuse it."""
        return self.expect == ("static_check",)

    @property
    def cpu_stage(self) -> bool:
        """True when it is refused before any GPU is needed (`hgemm check` refuses it)."""
        return set(self.expect) <= {"bad_source", "static_check", "compile_error", "object_audit"}


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8")


def _header(path: Path, line_no: int, tag: str, optional: bool = False) -> str | None:
    lines = _read(path).split("\n")
    prefix = f"// {tag}:"
    if len(lines) <= line_no or not lines[line_no].startswith(prefix):
        if optional:
            return None
        raise ValueError(f"{path.name}: line {line_no + 1} must start with '{prefix}'")
    return lines[line_no][len(prefix) :].strip()


def adversarial() -> list[KernelFile]:
    kernels = []
    for path in sorted((TESTS / "adversarial").glob("*.cu")):
        expect = tuple(k.strip() for k in _header(path, 1, "EXPECT").split("|"))
        twin = ""
        if expect == ("no_gain",):
            twin = _header(path, 2, "TWIN")
            if not (TESTS / "honest" / f"{twin}.cu").is_file():
                raise ValueError(f"{path.name}: TWIN names no honest kernel {twin!r}")
        else:
            unknown = [k for k in expect if k not in FAILURE_KINDS]
            if unknown:
                raise ValueError(f"{path.name}: EXPECT names unknown failure kinds {unknown}")
        builds = _header(path, 2, "NO-BUILD", optional=True) is None
        kernels.append(KernelFile(path.stem, path, _read(path), _header(path, 0, "CHEAT"), expect, builds, twin))
    return kernels


def honest() -> list[KernelFile]:
    return [
        KernelFile(p.stem, p, _read(p), _header(p, 0, "HONEST"))
        for p in sorted((TESTS / "honest").glob("*.cu"))
    ]
