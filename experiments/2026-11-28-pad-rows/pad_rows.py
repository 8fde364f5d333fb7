"""K not a multiple of 8 (rows of A and Bt that TMA cannot read): the wgmma family with `pad_rows`, which copies A
and Bt into the workspace with 16-byte rows before the GEMM, against the mma.sync families that read such rows
directly (two or four bytes at a time, or staged and realigned), and against the libraries. Also N odd (rows of C
TMA cannot store): the wgmma family storing C from the registers element by element.

Per shape: the wgmma default and a few tiles around it, the mma_ms default with and without REALIGN; then the same
wgmma tiles on the shape with K rounded up to 8 (no copy), whose library times say what a caller who padded K
by hand would get from the libraries (the copy not counted). Both modes; the evaluator checks every output.

Usage (one GPU): python pad_rows.py OUT_DIR [MxNxK,...]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "2026-11-26-k-heavy"))
from variants import evaluate_rows  # noqa: E402  (the K-heavy experiment's evaluation loop)

SHAPES = [(3000, 5000, 700), (2047, 2047, 2047), (4096, 4096, 4095), (4095, 4097, 1000), (2000, 3000, 4093),
          (1000, 4096, 4092)]  # fmt: skip
TILES = {  # name -> change to the default
    "128x256 c2": {"bm": 128, "bn": 256, "consumers": 2, "cluster_m": 2, "pingpong": 0, "epi_panels": 2},
    "128x192 c2 pp": {"bm": 128, "bn": 192, "consumers": 2, "cluster_m": 2, "pingpong": 1, "epi_panels": 2},
    "128x128 c2 pp": {"bm": 128, "bn": 128, "consumers": 2, "cluster_m": 2, "pingpong": 1},
    "128x256": {"bm": 128, "bn": 256, "consumers": 2, "cluster_m": 1, "pingpong": 0, "epi_panels": 2},
    "64x128 c2": {"bm": 64, "bn": 128, "consumers": 1, "cluster_m": 2, "pingpong": 0},
}


def wgmma_variants(shape) -> dict[str, dict]:
    from hgemm.evaluator.kernels import get_family

    from hgemm.core.shape import Shape

    fam = get_family("wgmma")
    s = Shape(*shape)
    base = fam.default_params(s)
    if base is None:
        return {}
    found = {"default": base}
    for name, change in TILES.items():
        p = fam.fit(fam.repair({**base, **change, "epilogue": 1}), s)
        for stages in (8, 7, 6, 5, 4, 3):
            q = {**p, "stages": stages}
            if fam.check(q, s) is None:
                if q not in found.values():
                    found[name] = q
                break
    return found


def mma_variants(shape) -> dict[str, dict]:
    from hgemm.evaluator.kernels import get_family

    from hgemm.core.shape import Shape

    fam = get_family("mma_ms")
    s = Shape(*shape)
    base = fam.default_params(s)
    found = {"mma_ms default": base}
    for realign in (0, 1):
        q = {**base, "REALIGN": realign}
        if q != base and fam.check(q, s) is None:
            found[f"mma_ms realign {realign}"] = q
    return found


def main(out_dir: str, shapes: list[tuple[int, int, int]]) -> None:
    from hgemm.evaluator.kernels import get_family
    from hgemm.evaluator.local import LocalEvaluator

    rows = []
    with LocalEvaluator() as ev:
        for shape in shapes:
            aligned = (shape[0], shape[1], -(-shape[2] // 8) * 8)
            runs = [("wgmma", shape, wgmma_variants(shape)), ("mma_ms", shape, mma_variants(shape))]
            if aligned != shape:
                both = {k: v for k, v in wgmma_variants(aligned).items() if k in ("default", "128x256 c2")}
                runs.append(("wgmma", aligned, {f"aligned {k}": v for k, v in both.items()}))
            for fam_name, s, found in runs:
                started = time.monotonic()
                mine = evaluate_rows(ev, get_family(fam_name), s, found) if found else []
                for r in mine:
                    r["asked"] = list(shape)
                rows += mine
                print(f"{'x'.join(map(str, s))} {fam_name}: {len(found)} in {time.monotonic() - started:.0f} s", flush=True)
                for r in sorted(mine, key=lambda r: r["offline"]["us"] if r["offline"] else 1e9):
                    if r["offline"]:
                        print(f"  {r['variant']:24s} offline {r['offline']['us']:8.2f} us ({r['offline']['speedup_best']:.3f}x)"
                              f"  server {r['server']['us']:8.2f} us ({r['server']['speedup_best']:.3f}x)", flush=True)  # fmt: skip
                    else:
                        print(f"  {r['variant']:24s} FAILED {r['failure']}", flush=True)
            Path(out_dir, "pad-rows.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    given = [tuple(int(x) for x in s.split("x")) for s in sys.argv[2].split(",")] if len(sys.argv) > 2 else SHAPES
    main(sys.argv[1], given)
