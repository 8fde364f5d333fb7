"""Nsight Compute metrics and compute-sanitizer runs for one compiled candidate.

Both run `python -m evaluator.target` in a separate process under the tool, with a time
limit. Where a tool is missing, the result says so instead of failing the evaluation.
"""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
import sys

from hgemm.core.shape import Shape

# name in the record -> ncu metric
NCU_METRICS = {
    "duration_ns": "gpu__time_duration.sum",
    "dram_throughput_pct": "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
    "l2_throughput_pct": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "tensor_pipe_pct": "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "tensor_gmma_pipe_pct": "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
    "smem_bank_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "registers_per_thread": "launch__registers_per_thread",
    "shared_mem_per_block": "launch__shared_mem_per_block",
}
# stall reasons: warps stalled for that reason per issued instruction (the WarpStateStats section's figures)
STALL_REASONS = ("long_scoreboard", "barrier", "gmma", "mio_throttle", "short_scoreboard", "wait", "math_pipe_throttle",
                 "lg_throttle", "membar", "sleeping", "dispatch_stall", "no_instruction", "branch_resolving",
                 "not_selected")  # fmt: skip
NCU_METRICS.update(
    {f"stall_{r}": f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio" for r in STALL_REASONS}
)
_UNKNOWN_METRIC = re.compile(r"Failed to find metric (\S+?)\.?\s*$", re.M)


def _target(lib: str, shape: Shape) -> list[str]:
    return [sys.executable, "-m", "hgemm.evaluator.target", lib, *map(str, shape)]


def ncu_metrics(lib: str, shape: Shape, timeout_s: float = 300) -> dict:
    """The fixed metric set for the candidate's longest kernel, plus how many kernels it launched."""
    ncu = shutil.which("ncu")
    if ncu is None:
        return {"error": "ncu not found on PATH: no NCU metrics collected"}
    metrics = dict(NCU_METRICS)
    for _ in range(2):  # a metric this ncu version does not know is dropped, and ncu run once more
        cmd = [ncu, "--clock-control", "none", "--nvtx", "--nvtx-include", "hgemm/", "--csv", "--page", "raw",
               "--metrics", ",".join(metrics.values()), *_target(lib, shape)]  # fmt: skip
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return {"error": f"ncu ran past {timeout_s:.0f} s"}
        unknown = set(_UNKNOWN_METRIC.findall(out.stdout + out.stderr))
        if not unknown or "duration_ns" not in (kept := {k: v for k, v in metrics.items() if v not in unknown}):
            break
        metrics = kept
    rows = _csv_rows(out.stdout)
    if not rows:
        return {"error": "ncu produced no metrics: " + (out.stderr or out.stdout).strip()[-500:]}
    def num(row, metric):
        try:
            return float(str(row.get(metric, "")).replace(",", ""))
        except ValueError:
            return None
    kernels = [r for r in rows if num(r, metrics["duration_ns"]) is not None]
    if not kernels:
        return {"error": "ncu produced no kernel durations: " + (out.stderr or out.stdout).strip()[-500:]}
    longest = max(kernels, key=lambda r: num(r, metrics["duration_ns"]))
    result = {name: num(longest, metric) for name, metric in metrics.items()}
    result["kernel"] = longest.get("Kernel Name", "")
    result["kernels_launched"] = len(kernels) // 2  # the target calls the candidate twice
    return {k: v for k, v in result.items() if v is not None}


def _csv_rows(text: str) -> list[dict]:
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if len(lines) < 2:
        return []
    rows = list(csv.DictReader(io.StringIO("\n".join(lines))))
    return rows[1:] if rows and not any(ch.isdigit() for ch in str(rows[0].get("ID", ""))) else rows


def sanitize(lib: str, shape: Shape, timeout_s: float = 600) -> str | None:
    """None when memcheck and racecheck are clean, else the first errors they reported."""
    tool = shutil.which("compute-sanitizer")
    if tool is None:
        from hgemm.core.errors import HgemmError

        raise HgemmError("compute-sanitizer not found on PATH: --sanitize needs it (it ships with the CUDA toolkit)")
    for check in ("memcheck", "racecheck"):
        cmd = [tool, "--tool", check, "--error-exitcode", "86", *_target(lib, shape)]
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return f"{check}: ran past {timeout_s:.0f} s"
        if out.returncode != 0:
            text = (out.stdout + out.stderr).strip().splitlines()
            errors = [ln for ln in text if "=========" in ln][:12]
            return f"{check} (exit {out.returncode}): " + " | ".join(errors or text[-6:])
    return None
