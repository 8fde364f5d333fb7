"""The wgmma kernel's last wait before a CTA exits: for every C store to be done (`cp.async.bulk.wait_group 0`,
the source before 2026-11-26) or only for the stores to have read shared memory (`.read`, as CUTLASS's epilogue
ends). Same configurations, evaluated by the evaluator in alternation, both modes, on output-heavy shapes (where
an SM held while its stores drain delays the next launch of an offline run) and one compute-bound control.

Usage (one GPU): python ab.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

SHAPES = [(4096, 4096, 128), (16384, 16384, 512), (8192, 8192, 256), (4096, 4096, 4096)]
READ_WAIT = "if (SPLIT_K == 1 && wg_thread == 0) tma_store_wait_read<0>();"
FULL_WAIT = 'if (SPLIT_K == 1 && wg_thread == 0) asm volatile("cp.async.bulk.wait_group 0;\\n" ::: "memory");'


def sources(shape) -> dict[str, str]:
    from hgemm.evaluator.kernels import get_family

    from hgemm.core.shape import Shape

    family = get_family("wgmma")
    params = family.default_params(Shape(*shape))
    new = family.render(params)
    assert new.count(READ_WAIT) == 1, "the rendered source no longer has the line this experiment swaps"
    return {"read": new, "full": new.replace(READ_WAIT, FULL_WAIT)}


def main(out_dir: str) -> None:
    from hgemm.evaluator.local import LocalEvaluator

    rows = []
    with LocalEvaluator() as ev:
        for shape in SHAPES:
            variants = sources(shape)
            for rep in range(2):
                order = list(variants) if rep == 0 else list(reversed(variants))
                records = ev.evaluate([variants[v] for v in order], shape, stage="full")
                for name, rec in zip(order, records, strict=True):
                    row = {"shape": list(shape), "wait": name, "rep": rep, "ok": rec.ok, "failure": rec.failure_message}
                    for mode in ("offline", "server"):
                        m = rec.modes.get(mode)
                        row[mode] = {"us": m.candidate.median_us, "speedup_best": m.speedup_best} if m else None
                    rows.append(row)
                    text = "  ".join(f"{md} {row[md]['us']:.2f} us ({row[md]['speedup_best']:.3f}x)" for md in
                                     ("offline", "server") if row[md])  # fmt: skip
                    print(f"{shape} {name:4s} rep {rep}: {text or row['failure']}", flush=True)
    Path(out_dir, "store-tail.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
