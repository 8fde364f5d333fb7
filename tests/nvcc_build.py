"""Test helper: build one kernel source with nvcc for sm_90a and sm_80, as the evaluator does, and check that
it compiles without warnings or register spills."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

FLAGS = ["-O3", "-std=c++17", "--expt-relaxed-constexpr", "-shared", "-Xcompiler", "-fPIC", "-Xptxas", "-v",
         "-gencode=arch=compute_90a,code=sm_90a", "-gencode=arch=compute_80,code=sm_80"]  # fmt: skip


def build_without_spills(source: str, workdir: Path) -> str:
    """nvcc's resource log of `source`; fails the test on an error, a warning or any spill."""
    cu = workdir / "k.cu"
    cu.write_text(source)
    proc = subprocess.run(["nvcc", *FLAGS, str(cu), "-o", str(workdir / "k.so")], capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = proc.stderr
    assert "warning" not in log.lower(), log
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert spills and all(s == ("0", "0") for s in spills), log
    return log
