"""Choose the fixed 100-shape benchmark subset of the 1,000-shape grid: the package's `grid100.txt`.

The grid is M, N, K each in {64, 128, ..., 16384} (ten sizes). Shapes are stratified by FLOP decade
(2*M*N*K from ~5e5 to ~9e12): every decade gets at least `MIN_PER_DECADE` shapes (or all it has), the rest of
the 100 goes to decades in proportion to their size, and within a decade shapes are drawn with a fixed seed.
`hgemm sweep` reads the file by default.

Usage: python -m hgemm.bench.grid100            # rewrite grid100.txt (beside this module)
       python -m hgemm.bench.grid100 --check    # exit 1 if the file differs from what this writes

- Deterministic: seeded draw, sorted output (by FLOPs, then shape).
- Exactly 100 distinct shapes; every FLOP decade of the grid represented.
"""

from __future__ import annotations

import itertools
import math
import random
import sys
from importlib import resources
from pathlib import Path

SIZES = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288, 16384)
TOTAL = 100
MIN_PER_DECADE = 6
SEED = 20240611
GRID = resources.files("hgemm.bench").joinpath("grid100.txt")  # what `hgemm sweep` reads by default


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
        f"# stratified by FLOP decade (2*M*N*K), seed {SEED}; written by python -m hgemm.bench.grid100, do not edit",
        "# shapes per decade: " + ", ".join(f"1e{d}: {n}" for d, n in sorted(counts.items())),
        "# M N K",
    ]
    return "\n".join(header + [f"{M} {N} {K}" for M, N, K in shapes]) + "\n"


def main(argv: list[str]) -> int:
    text = render(choose())
    if "--check" in argv:
        same = GRID.is_file() and GRID.read_text() == text
        print("grid100.txt is up to date" if same else "grid100.txt differs from hgemm.bench.grid100's output")
        return 0 if same else 1
    out = Path(str(GRID))  # the file beside this module (in a checkout: bench/grid100.txt)
    out.write_text(text)
    print(f"wrote {out}: {text.count(chr(10)) - 4} shapes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
