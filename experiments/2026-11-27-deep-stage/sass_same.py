"""Does `stage_k` 64 build to the template's former code? (no GPU)

Renders six configurations (64x32 with the warp producer, 64x64 with the 2x1 cluster, 128x256 with it and the C
panel ring, 128x64 ping-pong, a DSMEM split, the transposed product) with the template as it is (stage_k 64) and
with the template of commit REV (before the parameter), builds both for sm_90a and compares their SASS with
addresses stripped. Prints SAME or the instruction counts that differ.

Usage: python sass_same.py [REV]   (default 13ffe56; needs nvcc, git, and cuobjdump on PATH or in the nvidia wheel)
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from hgemm.evaluator.kernels import get_family

REPO = Path(__file__).resolve().parents[2]
KERNELS = "evaluator/kernels"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*$', re.M)
ONE = {"consumers": 1, "pingpong": 0, "group_m": 8, "persistent": 1}
CONFIGS = {
    "64x32 warp": {**ONE, "bm": 64, "bn": 32, "stages": 16, "warp_producer": 1, "cluster_m": 1, "epilogue": 1},
    "64x64 c2": {**ONE, "bm": 64, "bn": 64, "stages": 12, "cluster_m": 2, "epilogue": 1, "group_m": 4},
    "128x256 c2": {**ONE, "bm": 128, "bn": 256, "consumers": 2, "stages": 4, "cluster_m": 2, "epilogue": 1,
                   "epi_panels": 2},
    "128x64 pp": {**ONE, "bm": 128, "bn": 64, "consumers": 2, "stages": 8, "warp_producer": 1, "cluster_m": 1,
                  "epilogue": 1, "pingpong": 1},
    "dsmem": {**ONE, "bm": 64, "bn": 64, "stages": 14, "warp_producer": 1, "cluster_m": 1, "epilogue": 0,
              "persistent": 0, "split_k": 2, "split_dsmem": 1},
    "swap": {**ONE, "bm": 64, "bn": 64, "stages": 14, "cluster_m": 2, "epilogue": 0, "swap_ab": 1},
}


def cuobjdump() -> str:
    found = shutil.which("cuobjdump")
    if found:
        return found
    import nvidia

    hits = sorted(Path(p) for base in nvidia.__path__ for p in Path(base).glob("*/bin/cuobjdump"))
    if not hits:
        sys.exit("cuobjdump not found")
    return str(hits[0])


def old_render(rev: str, new_source: str) -> str:
    """The same configuration through the template of `rev`: its defines minus HG_STAGE_K, its headers inlined."""
    files = {}

    def text(name: str) -> str:
        if name not in files:
            files[name] = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{KERNELS}/{name}"],
                                         capture_output=True, text=True, check=True).stdout  # fmt: skip
        return files[name]

    seen: set[str] = set()

    def expand(m: re.Match) -> str:
        name = m.group(1)
        if name in seen:
            return ""
        seen.add(name)
        return INCLUDE.sub(expand, text(name).replace("#pragma once", ""))

    defines = [line for line in new_source.splitlines() if line.startswith("#define HG_") and "HG_STAGE_K" not in line]
    return "\n".join(defines) + "\n" + INCLUDE.sub(expand, text("wgmma_ws.cu"))


def sass(source: str, folder: Path, name: str, tool: str) -> list[str]:
    cu, cubin = folder / f"{name}.cu", folder / f"{name}.cubin"
    cu.write_text(source)
    subprocess.run(["nvcc", "-std=c++17", "--expt-relaxed-constexpr", "-arch=sm_90a", "-O3", "-cubin", "-o",
                    str(cubin), str(cu)], check=True, capture_output=True)  # fmt: skip
    out = subprocess.run([tool, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    return [re.sub(r"/\*[0-9a-f]+\*/", "", line).strip() for line in out.splitlines() if re.search(r"/\*[0-9a-f]{4}\*/", line)]


def opcodes(lines: list[str]) -> Counter:
    return Counter(m.group(1) for line in lines if (m := re.match(r"(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9.]*)", line)))


def main() -> None:
    rev = sys.argv[1] if len(sys.argv) > 1 else "13ffe56"
    family, tool = get_family("wgmma"), cuobjdump()
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, cfg) in enumerate(CONFIGS.items()):
            params = family.repair(cfg)
            new = family.render(params)
            a, b = sass(old_render(rev, new), Path(tmp), f"old{i}", tool), sass(new, Path(tmp), f"new{i}", tool)
            if a == b:
                print(f"{label}: SAME ({len(a)} lines)")
                continue
            ca, cb = opcodes(a), opcodes(b)
            changed = {op: (ca[op], cb[op]) for op in sorted(set(ca) | set(cb)) if ca[op] != cb[op]}
            print(f"{label}: differs ({len(a)} / {len(b)} lines); opcode counts old -> new: {changed or 'equal'}")


if __name__ == "__main__":
    main()
