"""Few-tile shapes of the full grid (H100, 2026-11-26: 128x2048x2048 0.70x, 128x4096x4096 and 64x4096x4096 0.75x,
512x1024x4096 0.76x, ...): the library runs narrow tiles with deep rings and 2-CTA clusters there (for example
`nvjet_sm90_hsh_64x32_64x16_1x2` on 128 CTAs at 128x2048x1024, `bench/results/lt-kernels-mid-*.json`), where our
default takes 64x128 or 128x128 tiles split 2 ways; and three small-M layer shapes of `bench/shapes-real.txt`
(16x4608x3584 0.70x, 16x2048x1408 0.73x, 128x4096x14336 0.71x offline there, before the arena fix). This
evaluates, per shape, tiles 64x32 to 128x128 with the deepest ring that fits, with and without the 2x1 cluster (the B tile multicast to both CTAs), unsplit or split
2 and 4 ways (workspace or, unclustered, the cluster's shared memory). Each configuration is checked by the family
before it is compiled; the evaluator checks every output. Both modes, the libraries timed alongside.

Usage (one GPU): python small_tiles.py OUT_DIR [MxNxK,...]  (default: the shapes below)
"""

from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "2026-11-26-k-heavy"))
from variants import evaluate_shape  # noqa: E402  (the K-heavy experiment's evaluation loop)

SHAPES = [(128, 2048, 2048), (128, 4096, 4096), (64, 4096, 4096), (512, 1024, 4096), (256, 2048, 4096),
          (256, 1024, 2048), (512, 512, 4096), (64, 4096, 2048), (128, 2048, 4096), (512, 512, 12288),
          (16, 4608, 3584), (16, 2048, 1408), (128, 4096, 14336)]  # fmt: skip
TILES = [(64, 32), (64, 64), (64, 128), (128, 64), (128, 128)]
# split -> how its slices are summed: 0 through the workspace, 1 in the cluster's shared memory
SPLITS = {1: (0,), 2: (0, 1), 4: (0, 1)}


def variants(shape) -> dict[str, dict]:
    from hgemm.evaluator.kernels import get_family

    from hgemm.core.shape import Shape

    family = get_family("wgmma")
    s = Shape(*shape)
    base = family.default_params(s)
    found = {"default": base}
    for (bm, bn), cluster, (split, modes) in itertools.product(TILES, (1, 2), SPLITS.items()):
        for mode in modes:
            if mode and cluster > 1:
                continue  # a DSMEM split's cluster is the tile's slices
            p = {**base, "bm": bm, "bn": bn, "consumers": 1 if bm == 64 else 2, "cluster_m": cluster,
                 "split_k": split, "split_dsmem": mode, "persistent": 0 if mode else 1, "pingpong": 0,
                 "stream_k": 0, "epilogue": 0, "epi_panels": 0}  # fmt: skip
            p = family.repair(p)
            for stages in (16, 14, 12, 10, 8, 7, 6, 5, 4, 3):
                q = {**p, "stages": stages}
                if family.check(q, s) is None:
                    if q not in found.values():
                        name = f"{bm}x{bn} c{cluster} split {split}{' dsmem' if mode else ''} s{stages}"
                        found[name] = q
                    break
    return found


def main(out_dir: str, shapes: list[tuple[int, int, int]], family=None, configurations=None,
         name: str = "small-tiles.json") -> None:  # fmt: skip
    """Evaluate `configurations(shape)` (default: `variants`) with `family` (default: wgmma) on every shape,
    print the fastest five and the default, and rewrite OUT_DIR/`name` after each shape."""
    from hgemm.evaluator.kernels import get_family
    from hgemm.evaluator.local import LocalEvaluator

    family = family or get_family("wgmma")
    configurations = configurations or variants
    rows = []
    with LocalEvaluator() as ev:
        for shape in shapes:
            mine = evaluate_shape(ev, family, shape, configurations(shape))
            rows += mine
            ranked = sorted((r for r in mine if r["offline"]), key=lambda r: r["offline"]["us"])
            for r in ranked[:5] + [r for r in ranked[5:] if r["variant"] == "default"]:
                print(f"  {r['variant']:30s} offline {r['offline']['us']:7.2f} us ({r['offline']['speedup_best']:.3f}x)"
                      f"  server {r['server']['us']:7.2f} us ({r['server']['speedup_best']:.3f}x)", flush=True)  # fmt: skip
            Path(out_dir, name).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    given = [tuple(int(x) for x in s.split("x")) for s in sys.argv[2].split(",")] if len(sys.argv) > 2 else SHAPES
    main(sys.argv[1], given)
