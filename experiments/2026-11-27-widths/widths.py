"""wgmma tiles of any width that is a multiple of 16, against the family's default, on the shapes-real shapes
where hgemm trails the libraries. On the H100 cuBLAS runs tiles such as 256x144 (1000x4608x3584), 256x112
(1000x3584x14336), 64x80 (77x5120x5120) and 128x88 (1000x1408x2048): widths that make the tiles nearly whole
waves of the 132 SMs (`experiments/2026-11-27-library-kernels`).

Per shape: the default; for each tile class (128-row pairs with ping-pong consumers, 128-row pairs
cooperative, 256-row pairs cooperative, 64-row pairs) no taller than C needs, the two widths (64 and up) with
the least waves x width (ties: the wider), the first also with C through the TMA store; the transposed product
with 16 and 32 columns where M <= 16; split-K where K is long. The deepest ring up to 8 that fits; the evaluator
checks every output; both modes, the libraries timed alongside. Results are written after each shape.

Usage (one GPU): python widths.py OUT_DIR [MxNxK,... [focus]]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "2026-11-26-small-tiles"))
from small_tiles import main  # noqa: E402  (evaluates configurations per shape, writes OUT_DIR/name)

SHAPES = [(1000, 4608, 3584), (1000, 1408, 2048), (77, 5120, 5120), (128, 4608, 3584), (200, 13824, 5120),
          (2560, 2560, 2560), (4096, 1408, 2048), (1000, 3584, 14336), (1024, 1024, 16384), (16, 4608, 3584),
          (16, 1408, 2048), (128, 1408, 2048), (1000, 14336, 4096), (2048, 16384, 512)]  # fmt: skip
SMS = 132
# (name, bm, consumers, pingpong, widest bn the registers allow)
CLASSES = [("128pp", 128, 2, 1, 192), ("128co", 128, 2, 0, 256), ("256co", 256, 2, 0, 192), ("64", 64, 1, 0, 256)]


def widths(M: int, N: int, bm: int, widest: int, count: int = 2) -> list[int]:
    """The `count` widths (multiples of 16, 64 up to `widest`, no wider than C) with the least waves x width."""
    options = []
    for bn in range(64, widest + 1, 16):
        if bn > 16 * -(-N // 16):
            break
        tiles = -(-M // bm) * -(-N // bn)
        options.append((-(-tiles // SMS) * bn, -bn))
    return [-b for _, b in sorted(options)[:count]]


def configurations(shape, classes: bool = True) -> dict[str, dict]:
    from hgemm.evaluator.kernels import get_family

    from hgemm.core.shape import Shape

    family, s = get_family("wgmma"), Shape(*shape)
    M, N, K = shape
    base = family.default_params(s)
    found = {"default": base}

    def add(name: str, **p) -> None:
        q = family.repair({**base, "epilogue": 0, "epi_panels": 0, "split_k": 1, "split_dsmem": 0, "stream_k": 0,
                           "swap_ab": 0, "persistent": 1, **p, "stages": 8})  # fmt: skip
        q = family.default_tuning(q, shape=s)
        q = family.repair(q)
        if family.check(q, s) is None and q not in found.values():
            found[name] = q

    for name, bm, consumers, pingpong, widest in CLASSES if classes else ():
        if bm > 64 * -(-M // 64):
            continue  # a tile taller than C only multiplies zero fill
        pair = 2 if -(-M // bm) % 2 == 0 else 1
        for i, bn in enumerate(widths(M, N, bm, widest)):
            add(f"{bm}x{bn} {name} c{pair}", bm=bm, bn=bn, consumers=consumers, pingpong=pingpong, cluster_m=pair)
            if i == 0 and bn % 32 == 0:
                add(f"{bm}x{bn} {name} c{pair} tma", bm=bm, bn=bn, consumers=consumers, pingpong=pingpong,
                    cluster_m=pair, epilogue=1, epi_panels=2)  # fmt: skip
    k_blocks = -(-K // 64)
    if M <= 64:  # the transposed product: C's rows are the kernel's columns, as few as 16
        narrow = 16 * -(-M // 16)
        for split in (1, 2, 3, 4, 6, 8):
            tiles = -(-N // 64) * split
            if tiles <= 2 * SMS and k_blocks // split >= 8:
                for bn in sorted({narrow, 32}):
                    add(f"swap 64x{bn} s{split}", bm=64, bn=bn, consumers=1, pingpong=0, cluster_m=1, swap_ab=1,
                        split_k=split)  # fmt: skip
    if M >= 256:
        add("128x224 128co c2 tma", bm=128, bn=224, consumers=2, pingpong=0, cluster_m=2, epilogue=1, epi_panels=2)
    if k_blocks >= 64:
        for bm, bn, consumers, pingpong in ((128, 128, 2, 0), (128, 128, 2, 1), (128, 64, 2, 0), (64, 128, 1, 0)):
            tiles = -(-M // bm) * -(-N // bn)
            for split in (2, 3, 4):
                if tiles * split <= SMS:
                    pair = 2 if -(-M // bm) % 2 == 0 else 1
                    add(f"{bm}x{bn} split {split} c{pair} pp{pingpong}", bm=bm, bn=bn, consumers=consumers,
                        pingpong=pingpong, cluster_m=pair, split_k=split)  # fmt: skip
    return found


if __name__ == "__main__":
    from hgemm.evaluator.kernels import get_family

    given = [tuple(int(x) for x in s.split("x")) for s in sys.argv[2].split(",")] if len(sys.argv) > 2 else SHAPES
    if len(sys.argv) > 3 and sys.argv[3] == "focus":  # the default, the transposed product, split-K and 128x224
        main(sys.argv[1], given, family=get_family("wgmma"), configurations=lambda s: configurations(s, False),
             name="focus.json")  # fmt: skip
    else:
        main(sys.argv[1], given, family=get_family("wgmma"), configurations=configurations, name="widths.json")
