"""What a thread-block cluster launch costs by itself: near-empty kernels in CUDA graphs, with and without clusters.

Times the probe kernel of `cluster_probe.cu` (package data; 384 threads, like the wgmma family's two-consumer
CTAs) for each combination of cluster size (1 = a plain launch, 2), CTA count and cluster barriers
(`VARIANTS`), with the family's typical dynamic shared memory (200 KiB, one CTA per SM).

Usage: python -m hgemm.bench.cluster_probe [--out bench/results/cluster-probe.json] [--reps 100] [--samples 15]

- Each sample is one replay of a graph of --reps back-to-back launches (warm, like the evaluator's offline
  mode); the median and minimum per launch are reported, with GPU name, driver and date.
- Cases are interleaved: every case once per round of samples.
- Needs nvcc (sm_90a) and a CUDA GPU; exits with the reason otherwise.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

SOURCE = resources.files("hgemm.bench").joinpath("cluster_probe.cu")
VARIANTS = {0: "no barrier", 1: "barrier at start", 2: "barriers at start and end", 3: "2 + mbarrier init",
            4: "relaxed barrier at start", 5: "relaxed arrive, syncthreads, wait"}


def build(tmp: Path) -> ctypes.CDLL:
    """Compile the probe kernels into `tmp` (the source is copied there first) and load them."""
    cu, so = tmp / "cluster_probe.cu", tmp / "cluster_probe.so"
    cu.write_text(SOURCE.read_text())
    cmd = ["nvcc", "-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-shared", "-Xcompiler", "-fPIC",
           "-o", str(so), str(cu)]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"nvcc failed:\n{r.stderr[-2000:]}")
    lib = ctypes.CDLL(str(so))
    lib.probe_launch.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    return lib


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hgemm.bench.cluster_probe", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("bench/results/cluster-probe.json"))
    ap.add_argument("--reps", type=int, default=100, help="launches per graph")
    ap.add_argument("--samples", type=int, default=15, help="graph replays timed per case")
    args = ap.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        sys.exit("cluster_probe: no CUDA GPU")
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    smem = 200 * 1024
    with tempfile.TemporaryDirectory() as tmp:
        lib = build(Path(tmp))
        stream = torch.cuda.Stream()
        cases = [(v, c, g) for g in (16, 128, sms - sms % 2) for c in (1, 2) for v in VARIANTS]
        graphs = {}
        for case in cases:
            v, c, g = case
            with torch.cuda.stream(stream):
                err = lib.probe_launch(v, c, g, smem, ctypes.c_void_p(stream.cuda_stream))
                torch.cuda.synchronize()
                if err:
                    sys.exit(f"probe_launch{case} returned CUDA error {err}")
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, stream=stream):
                    for _ in range(args.reps):
                        lib.probe_launch(v, c, g, smem, ctypes.c_void_p(stream.cuda_stream))
            graphs[case] = graph
        times: dict = {case: [] for case in cases}
        for _ in range(args.samples):  # interleaved: every case once per round
            for case, graph in graphs.items():
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                with torch.cuda.stream(stream):
                    start.record()
                    graph.replay()
                    end.record()
                end.synchronize()
                times[case].append(start.elapsed_time(end) * 1000.0 / args.reps)
    rows = [{"variant": v, "what": VARIANTS[v], "cluster": c, "ctas": g, "median_us": statistics.median(times[(v, c, g)]),
             "min_us": min(times[(v, c, g)])} for v, c, g in cases]  # fmt: skip
    print(f"{'CTAs':>5} {'variant':<28} {'plain us':>9} {'cluster 2 us':>13}")
    for g in sorted({r["ctas"] for r in rows}):
        for v in VARIANTS:
            t = {r["cluster"]: r["median_us"] for r in rows if r["ctas"] == g and r["variant"] == v}
            print(f"{g:>5} {VARIANTS[v]:<28} {t[1]:>9.2f} {t[2]:>13.2f}")
    driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                            capture_output=True, text=True).stdout.strip().splitlines()[:1]  # fmt: skip
    doc = {"gpu": props.name, "driver": driver[0] if driver else None, "date": time.strftime("%Y-%m-%d"),
           "threads": 384, "smem_bytes": smem, "reps": args.reps, "samples": args.samples, "rows": rows}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
