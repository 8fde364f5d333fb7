"""Judge sessions for `sandbox_ab.py`: the product's judge, with its runners started in less of the sandbox.
For measurement only; the product never runs candidates like this."""

from __future__ import annotations

from hgemm.evaluator import sandbox
from hgemm.evaluator.judge import Judge


class NoNamespaceJudge(Judge):
    """Runners without network, PID and mount namespaces (seccomp filter and limits kept)."""

    def __init__(self) -> None:
        super().__init__()
        sandbox.report = lambda: sandbox.Report(False, True, ("experiment: no namespaces",))


class NoSeccompJudge(Judge):
    """Runners with neither namespaces nor the seccomp filter (limits kept)."""

    def __init__(self) -> None:
        super().__init__()
        sandbox.report = lambda: sandbox.Report(False, False, ("experiment: no namespaces, no seccomp",))
