"""The judge with one switch for the probe: `set_connections(n)` starts every later runner with
CUDA_DEVICE_MAX_CONNECTIONS=n; the spares already started are ended and replaced, and their contexts are up before
it returns. Everything else is the product's judge."""

from __future__ import annotations

from functools import partial

from hgemm.evaluator.judge import Judge
from hgemm.evaluator.phases import Phases
from hgemm.evaluator.runner_client import RunnerProcess


class ConnectionsJudge(Judge):
    def set_connections(self, n: int) -> dict:
        self.new_runner = partial(RunnerProcess, env_extra={"CUDA_DEVICE_MAX_CONNECTIONS": str(int(n))})
        for spare in self.spares:
            spare.kill()
        self.spares = []
        self._fill_spares()
        for spare in self.spares:
            spare.init()
        self._quiet(Phases())
        return {"connections": int(n)}
