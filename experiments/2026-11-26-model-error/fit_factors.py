"""`hgemm.bench.fit_wgmma_factors` with the wgmma family's own shared-memory sizes in the bare model.

The bench script's bare model is `predict_us("wgmma", ...)`: given the family's name only, the model estimates
shared memory with its generic formula, which puts the TMA-store configurations with a two-panel C ring (the
usual large-shape winners, e.g. 128x256 with 4 stages) over the opt-in limit, so their times drop out of the
fit as unlaunchable. Here the bare model gets an object that has the family's `smem_bytes` and no
`time_factor`; everything else is the bench script's (same arguments, same output).

Usage: python experiments/2026-11-26-model-error/fit_factors.py --archive ARCHIVE --gpu-name NAME --l2-mib L2
           [--sweeps ...] [other fit_wgmma_factors arguments]
"""

from __future__ import annotations

import sys

from hgemm.agent.model import predict_us
from hgemm.bench import fit_wgmma_factors as fit

from hgemm.core.record import GpuInfo
from hgemm.core.shape import Shape


class Bare:
    """The family as the bare model sees it: its name and shared-memory sizes, not its time factors."""

    def __init__(self, family) -> None:
        self.name = family.name
        self.smem_bytes = family.smem_bytes


def bare_us(family, params: dict, shape: tuple[int, int, int], gpu: GpuInfo) -> float:
    return predict_us(Bare(family), params, Shape(*shape), gpu)


if __name__ == "__main__":
    fit.bare_us = bare_us
    sys.exit(fit.main())
