"""Test helper: build one kernel source with nvcc exactly as the evaluator does (its flags, sm_90a + sm_80) and
check that it compiles without warnings or register spills."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from hgemm.evaluator.compile import DEFAULT_ARCHS, nvcc_flags


def build_without_spills(source: str, workdir: Path) -> str:
    """nvcc's resource log of `source` (the library lands in workdir/k.so); fails the test on an error, a warning
    or any spill."""
    cu = workdir / "k.cu"
    cu.write_text(source)
    proc = subprocess.run(["nvcc", *nvcc_flags(DEFAULT_ARCHS), str(cu), "-o", str(workdir / "k.so")],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = proc.stderr
    assert "warning" not in log.lower(), log
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert spills and all(s == ("0", "0") for s in spills), log
    return log


def entry_report(log: str, kernel: str, arch: str = "sm_90a") -> str:
    """ptxas' report of the one entry function whose name holds `kernel`, compiled for `arch` (its properties,
    registers and barriers), from a `build_without_spills` log of a source with several kernels."""
    for part in log.split("Compiling entry function '")[1:]:
        name, _, rest = part.partition("'")
        if kernel in name and rest.startswith(f" for '{arch}'"):
            return rest
    raise AssertionError(f"no entry function {kernel} for {arch} in the log")
