"""Write a wgmma kernel's rendered source with its default parameters, and a copy whose cluster is 4x1 instead of
2x1: four CTAs stacked along M share each Bt tile, each loading a quarter of it and multicasting it to all four.

The question it asks, after `probe.cu`: the probe's 4x1 multicast delivered 17-23 TB/s with every SM loading,
against 14.7-14.9 for 2x1; does a GEMM whose default is the 2x1 cluster get faster with four? The family allows
only 1 or 2 (`wgmma_rules.cuh`); the template is written for any cluster size, and `hgemm eval` checks the copy.

Usage: python cluster4.py M N K OUTDIR [param=value ...]  (the family's default for M N K with the overrides given,
in a 2x1 cluster as the base). Writes OUTDIR/base-MxNxK.cu and OUTDIR/cluster4-MxNxK.cu.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hgemm.evaluator.kernels import get_family

from hgemm.core.shape import Shape


def patch(src: str) -> str:
    for old, new in (
        ("#define HG_CLUSTER_M 2\n", "#define HG_CLUSTER_M 4\n"),
        ('if (p.cluster_m != 1 && p.cluster_m != 2) return "CLUSTER_M must be 1 or 2";',
         'if (p.cluster_m != 1 && p.cluster_m != 4) return "CLUSTER_M must be 1 or 4";'),
    ):
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    return src.replace("// hgemm family wgmma:", "// hgemm family wgmma (4x1 cluster, experiments/2026-11-28-smem-fill):", 1)


def main() -> None:
    m, n, k, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4])
    family = get_family("wgmma")
    params = dict(family.default_params(Shape(m, n, k)))
    for kv in sys.argv[5:]:
        key, value = kv.split("=")
        params[key] = int(value)
    params["cluster_m"] = 2
    assert not params.get("split_dsmem") and not params.get("stream_k"), params
    why = family.check(params, Shape(m, n, k))
    assert why is None, f"{params}: {why}"
    assert params["bn"] % 32 == 0, "a quarter of the Bt tile must be whole 8-row swizzle groups"
    base = family.render(params)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"base-{m}x{n}x{k}.cu").write_text(base)
    (out / f"cluster4-{m}x{n}x{k}.cu").write_text(patch(base))
    print(m, n, k, params)


if __name__ == "__main__":
    main()
