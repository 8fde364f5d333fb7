"""First probe: 128-deep ring stages, two TMA boxes per operand behind one barrier (2026-11-27).

The fixed-cost probes (`../2026-11-26-fixed-cost/`) found the main loop's rate set per k-block, not per byte: with
no load at all the ring's handshake (an empty-slot wait and a full arrive in the producer, a full-slot wait and a
free per warp in the consumers) already costs about 75 ns per 64-deep k-block, 85% of the library's whole time per
k-block, and each load adds about the same whatever its bytes. Two k-blocks per wgmma group (still a barrier per
k-block) did not move it. Here a stage holds 128 of K: the producer arms one full barrier for four loads (two
128-byte swizzle boxes of A, two of Bt) and the consumers wait once, issue eight k16 steps and free the slot once,
so every handshake covers twice the work. The ring keeps its bytes (half the stages).

When the probe first ran (H100, 02:40 UTC) the deep stage was a string edit of the rendered source (BK 64 -> 128 in
the rules, the loads and the wgmma descriptors walking two boxes); the template now has it as the parameter
`stage_k`, with the same loop, and the probe asks the parameter (`gpu-h100/deep-stage-param.*`: the same figures
again). Each variant is checked against torch.matmul at K = 1000 (a partial last stage) and timed offline at
K = 512 .. 4096 with the library beside it.

Usage (one GPU): python deep_stage.py OUT_DIR [MxN ...]   (only those output shapes)
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-11-26-fixed-cost"))

from fixed_cost import BASE  # noqa: E402
from hgemm.evaluator.kernels import get_family  # noqa: E402
from smem_base import compare  # noqa: E402
from structures import ONE  # noqa: E402

PP = {"consumers": 2, "pingpong": 1, "epilogue": 1}
CASES = {  # (M, N): name -> (configuration with 64-deep stages, its stage count with 128-deep ones)
    (512, 512): {"64x32": ({**ONE, "bm": 64, "bn": 32, "stages": 16}, 8),
                 "64x64": ({**ONE, "bm": 64, "bn": 64, "stages": 12}, 6)},
    (64, 4096): {"64x32": ({**ONE, "bm": 64, "bn": 32, "stages": 16}, 8)},
    (1024, 1024): {"64x128 c2": ({**ONE, "bm": 64, "bn": 128, "stages": 8, "cluster_m": 2}, 4)},
    (12288, 256): {"128x64 pp": ({**PP, "bm": 128, "bn": 64, "stages": 8}, 4)},
}


def sources(only: set[str] | None = None) -> dict[tuple[int, int, str], str]:
    family = get_family("wgmma")
    out = {}
    for (M, N), configs in CASES.items():
        if only and f"{M}x{N}" not in only:
            continue
        for name, (cfg, deep_stages) in configs.items():
            for producer, label in ((0, "thread"), (1, "warp")):
                params = {**BASE, **cfg, "warp_producer": producer}
                out[(M, N, f"{name} {label}")] = family.render(family.repair(params))
                deep = family.repair({**params, "stages": deep_stages, "stage_k": 128})
                assert deep["stages"] == deep_stages
                out[(M, N, f"{name} {label} k128")] = family.render(deep)
    return out


def main() -> None:
    only = set(sys.argv[2:])
    compare(Path(sys.argv[1]), sources(only), "deep-stage-param.json" if only else "deep-stage.json")


if __name__ == "__main__":
    main()
