"""The judge with one switch for the probe: with `overlap` on, a quick-stage timing does not wait for the next
runner's CUDA context to come up, nor for a retired runner's to come down (the full stage and the baselines'
own timing keep the quiet rule). Everything else is the product's judge."""

from __future__ import annotations

from hgemm.evaluator.judge import Judge


class OverlapJudge(Judge):
    def __init__(self) -> None:
        super().__init__()
        self.overlap = False
        self._skip = False

    def set_overlap(self, on: bool) -> dict:
        self.overlap = bool(on)
        return {"overlap": self.overlap}

    def _time_mode(self, runner, mode, stage, protocol="rules"):
        self._skip = self.overlap and stage == "quick"
        try:
            return super()._time_mode(runner, mode, stage, protocol)
        finally:
            self._skip = False

    def _quiet(self, ph) -> None:
        if not self._skip:
            super()._quiet(ph)
