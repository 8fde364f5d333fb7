"""Choose the fixed 100-configuration benchmark subset of the 1,000-shape grid; writes bench/grid100.txt.

The grid is M, N, K each in {64, 128, ..., 16384} (ten sizes). Shapes are stratified by FLOP
decade (2*M*N*K from ~5e5 to ~9e12): every decade gets at least `MIN_PER_DECADE` shapes (or all
of them when it has fewer), the rest of the 100 goes to decades in proportion to their size, and
within a decade shapes are drawn with a fixed seed. Invariants: deterministic (seeded, sorted
output); exactly 100 distinct shapes; every decade of the grid represented.

    python bench/grid100.py            # rewrite bench/grid100.txt
    python bench/grid100.py --check    # exit 1 if the committed file differs
"""

from __future__ import annotations

import itertools
import math
import random
import sys
from pathlib import Path

SIZES = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288, 16384)
TOTAL = 100
MIN_PER_DECADE = 6
SEED = 20240611
OUT = Path(__file__).with_name("grid100.txt")


def decade(shape: tuple[int, int, int]) -> int:
    M, N, K = shape
    return int(math.floor(math.log10(2.0 * M * N * K)))


def choose(total: int = TOTAL, seed: int = SEED) -> list[tuple[int, int, int]]:
    grid = list(itertools.product(SIZES, repeat=3))
    strata: dict[int, list[tuple[int, int, int]]] = {}
    for shape in grid:
        strata.setdefault(decade(shape), []).append(shape)
    quota = {d: min(len(s), MIN_PER_DECADE) for d, s in strata.items()}
    left = total - sum(quota.values())
    # largest-remainder apportionment of the rest by stratum size, capped by what each stratum holds
    while left > 0:
        open_ = [d for d in sorted(strata) if len(strata[d]) > quota[d]]
        weight = sum(len(strata[d]) for d in open_)
        shares = {d: left * len(strata[d]) / weight for d in open_}
        order = sorted(open_, key=lambda d: (-(shares[d] - math.floor(shares[d])), d))
        extra = left - sum(math.floor(v) for v in shares.values())
        for i, d in enumerate(order):
            want = math.floor(shares[d]) + (1 if i < extra else 0)
            quota[d] += min(want, len(strata[d]) - quota[d])
        left = total - sum(quota.values())
    rng = random.Random(seed)
    chosen = []
    for d in sorted(strata):
        chosen += rng.sample(sorted(strata[d]), quota[d])
    return sorted(chosen, key=lambda s: (2 * s[0] * s[1] * s[2], s))


def render(shapes: list[tuple[int, int, int]]) -> str:
    counts: dict[int, int] = {}
    for s in shapes:
        counts[decade(s)] = counts.get(decade(s), 0) + 1
    header = [
        f"# hgemm benchmark grid: {len(shapes)} of the 1,000 shapes M, N, K in {{{', '.join(map(str, SIZES))}}}",
        f"# stratified by FLOP decade (2*M*N*K), seed {SEED}; written by bench/grid100.py, do not edit",
        "# shapes per decade: " + ", ".join(f"1e{d}: {n}" for d, n in sorted(counts.items())),
        "# M N K",
    ]
    return "\n".join(header + [f"{M} {N} {K}" for M, N, K in shapes]) + "\n"


def main(argv: list[str]) -> int:
    text = render(choose())
    if "--check" in argv:
        same = OUT.exists() and OUT.read_text() == text
        print("grid100.txt is up to date" if same else "grid100.txt differs from bench/grid100.py's output")
        return 0 if same else 1
    OUT.write_text(text)
    print(f"wrote {OUT.name}: {text.count(chr(10)) - 4} shapes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
