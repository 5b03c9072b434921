"""CartPole-v1 whose every step also costs time: the step-costly env of the scaling benchmarks."""

from __future__ import annotations

import time

import gymnasium

__all__ = ["CostlyCartPole"]


class CostlyCartPole(gymnasium.Wrapper):
    """CartPole-v1 whose step also spins the CPU (``cost="cpu"``: like a physics step) or sleeps
    (``cost="sleep"``: like waiting on a simulator process or I/O) for ``step_ms`` milliseconds."""

    def __init__(self, step_ms: float, cost: str) -> None:
        super().__init__(gymnasium.make("CartPole-v1"))
        if cost not in ("cpu", "sleep"):
            raise ValueError(f"cost must be 'cpu' or 'sleep', got {cost!r}")
        self.cost, self.step_seconds = cost, step_ms / 1000

    def step(self, action):
        if self.cost == "sleep":
            time.sleep(self.step_seconds)
        else:
            deadline = time.perf_counter() + self.step_seconds
            while time.perf_counter() < deadline:
                pass
        return self.env.step(action)
