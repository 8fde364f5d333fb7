"""The two tuning knobs that moved most in probe.py (K per ring stage 128, the producer loop in its whole warp),
alone and together (a change of K per stage keeps the ring's bytes: half or twice the stages), on the kernel the search chose for every shapes-real shape it gave to the wgmma family
(chosen-all.json, from the confirmed report of 2026-11-27, H100) and on the family's default. Which shapes gain,
to write the rule the defaults take. The evaluator checks every output; both modes, the libraries alongside.

Usage (one GPU): python tuning.py OUT_DIR [MxNxK,...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-11-26-small-tiles"))
from small_tiles import main  # noqa: E402  (evaluates configurations per shape, writes OUT_DIR/name)

CHOSEN = json.loads((HERE / "chosen-all.json").read_text())
TUNINGS = {"": {}, " sk128": {"stage_k": 128}, " warp": {"warp_producer": 1}, " sk128 warp": {"stage_k": 128,
           "warp_producer": 1}, " sk64": {"stage_k": 64}, " thread": {"warp_producer": 0}}  # fmt: skip


def configurations(shape) -> dict[str, dict]:
    from hgemm.evaluator.kernels import get_family

    from hgemm.core.shape import Shape

    family = get_family("wgmma")
    s = Shape(*shape)
    found: dict[str, dict] = {}
    for base_name, base in (("chosen", CHOSEN["x".join(map(str, shape))]["params"]), ("default", family.default_params(s))):
        base = family.default_tuning(base, only_absent=True, shape=s)
        for suffix, change in TUNINGS.items():
            q = {**base, **change}
            if q.get("stage_k") != base.get("stage_k"):  # the same ring bytes: half or twice the stages
                q["stages"] = base["stages"] // 2 if q["stage_k"] == 128 else base["stages"] * 2
                while q["stages"] > 2 and family.check(q, s) is not None:
                    q["stages"] -= 1
            if family.check(q, s) is None and q not in found.values():
                found[base_name + suffix] = q
    return found


if __name__ == "__main__":
    from hgemm.evaluator.kernels import get_family

    given = sys.argv[2].split(",") if len(sys.argv) > 2 else list(CHOSEN)
    shapes = [tuple(int(x) for x in k.split("x")) for k in given]
    main(sys.argv[1], shapes, family=get_family("wgmma"), configurations=configurations, name="tuning.json")
