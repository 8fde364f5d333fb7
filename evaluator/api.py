"""What the rest of hgemm sees of the evaluator: one protocol and its entry points.

`Evaluator.evaluate` takes kernel sources and a shape and returns one `EvalRecord` per
source, never raising for a bad candidate (failures are typed records). The GPU
implementation runs every candidate in a supervised worker process; tests of
orchestration use a stand-in with the same protocol.
"""

from __future__ import annotations

from importlib import resources
from typing import Protocol

from hgemm.core.record import EvalRecord, GpuInfo
from hgemm.core.shape import Shape


def contract_text() -> str:
    """The kernel contract, the single source every prompt includes."""
    return resources.files("hgemm.evaluator").joinpath("contract.md").read_text()


class Evaluator(Protocol):
    def gpu_info(self) -> GpuInfo: ...

    def evaluate(
        self,
        sources: list[str],
        shape: Shape,
        *,
        stage: str = "full",  # "quick": basic checks, timing in `modes` (the loop asks offline only); "full": everything
        modes: tuple[str, ...] = ("offline", "server"),
        ncu: bool = False,
        sanitize: bool = False,
    ) -> list[EvalRecord]: ...
