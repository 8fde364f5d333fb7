"""Where the staged path's time goes, and whether it reads only its own memory: Nsight Compute's metrics (tensor
pipe, shared-memory bank conflicts, stall reasons) for the same 128x256x32 tile with the staged blocks at
4096x4096x4095, with narrow loads there, and with 16-byte cp.async at 4096^3; then compute-sanitizer (memcheck)
on the staged kernel at shapes where every row's shift differs and the last slice is partial.

Usage (one GPU with ncu and compute-sanitizer): python profile_staged.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TILE = {"BM": 128, "BN": 256, "BK": 32, "WARPS_M": 2, "WARPS_N": 4, "STAGES": 4, "RASTER": 8}
PROFILED = [("staged", (4096, 4096, 4095), {"KVEC": 1, "REALIGN": 1}),
            ("narrow", (4096, 4096, 4095), {"KVEC": 1, "REALIGN": 0}),
            ("aligned", (4096, 4096, 4096), {"KVEC": 8, "REALIGN": 0})]  # fmt: skip
SANITIZED = [(513, 257, 129), (300, 500, 70), (1000, 1000, 999)]


def main(out_dir: str) -> None:
    from hgemm.evaluator.kernels import get_family
    from hgemm.evaluator.kernels.mma_family import widest_kvec
    from hgemm.evaluator.local import LocalEvaluator

    family = get_family("mma_ms")
    rows = []
    with LocalEvaluator(baselines=False) as ev:
        for name, shape, change in PROFILED:
            (rec,) = ev.evaluate([family.render({**TILE, **change})], shape, stage="full", modes=("offline",), ncu=True)
            rows.append({"what": "ncu", "variant": name, "shape": list(shape), "ok": rec.ok, "us": rec.median_us("offline"),
                         "ncu": rec.ncu})  # fmt: skip
            print(name, shape, rec.ok, json.dumps(rec.ncu), flush=True)
        for shape in SANITIZED:
            params = {**TILE, "BN": 128, "WARPS_N": 2, "KVEC": widest_kvec(shape[2]), "REALIGN": 1}
            (rec,) = ev.evaluate([family.render(params)], shape, stage="full", modes=("offline",), sanitize=True)
            rows.append({"what": "memcheck", "shape": list(shape), "params": params, "ok": rec.ok,
                         "failure": rec.failure_kind, "message": (rec.failure_message or "")[:500]})  # fmt: skip
            print("memcheck", shape, rec.ok, rec.failure_kind or "", flush=True)
            Path(out_dir, "profile-staged.json").write_text(json.dumps(rows, indent=1))
    Path(out_dir, "profile-staged.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
