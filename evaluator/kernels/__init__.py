"""Registry of our own kernel families: `FAMILIES` by name, plus the Hopper (wgmma) families
when that module is present."""

from __future__ import annotations

from hgemm.evaluator.kernels.family import Family
from hgemm.evaluator.kernels.gemv_family import GemvFamily
from hgemm.evaluator.kernels.mma_family import MmaFamily, MmaSplitKFamily
from hgemm.evaluator.kernels.small_family import SmallFamily

FAMILIES: dict[str, Family] = {f.name: f for f in (MmaFamily(), MmaSplitKFamily(), SmallFamily(), GemvFamily())}

try:
    from hgemm.evaluator.kernels.wgmma_family import FAMILIES as WGMMA_FAMILIES
except ModuleNotFoundError as exc:
    if exc.name != "hgemm.evaluator.kernels.wgmma_family":
        raise
else:
    FAMILIES.update(WGMMA_FAMILIES)


def get_family(name: str) -> Family:
    """The family called `name`; KeyError lists the known names."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise KeyError(f"unknown kernel family {name!r}; known: {', '.join(sorted(FAMILIES))}") from None


def all_families() -> list[Family]:
    return list(FAMILIES.values())
