"""Tenth probe: where do the warps of our kernel and of the library's wait, per k-block? `ncu_pair.py` found our
kernel at 512x512x4096 slower per k-block than the library's with fewer instructions and no unit saturated, and
`k_group.py` that grouping two k-blocks per wgmma group does not help. Here Nsight Compute's stall reasons (per
issued instruction) for both, and its PC sampling per SASS instruction of each kernel.

    python ncu_stalls.py OUT_DIR [MxNxK]   (runs ncu_pair.py's child under ncu twice; writes the CSVs)
    python ncu_stalls.py digest SASS_CSV   (each kernel's hottest SASS instructions, by stall samples)
"""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

REASONS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle", "long_scoreboard",
           "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instructions", "not_selected", "selected",
           "short_scoreboard", "sleeping", "tex_throttle", "wait")  # fmt: skip
METRICS = ",".join(f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio" for r in REASONS)


def ncu(args: list[str], shape: str) -> subprocess.CompletedProcess:
    child = [sys.executable, str(Path(__file__).parent / "ncu_pair.py"), "child", shape]
    cmd = ["ncu", "--profile-from-start", "off", "--clock-control", "none", "--cache-control", "none", "--csv",
           *args, *child]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=400)


def main() -> None:
    out = Path(sys.argv[1])
    shape = sys.argv[2] if len(sys.argv) > 2 else "512x512x4096"
    out.mkdir(parents=True, exist_ok=True)
    done = ncu(["--page", "raw", "--metrics", METRICS + ",smsp__inst_issued.sum,sm__cycles_active.avg"], shape)
    (out / f"stalls-{shape}.csv").write_text(done.stdout)
    print(done.stderr[-2000:] if done.returncode else "stall reasons done", flush=True)
    done = ncu(["--section", "SourceCounters", "--page", "source", "--print-source", "sass"], shape)
    (out / f"sass-{shape}.csv").write_text(done.stdout)
    print(done.stderr[-2000:] if done.returncode else f"sass done, {len(done.stdout)} chars", flush=True)


def digest(path: Path, top: int = 24) -> None:
    """The `top` instructions of each profiled kernel with the most warp-stall samples, with their reasons."""
    blocks: list[list[str]] = []
    for line in path.read_text().splitlines():
        if line.startswith('"Kernel Name"'):
            blocks.append([line])
        elif blocks:
            blocks[-1].append(line)
    for block in blocks:
        rows = list(csv.DictReader(io.StringIO("\n".join(block[1:]))))
        samples = lambda r: int(r["Warp Stall Sampling (All Samples)"] or 0)  # noqa: E731
        total = sum(samples(r) for r in rows) or 1
        print(f"{block[0].split(',')[1][:90]}: {total} samples, {len(rows)} instructions")
        for r in sorted(rows, key=lambda r: -samples(r))[:top]:
            why = {k[6:]: int(v) for k, v in r.items() if k.startswith("stall_") and "(Not" not in k and v not in ("0", "")}
            print(f"  {samples(r):5d} {100 * samples(r) / total:5.1f}%  executed {r['Instructions Executed']:>6}  "
                  f"{r['Source'].strip()[:58]:58s} {why}")  # fmt: skip


if __name__ == "__main__":
    digest(Path(sys.argv[2])) if sys.argv[1] == "digest" else main()
