"""What the agent needs of the archive and of the index, as Protocols: the loop, the proposers and the sweep
are typed against these, not against `Any`, so a stand-in store is checked like the real one.

- `ArchiveStore` is what `hgemm.archive.Archive` provides to the agent; `IndexStore` what
  `hgemm.index.Retriever` provides. Neither Protocol names a method the agent does not call.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from hgemm.core.record import EvalRecord
from hgemm.core.shape import Shape


class ArchiveStore(Protocol):
    def record(self, candidate: Any, record: EvalRecord, *, run_id: int | None = None) -> list[int]: ...

    def unrank_search_rows(self, kernel: str, shape: Shape, gpu: str | None) -> int: ...

    def eval_record(self, record_id: int) -> EvalRecord | None: ...

    def best(self, shape: Shape, gpu: str | None = None, mode: str = "offline") -> dict[str, Any] | None: ...

    def leaderboard(self, gpu: str | None = None, mode: str = "offline", top: int | None = None,
                    shape: Shape | None = None) -> list[dict[str, Any]]: ...

    def attempts(self, shape: Shape, gpu: str | None = None, limit: int | None = None
                 ) -> list[dict[str, Any]]: ...

    def records_by_id(self, ids: Iterable[int]) -> dict[int, dict[str, Any]]: ...

    def start_run(self, command: str, config: dict[str, Any] | None = None) -> int: ...

    def end_run(self, run_id: int, status: str = "done") -> None: ...

    def add_llm_call(self, run_id: int | None, model: str, prompt_tokens: int, completion_tokens: int,
                     cost_usd: float, latency_s: float, outcome: str, kernel_hash: str | None = None,
                     prompt: str | None = None, reply: str | None = None) -> int: ...

    def export(self, path: Path | str | None, fmt: str = "jsonl") -> int: ...

    def execute(self, sql: str, params: Iterable[Any] = ()) -> list[Any]: ...


class IndexStore(Protocol):
    def sync(self) -> dict[str, Any]: ...

    def similar_shapes(self, shape: Shape, gpu: str | None = None, k: int = 5) -> list[dict[str, Any]]: ...

    def history(self, shape: Shape, gpu: str | None = None, k: int = 10) -> list[dict[str, Any]]: ...
