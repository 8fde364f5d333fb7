"""Write a wgmma kernel's rendered source with its default parameters, and a copy whose cluster is 4x1 instead of
2x1: four CTAs stacked along M share each Bt tile, each loading a quarter of it and multicasting it to all four.

The question it asks, after `probe.cu`: the probe's 4x1 multicast delivered 17-23 TB/s with every SM loading,
against 14.7-14.9 for 2x1; does a GEMM whose default is the 2x1 cluster get faster with four? The family allowed
only 1 or 2 when this was written, and the copy relaxed that rule; it now allows 4 (`../2026-11-28-cluster4/`). The
template is written for any cluster size, and `hgemm eval` checks the copy.

Usage: python cluster4.py M N K OUTDIR [param=value ...]  (the family's default for M N K with the overrides given,
in a 2x1 cluster as the base). Writes OUTDIR/base-MxNxK.cu and OUTDIR/cluster4-MxNxK.cu.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script with -P: its folder is not on the path
from a_cpasync import write_pair  # noqa: E402


def patch(src: str) -> str:
    old, new = "#define HG_CLUSTER_M 2\n", "#define HG_CLUSTER_M 4\n"
    assert src.count(old) == 1, old
    src = src.replace(old, new)
    return src.replace("// hgemm family wgmma:", "// hgemm family wgmma (4x1 cluster, experiments/2026-11-28-smem-fill):", 1)


def four_fits(family, params, shape) -> None:
    assert not params.get("split_dsmem") and not params.get("stream_k"), params
    why = family.check(params, shape)
    assert why is None, f"{params}: {why}"
    assert params["bn"] % 32 == 0, "a quarter of the Bt tile must be whole 8-row swizzle groups"


def main() -> None:
    write_pair("cluster4", patch, fixed={"cluster_m": 2}, check=four_fits)


if __name__ == "__main__":
    main()
