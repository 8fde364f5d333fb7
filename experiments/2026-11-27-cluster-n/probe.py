"""The A tile shared along N (`cluster_n` 2: 1x2 clusters, or 2x2 with the B tile shared along M as before), on
the kernels the search chose for shapes-real's slowest shapes (experiments/2026-11-27-worst-neighbours/
chosen-all.json, H100) and the default at 1024^3. The idea: at these sizes each CTA's operands come from the L2
at about 6-7.5 TB/s in all, and cuBLAS, there, runs 1x2, 2x2, 4x2 and 2x4 clusters that multicast both
operands (experiments/2026-11-27-library-kernels), cutting what the L2 must serve. Per shape: the chosen kernel;
it with cluster_n 2 (the same cluster_m); with 1x2 and with 2x2 clusters; the same ring. The
evaluator checks every output; both modes, the libraries alongside.

Usage (one GPU): python probe.py OUT_DIR [MxNxK,...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-11-26-small-tiles"))
from small_tiles import main  # noqa: E402  (evaluates configurations per shape, writes OUT_DIR/name)

CHOSEN = json.loads((HERE.parent / "2026-11-27-worst-neighbours" / "chosen-all.json").read_text())
SHAPES = [(1000, 1408, 2048), (16, 4608, 3584), (128, 4608, 3584), (128, 1408, 2048), (77, 5120, 5120),
          (1000, 4608, 3584), (1024, 1024, 1024), (4096, 1408, 2048), (200, 13824, 5120), (2560, 2560, 2560),
          (128, 8192, 8192), (1000, 2048, 1408)]  # fmt: skip


def configurations(shape) -> dict[str, dict]:
    from hgemm.evaluator.kernels import get_family

    from hgemm.core.shape import Shape

    family = get_family("wgmma")
    s = Shape(*shape)
    key = "x".join(map(str, shape))
    base = CHOSEN[key]["params"] if key in CHOSEN else family.default_params(s)
    base = family.default_tuning(base, only_absent=True, shape=s)
    found = {"chosen": base}
    for name, change in {"cluster_n 2": {"cluster_n": 2}, "1x2": {"cluster_m": 1, "cluster_n": 2},
                         "2x2": {"cluster_m": 2, "cluster_n": 2}}.items():  # fmt: skip
        p = family.repair({**base, **change})
        if family.check(p, s) is None and p not in found.values():
            found[name] = p
    return found


if __name__ == "__main__":
    from hgemm.evaluator.kernels import get_family

    given = [tuple(int(x) for x in k.split("x")) for k in sys.argv[2].split(",")] if len(sys.argv) > 2 else SHAPES
    main(sys.argv[1], given, family=get_family("wgmma"), configurations=configurations, name="probe.json")
