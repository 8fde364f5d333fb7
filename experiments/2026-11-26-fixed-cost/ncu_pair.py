"""Fourth probe: Nsight Compute on our kernels and the library's at one shape, where `structures.py` and
`chains.py` found our time per K the same for 64x32 and 64x64 tiles, with or without a cluster, on 64 or 128 CTAs,
and with two accumulator chains: neither tensor-chain latency nor L2 bandwidth. What does the profiler see?

    python ncu_pair.py child MxNxK        (launches each contender once inside the profiled range)
    python ncu_pair.py OUT_DIR MxNxK      (runs the child under ncu, writes ncu.csv, prints a digest)
"""

from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

CONFIGS = {
    "64x32 c1": {"bm": 64, "bn": 32, "consumers": 1, "pingpong": 0, "epilogue": 1, "stages": 16},
    "64x64 c1": {"bm": 64, "bn": 64, "consumers": 1, "pingpong": 0, "epilogue": 1, "stages": 12},
}
SECTIONS = ("SpeedOfLight", "MemoryWorkloadAnalysis", "WarpStateStats", "ComputeWorkloadAnalysis", "SchedulerStats",
            "LaunchStats", "InstructionStats")  # fmt: skip
METRICS = ("sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,"
           "sm__cycles_active.avg,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,"
           "smsp__average_warp_latency_issue_stalled_barrier,lts__t_bytes.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed")


def child(shape: str) -> None:
    import torch
    from fixed_cost import BASE, loaded
    from hgemm.evaluator.kernels import get_family

    M, N, K = (int(x) for x in shape.split("x"))
    family = get_family("wgmma")
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    B = torch.randn(K, N, device="cuda", dtype=torch.float16)
    Bt = B.t().contiguous()
    C = torch.empty(M, N, device="cuda", dtype=torch.float16)
    ws = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    calls = {"lib": lambda: torch.mm(A, B, out=C)}
    for name, cfg in CONFIGS.items():
        run = loaded(family.repair({**BASE, **cfg}))
        calls[name] = lambda run=run: run(A.data_ptr(), B.data_ptr(), Bt.data_ptr(), C.data_ptr(), M, N, K,
                                          ws.data_ptr(), ws.numel(), torch.cuda.current_stream().cuda_stream)
    for _ in range(20):
        for fn in calls.values():
            fn()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for fn in calls.values():
        fn()
        fn()  # the second of each pair has warm caches from the first
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def main() -> None:
    out, shape = Path(sys.argv[1]), sys.argv[2]
    out.mkdir(parents=True, exist_ok=True)
    cmd = ["ncu", "--profile-from-start", "off", "--clock-control", "none", "--cache-control", "none", "--csv",
           "--page", "details", *[x for s in SECTIONS for x in ("--section", s)], "--metrics", METRICS,
           sys.executable, __file__, "child", shape]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    text = done.stdout
    (out / f"ncu-{shape}.csv").write_text(text)
    (out / f"ncu-{shape}.stderr").write_text(done.stderr[-20000:])
    start = text.find('"ID"')
    rows = list(csv.DictReader(io.StringIO(text[start:]))) if start >= 0 else []
    if not rows:
        print(done.stderr[-3000:])
        return
    kernels: dict[str, dict] = {}
    for r in rows:
        key = f"{r['ID']} {r['Kernel Name'][:48]}"
        kernels.setdefault(key, {})[r["Metric Name"]] = f"{r['Metric Value']} {r.get('Metric Unit', '')}".strip()
    names = sorted({m for k in kernels.values() for m in k})
    print("metric | " + " | ".join(kernels))
    for m in names:
        print(f"{m} | " + " | ".join(k.get(m, "") for k in kernels.values()))


if __name__ == "__main__":
    if sys.argv[1] == "child":
        child(sys.argv[2])
    else:
        main()
