"""The template proposer's nearby-evidence rule replayed on an archive export (no GPU): for each shape and each
family measured there, would the family be ruled out by its losses on the 3 nearest shapes (the retriever's shape
features; this GPU's search records measured after the arena fix), at a threshold T? And was it the fastest
family on the shape?

Usage: python nearby_sim.py EXPORT.jsonl.xz [GPU_NAME_PREFIX]
"""

from __future__ import annotations

import collections
import json
import lzma
import sys

import numpy as np
from hgemm.index.features import shape_features

from hgemm.core.shape import Shape

AFTER = "2026-11-26T09:30"  # records measured after the arena fix
THRESHOLDS = (2.0, 1.5, 1.3, 1.25, 1.2, 1.1)


def fastest_per_family(path: str, gpu: str) -> tuple[dict, collections.Counter]:
    """(shape -> family -> fastest offline us, (shape, family) -> search evaluations)."""
    families, records = {}, []
    with lzma.open(path, "rt") as f:
        for line in f:
            d = json.loads(line)
            if "hash" in d and "params" in d:
                families[d["hash"]] = d["family"]
            elif "record" in d:
                records.append(d["record"])
    best: dict = collections.defaultdict(dict)
    evals: collections.Counter = collections.Counter()
    for r in records:
        mode = (r.get("modes") or {}).get("offline")
        if r["created"] < AFTER or not r["gpu"].startswith(gpu) or not r.get("correct") or not mode:
            continue
        if r.get("stage") not in ("quick", "full"):
            continue  # confirmations are not the search's choices
        shape, family = (r["M"], r["N"], r["K"]), families.get(r["kernel_hash"], "?")
        best[shape][family] = min(mode["candidate"]["median_us"], best[shape].get(family, float("inf")))
        evals[(shape, family)] += 1
    return best, evals


def main(path: str, gpu: str = "NVIDIA H100") -> None:
    best, evals = fastest_per_family(path, gpu)
    shapes = list(best)
    features = np.stack([shape_features(Shape(*s)) for s in shapes])
    nearest = {}
    for i, s in enumerate(shapes):
        dist = ((features - features[i]) ** 2).sum(1)
        dist[i] = np.inf
        nearest[s] = [shapes[j] for j in np.argsort(dist)[:3]]
    others = sum(v for (_, f), v in evals.items() if f != "wgmma")
    print(f"{len(shapes)} shapes; {sum(evals.values())} search evaluations, {others} of families other than wgmma")
    for t in THRESHOLDS:
        ruled = saved = 0
        lost = []
        for s, times in best.items():
            top = min(times.values())
            for f in times:
                if all(f in best[x] and best[x][f] >= t * min(best[x].values()) for x in nearest[s]):
                    ruled += 1
                    saved += evals[(s, f)]
                    if times[f] <= top * 1.0001:
                        lost.append((s, f))
        print(f"T {t}: rules out {ruled} (shape, family) pairs that took {saved} evaluations; "
              f"of them the shape's fastest family: {len(lost)} {lost[:5]}")


if __name__ == "__main__":
    main(*sys.argv[1:])
