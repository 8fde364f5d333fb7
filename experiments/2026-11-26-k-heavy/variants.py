"""K-heavy shapes with small outputs, the full grid's furthest behind after the evaluator fix (H100, 2026-11-26:
1024x1024x12288 and 2048x512x12288 at 0.82x, 1024x256x16384 0.85x, 256x4096x16384 0.86x). The sweep's 8
evaluations tried 3-5 wgmma configurations there; its best was 128x256 tiles split 4 ways through the workspace.
This evaluates, on each shape, the split-K and stream-K space around that: tile 128x256, 128x192, 128x128, 64x128;
split 1-8 through the workspace or (up to 4) in the cluster's shared memory; stream-K; each checked by the
family (`check`) before it is compiled. Both modes, baselines alongside, as the evaluator times everything.

Usage (one GPU): python variants.py OUT_DIR
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from pathlib import Path

SHAPES = [(1024, 1024, 12288), (2048, 512, 12288), (1024, 256, 16384), (256, 4096, 16384)]
TILES = [(128, 256), (128, 192), (128, 128), (64, 128)]
SPLITS = [1, 2, 3, 4, 6, 8]


def variants(shape) -> dict[str, dict]:
    from hgemm.evaluator.kernels import get_family

    from hgemm.core.shape import Shape

    family = get_family("wgmma")
    base = family.default_params(Shape(*shape))
    out = {"default": base}
    for (bm, bn), split, dsmem in itertools.product(TILES, SPLITS, (0, 1)):
        if dsmem and not 2 <= split <= 4:
            continue
        p = {**base, "bm": bm, "bn": bn, "consumers": 1 if bm == 64 else 2, "split_k": split, "split_dsmem": dsmem,
             "stream_k": 0, "pingpong": 0, "epilogue": 0 if split > 1 else base.get("epilogue", 1),
             "persistent": 0 if dsmem else 1, "cluster_m": 1}  # fmt: skip
        out[f"{bm}x{bn} split {split}{' dsmem' if dsmem else ''}"] = p
    for bm, bn in TILES[:3]:
        out[f"{bm}x{bn} stream-K"] = {**base, "bm": bm, "bn": bn, "consumers": 2, "stream_k": 1, "split_k": 1,
                                      "split_dsmem": 0, "cluster_m": 1, "epilogue": 0}  # fmt: skip
    valid = {}
    for name, p in out.items():
        p = family.repair(p)
        for stages in (8, 7, 6, 5, 4, 3, 2):
            q = {**p, "stages": stages}
            if family.check(q, Shape(*shape)) is None:
                if q not in valid.values():
                    valid[name] = q
                break
    return valid


def evaluate_rows(ev, family, shape, found: dict[str, dict]) -> list[dict]:
    """One evaluation of every configuration in `found` on `shape`, as rows (both modes, against the best library)."""
    names = list(found)
    records = ev.evaluate([family.render(found[n]) for n in names], shape, stage="full")
    rows = []
    for name, rec in zip(names, records, strict=True):
        row = {"shape": list(shape), "variant": name, "params": found[name], "ok": rec.ok,
               "failure": rec.failure_kind}  # fmt: skip
        for mode in ("offline", "server"):
            m = rec.modes.get(mode)
            row[mode] = {"us": m.candidate.median_us, "speedup_best": m.speedup_best} if m else None
        rows.append(row)
    return rows


def evaluate_shape(ev, family, shape, found: dict[str, dict]) -> list[dict]:
    """`evaluate_rows` for one shape, timed, with a line naming the shape, its variant count and its failures."""
    started = time.monotonic()
    rows = evaluate_rows(ev, family, shape, found)
    bad = [r["variant"] + ": " + str(r["failure"]) for r in rows if not r["ok"]]
    print(f"{'x'.join(map(str, shape))}: {len(found)} variants in {time.monotonic() - started:.0f} s; "
          f"failed: {bad or 'none'}", flush=True)  # fmt: skip
    return rows


def main(out_dir: str) -> None:
    from hgemm.evaluator.kernels import get_family
    from hgemm.evaluator.local import LocalEvaluator

    family = get_family("wgmma")
    rows = []
    with LocalEvaluator() as ev:
        for shape in SHAPES:
            found = variants(shape)
            names = list(found)
            started = time.monotonic()
            rows += evaluate_rows(ev, family, shape, found)
            best = sorted((r for r in rows if r["shape"] == list(shape) and r["offline"]),
                          key=lambda r: r["offline"]["us"])[:6]  # fmt: skip
            print(f"{'x'.join(map(str, shape))}: {len(names)} variants in {time.monotonic() - started:.0f} s", flush=True)
            for r in best:
                print(f"  {r['variant']:24s} offline {r['offline']['us']:7.1f} us ({r['offline']['speedup_best']:.3f}x)"
                      f"  server {r['server']['us']:7.1f} us ({r['server']['speedup_best']:.3f}x)", flush=True)  # fmt: skip
            Path(out_dir, "k-heavy.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
