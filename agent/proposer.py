"""Candidates and the proposer protocol shared by the template search and the LLM proposers.

A proposer turns context (shape, GPU, retrieved exemplars, history) into candidate kernel
sources; the loop in `agent.loop` evaluates, archives and indexes them and reports the
results back through `observe`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from hgemm.agent.stores import ArchiveStore, IndexStore

from hgemm.core.record import EvalRecord, GpuInfo, kernel_hash
from hgemm.core.shape import Shape


@dataclass
class Candidate:
    source: str
    proposer: str  # "template", "llm:<model>", "import"
    family: str | None = None  # set when a template family rendered it
    params: dict[str, Any] | None = None
    parents: list[str] = field(default_factory=list)  # kernel hashes
    note: str = ""

    @property
    def hash(self) -> str:
        return kernel_hash(self.source)


@dataclass
class ProposalContext:
    shape: Shape
    gpu: GpuInfo
    archive: ArchiveStore | None = None  # the archive, when one is open
    retriever: IndexStore | None = None  # the index, when one is available
    history: list[tuple[Candidate, EvalRecord]] = field(default_factory=list)  # this run's results so far

    @property
    def M(self) -> int:
        return self.shape.M

    @property
    def N(self) -> int:
        return self.shape.N

    @property
    def K(self) -> int:
        return self.shape.K


class Proposer(Protocol):
    name: str

    def propose(self, ctx: ProposalContext, n: int) -> list[Candidate]: ...

    def observe(self, results: list[tuple[Candidate, EvalRecord]]) -> None: ...
