"""Several models in one run: which one to ask next, by improvement per dollar.

`ModelBandit(models)` is a UCB1 bandit whose arms are models. `choose()` returns the next model: each arm
once first, then the arm maximising mean gain per dollar plus an exploration bonus. `spend`/`credit` feed one request back: `gain` is the relative speedup the request's best kernel
achieved over the best kernel known when the prompt was made (0 for no kernel, a failure or a slower
kernel), `cost_usd` what the request cost (`spend` when a request finishes, `credit` when each of its kernels has
been measured). Free models (self-hosted) are charged `free_cost` per request so
the yield stays finite and comparable. `stats()` gives per-model tokens, cost, kernels and yield for the
run summary. Deterministic for a seed; thread-safe.
"""

from __future__ import annotations

import math
import random
import threading
from dataclasses import dataclass


@dataclass
class Arm:
    model: str
    pulls: int = 0  # requests made
    rewarded: int = 0  # requests whose outcome came back
    gain: float = 0.0  # summed relative improvement
    cost_usd: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    kernels: int = 0  # candidates produced
    correct: int = 0  # of them, correct
    improved: int = 0  # requests that beat the best known kernel

    def charged(self, free_cost: float) -> float:
        return max(self.cost_usd, free_cost * max(1, self.rewarded))

    def yield_per_usd(self, free_cost: float) -> float:
        return self.gain / self.charged(free_cost)


class ModelBandit:
    def __init__(
        self, models: list[str], *, exploration: float = 1.0, free_cost: float = 1e-3, seed: int = 0
    ):
        if not models:
            raise ValueError("a bandit needs at least one model")
        self.arms = {m: Arm(m) for m in dict.fromkeys(models)}
        self.exploration = exploration
        self.free_cost = free_cost
        self.rng = random.Random(seed)
        self._lock = threading.Lock()

    def choose(self) -> str:
        with self._lock:
            untried = [a for a in self.arms.values() if a.pulls == 0]
            if untried:
                arm = untried[0]
            else:
                total = sum(a.pulls for a in self.arms.values())
                yields = {m: a.yield_per_usd(self.free_cost) for m, a in self.arms.items()}
                scale = max(max(yields.values()), 1e-9)  # bonus in the same units as the yields

                def ucb(a: Arm) -> tuple[float, float]:
                    bonus = self.exploration * scale * math.sqrt(2 * math.log(total) / a.pulls)
                    return (yields[a.model] + bonus, self.rng.random())

                arm = max(self.arms.values(), key=ucb)
            arm.pulls += 1
            return arm.model

    def spend(self, model: str, cost_usd: float, prompt_tokens: int = 0, completion_tokens: int = 0,
              kernels: int = 0) -> None:  # fmt: skip
        """A finished request: what it cost and how many candidates it produced."""
        with self._lock:
            arm = self.arms[model]
            arm.rewarded += 1
            arm.cost_usd += cost_usd
            arm.prompt_tokens += prompt_tokens
            arm.completion_tokens += completion_tokens
            arm.kernels += kernels

    def credit(self, model: str, gain: float, correct: bool) -> None:
        """One of the request's candidates was measured: its relative improvement (0 when none)."""
        with self._lock:
            arm = self.arms[model]
            arm.gain += max(0.0, gain)
            arm.improved += gain > 0
            arm.correct += bool(correct)

    def stats(self) -> dict[str, dict]:
        with self._lock:
            return {
                m: {
                    "requests": a.pulls,
                    "prompt_tokens": a.prompt_tokens,
                    "completion_tokens": a.completion_tokens,
                    "cost_usd": round(a.cost_usd, 6),
                    "kernels": a.kernels,
                    "correct": a.correct,
                    "improved": a.improved,
                    "gain": round(a.gain, 4),
                    "gain_per_usd": round(a.yield_per_usd(self.free_cost), 4),
                }  # fmt: skip
                for m, a in self.arms.items()
            }
