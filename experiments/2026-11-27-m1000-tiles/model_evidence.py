"""The analytic model's view of the paired-cluster default: for every shape of `changed-defaults.json`, the
model's H100 time of the old default over the new one. Prints the geomean, the counts either way and the five
shapes where the model expects the new default to lose most. No GPU.

Usage: python model_evidence.py
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "2026-11-26-model-error"))
from model_error import GPUS  # noqa: E402  (what the model needs to know of the H100)

if __name__ == "__main__":
    from hgemm.agent.model import predict_us
    from hgemm.evaluator.kernels import get_family

    from hgemm.core.shape import Shape

    family, gpu = get_family("wgmma"), GPUS["NVIDIA H100 80GB HBM3"]
    ratios = {}
    for key, pair in json.loads((HERE / "changed-defaults.json").read_text()).items():
        shape = Shape(*map(int, key.split("x")))
        ratios[key] = predict_us(family, pair["before"], shape, gpu) / predict_us(family, pair["after"], shape, gpu)
    geomean = math.exp(sum(map(math.log, ratios.values())) / len(ratios))
    print(f"{len(ratios)} shapes: model's old/new default time, geomean {geomean:.3f}; new faster on "
          f"{sum(r > 1 for r in ratios.values())}, slower on {sum(r < 1 for r in ratios.values())}")  # fmt: skip
    for key in sorted(ratios, key=ratios.get)[:5]:
        print(f"  {key}: {ratios[key]:.3f}")
