"""The test kernels on disk: adversarial ones (tests/adversarial) and honest ones (tests/honest).

Each adversarial `.cu` opens with `// CHEAT: <how it cheats or breaks>` and
`// EXPECT: <failure kind>[|<alternative>...]`; each honest one with `// HONEST: <what it is>`.
`// EXPECT: no_gain` plus `// TWIN: <honest kernel>` marks a cheat the evaluator makes pointless rather
than refuses: it must be accepted, and timed no faster than its honest twin.
`adversarial()` and `honest()` read and validate these headers, so a malformed kernel file
fails every test that uses it.
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
    twin: str = ""  # for no_gain: the honest kernel it must not beat

    @property
    def static(self) -> bool:
        """True when the static check must refuse it."""
        return self.expect == ("static_check",)


def _header(path: Path, line_no: int, tag: str) -> str:
    lines = path.read_text().splitlines()
    prefix = f"// {tag}:"
    if len(lines) <= line_no or not lines[line_no].startswith(prefix):
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
        kernels.append(KernelFile(path.stem, path, path.read_text(), _header(path, 0, "CHEAT"), expect, twin))
    return kernels


def honest() -> list[KernelFile]:
    return [
        KernelFile(p.stem, p, p.read_text(), _header(p, 0, "HONEST"))
        for p in sorted((TESTS / "honest").glob("*.cu"))
    ]
