"""Cache-miss compile time of each family's default kernel, nvcc with and without `--threads` (alternated).

    python measure.py [--repeats 3] > results.json

Each compile goes through `compile_source` (sandbox, nvcc, audit, link) with the cache off; "without" runs
`object_command` as it was before (no `--threads`). One process, one compile at a time."""

import argparse
import json
import os
import platform
import statistics
import tempfile
import time

from hgemm.agent.template import default_params
from hgemm.evaluator import compile as C
from hgemm.evaluator.kernels import FAMILIES
from hgemm.evaluator.kernels.wgmma_family import FAMILIES as WGMMA

from hgemm.core.shape import Shape

WITH = C.object_command


def without(nvcc, flags, source=C.SOURCE_NAME, keep_dir="keep"):
    cmd = WITH(nvcc, flags, source, keep_dir)
    if "--threads" in cmd:
        i = cmd.index("--threads")
        del cmd[i : i + 2]
    return cmd


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("HGEMM_HOME", tempfile.mkdtemp(prefix="compile-threads-"))
    shape = Shape(4096, 4096, 4096)
    sources = {
        name: fam.render(default_params(fam, shape, None))
        for name, fam in {**FAMILIES, **WGMMA}.items()
        if name != "mma_splitk"
    }  # mma_splitk's default renders mma_ms's source
    C.compile_source(sources["small"], use_cache=False)  # the audit's empty-kernel baseline, once
    times = {name: {"with": [], "without": []} for name in sources}
    for _ in range(args.repeats):
        for name, src in sources.items():
            for mode in ("without", "with"):
                C.object_command = WITH if mode == "with" else without
                t = time.perf_counter()
                r = C.compile_source(src, use_cache=False)
                times[name][mode].append(time.perf_counter() - t)
                assert r.ok, (name, mode, r.message)
    C.object_command = WITH
    nvcc = C.find_nvcc()
    out = {
        "host": f"{platform.machine()}, {os.cpu_count()} cores",
        "nvcc": C.nvcc_version(nvcc),
        "repeats": args.repeats,
        "median_s": {},
    }
    for name, t in times.items():
        w, wo = statistics.median(t["with"]), statistics.median(t["without"])
        out["median_s"][name] = {"without": round(wo, 2), "with": round(w, 2), "ratio": round(w / wo, 2)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
