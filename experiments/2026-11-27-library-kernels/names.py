"""Which kernels the libraries run on the shapes where hgemm trails them: for each shape and baseline, the
kernels one call launches (name, grid, block, shared memory, registers, duration), from a CUDA profiler trace.
cuBLAS's Hopper kernel names carry the tile, the cluster and the K schedule (split-K, stream-K), which is what
hgemm's wgmma family chooses per shape.

Usage (one GPU): python names.py OUT_DIR [MxNxK,...]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

SHAPES = [(16, 4608, 3584), (1000, 1408, 2048), (1024, 1024, 16384), (128, 4608, 3584), (3000, 5000, 700),
          (128, 1408, 2048), (16, 1408, 2048), (77, 5120, 5120), (200, 13824, 5120), (64, 4096, 16384),
          (1000, 3584, 14336), (1000, 4608, 3584), (4096, 1408, 2048), (1000, 14336, 4096), (2560, 2560, 2560),
          (2048, 16384, 512), (128, 6144, 4096), (128, 8192, 8192), (4096, 4096, 14336)]  # fmt: skip


def kernels_of(call, reps: int = 3) -> list[dict]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    call()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            call()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text())["traceEvents"]
    found = {}
    for e in events:
        if e.get("cat") != "kernel":
            continue
        a = e.get("args", {})
        row = found.setdefault(e["name"], {"name": e["name"], "grid": a.get("grid"), "block": a.get("block"),
                                           "shared_bytes": a.get("shared memory"),
                                           "registers": a.get("registers per thread"), "us": []})
        row["us"].append(e.get("dur"))
    return list(found.values())


def main(out_dir: str, shapes) -> None:
    import torch
    from hgemm.evaluator.baselines import Baselines

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stream = torch.cuda.Stream()
    results = []
    for m, n, k in shapes:
        A = torch.randn(m, k, dtype=torch.float16, device="cuda")
        B = torch.randn(k, n, dtype=torch.float16, device="cuda")
        Bt = B.t().contiguous()
        with torch.cuda.stream(stream):
            base = Baselines.on_tensors(A, B, Bt, "probe", stream, 50 << 20)
            row = {"shape": [m, n, k], "lt_best_index": getattr(base, "lt_best_index", None), "baselines": {}}
            for name, call in base.contenders.items():
                row["baselines"][name] = kernels_of(call)
        results.append(row)
        for name, ks in row["baselines"].items():
            print(f"{m}x{n}x{k} {name}: " + " | ".join(f"{x['name'][:90]} grid={x['grid']} us={x['us'][-1]}"
                                                     for x in ks), flush=True)
        (out / "names.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    given = [tuple(int(x) for x in s.split("x")) for s in sys.argv[2].split(",")] if len(sys.argv) > 2 else SHAPES
    main(sys.argv[1], given)
