"""The index logic of gemv.cu replayed in Python (no GPU): for random shapes, parameters and grids, every C element
is stored exactly once, by the lane the kernel names, and sums every K value exactly once.

Usage: python index_check.py
"""

from __future__ import annotations

import random

CHUNK = 256


def replay(M, N, K, MAXM, ROWS, WARPS, KSPLIT, UNROLL, grid):  # noqa: N803 (the kernel's names)
    NW = WARPS // KSPLIT  # noqa: N806
    chunks = -(-K // CHUNK)
    per = -(-chunks // KSPLIT)
    groups = -(-N // ROWS)
    cta_groups = -(-groups // NW)
    summed, stores = {}, {}
    for block in range(grid):
        for G in range(block, cta_groups, grid):  # noqa: N806
            partial = {}
            for warp in range(WARPS):
                wn, wk = warp % NW, warp // NW
                c_begin, c_end = wk * per, min(chunks, wk * per + per)
                n0 = (G * NW + wn) * ROWS
                for c in range(c_begin, c_end, UNROLL):
                    for u in range(UNROLL):
                        for lane in range(32):
                            k = (c + u) * CHUNK + lane * 8
                            if c + u >= c_end or k >= K:
                                continue
                            for m in range(min(M, MAXM)):
                                for r in range(ROWS):
                                    if n0 + r < N:
                                        partial.setdefault((m, n0 + r), []).extend(range(k, k + 8))
            for wn in range(NW):  # the warps with wk == 0 store
                n0 = (G * NW + wn) * ROWS
                for m in range(MAXM):
                    for r in range(ROWS):
                        for lane in range(32):
                            if (m * ROWS + r) % 32 == lane and m < M and n0 + r < N:
                                stores[(m, n0 + r)] = stores.get((m, n0 + r), 0) + 1
                                summed[(m, n0 + r)] = partial.get((m, n0 + r), [])
    assert len(stores) == M * N and all(v == 1 for v in stores.values()), "an element stored not exactly once"
    for key, ks in summed.items():
        assert sorted(ks) == list(range(K)), f"{key}: {len(ks)} K values summed of {K}"


def main() -> None:
    rng = random.Random(1)
    for _ in range(60):
        maxm = rng.choice([1, 8, 16])
        warps = rng.choice([4, 8])
        replay(M=rng.randint(1, maxm), N=rng.randint(1, 70), K=8 * rng.randint(1, 200), MAXM=maxm,
               ROWS=rng.choice([1, 2, 4, 8]), WARPS=warps, KSPLIT=rng.choice([k for k in (1, 2, 4) if warps % k == 0]),
               UNROLL=rng.choice([1, 2, 4]), grid=rng.randint(1, 9))  # fmt: skip
    print("ok: 60 random cases")


if __name__ == "__main__":
    main()
