"""The family's default where it takes 64-row tiles, unsplit, in an even count of tile rows (so 2x1 clusters can
pair them), against the same tile with the cluster toggled and with K per stage toggled (64 <-> 128), each with
the deepest ring that fits. probe.py found, on the H100: at 1024^3 the default's unclustered 64x128 7.34 us, with
the cluster 6.72; at 128x4608x3584 and 128x1408x2048, 64-row tiles 80 and 64 wide in a cluster 8% faster with
128-deep stages. This measures both on every such shape of shapes-real and the 1,000-configuration grid with N
and K at least 1024 (up to 12 of the grid's, spread over the range). The evaluator checks every output; both modes,
the libraries alongside.

Usage (one GPU): python pairs.py OUT_DIR [MxNxK,...]
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-11-26-small-tiles"))
from small_tiles import main  # noqa: E402  (evaluates configurations per shape, writes OUT_DIR/name)

GRID = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288, 16384)
RINGS = (16, 14, 12, 10, 8, 7, 6, 5, 4, 3)


def eligible(family, shape) -> bool:
    from hgemm.core.shape import Shape

    p = family.default_params(Shape(*shape))
    return bool(p and p["bm"] == 64 and p["bn"] >= 64 and not p.get("swap_ab") and p.get("split_k", 1) == 1
                and -(-shape[0] // 64) % 2 == 0)  # fmt: skip


def shapes() -> list[tuple[int, int, int]]:
    from hgemm.evaluator.kernels import get_family

    family = get_family("wgmma")
    real_file = HERE.parents[1] / "bench" / "shapes-real.txt"
    real = [tuple(int(x) for x in line.replace("x", " ").split()[:3]) for line in real_file.read_text().splitlines()
            if line.strip() and not line.startswith("#")]  # fmt: skip
    grid = [s for s in itertools.product(GRID, GRID, GRID) if s[1] >= 1024 and s[2] >= 1024]
    grid = [s for s in grid if eligible(family, s)]
    grid = grid[:: max(1, len(grid) // 12)][:12]
    return [s for s in real if eligible(family, s)] + [s for s in grid if s not in real] + [(1024, 1024, 1024)]


def configurations(shape) -> dict[str, dict]:
    from hgemm.evaluator.kernels import get_family

    from hgemm.core.shape import Shape

    family = get_family("wgmma")
    s = Shape(*shape)
    base = family.default_params(s)
    found = {"default": base}
    other_cluster = 3 - base["cluster_m"]
    other_k = 192 - base["stage_k"]
    changes = {f"cluster {other_cluster}": {"cluster_m": other_cluster},
               f"stage_k {other_k}": {"stage_k": other_k},
               f"cluster {other_cluster} stage_k {other_k}": {"cluster_m": other_cluster, "stage_k": other_k}}  # fmt: skip
    for name, change in changes.items():
        p = {**base, **change}
        if "stage_k" not in change:
            p = family.default_tuning({k: v for k, v in p.items() if k not in ("stage_k", "warp_producer")}, shape=s)
        q = next(({**p, "stages": r} for r in RINGS if family.check({**p, "stages": r}, s) is None), None)
        if q is not None and q not in found.values():
            found[name] = q
    return found


if __name__ == "__main__":
    from hgemm.evaluator.kernels import get_family

    given = [tuple(int(x) for x in k.split("x")) for k in sys.argv[2].split(",")] if len(sys.argv) > 2 else shapes()
    main(sys.argv[1], given, family=get_family("wgmma"), configurations=configurations, name="pairs.json")
