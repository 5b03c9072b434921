"""Where an evaluation's time goes: thin timing wrappers around the env and the model.

The driver's own telemetry (``telemetry_window`` / ``telemetry_summary`` hooks) costs several
microseconds per step once anything listens to it, a large share of a CartPole step. These
wrappers cost two clock reads per call and give exact totals (not reservoir samples); users who
want percentiles can still pass a hook for the driver's telemetry summary.
"""

from __future__ import annotations

from time import perf_counter_ns
from typing import Any

from rlmesh_gym.proto import env_pb2, model_pb2
from rlmesh_gym.runtime import (
    RuntimeEnv,
    RuntimeEnvReset,
    RuntimeEnvStep,
    RuntimeModel,
    RuntimeModelPrediction,
)

__all__ = ["TimedEnv", "TimedModel"]


class TimedEnv(RuntimeEnv):
    """Delegates to ``env`` and adds up the time spent in its successful ``reset`` and ``step`` calls."""

    __slots__ = ("env", "contract", "resets", "reset_ns", "steps", "step_ns")

    def __init__(self, env: Any) -> None:
        self.env = env
        self.contract = env.contract
        self.resets = 0
        self.reset_ns = 0
        self.steps = 0
        self.step_ns = 0

    async def reset(self, request: env_pb2.ResetRequest) -> RuntimeEnvReset:
        started = perf_counter_ns()
        reset = await self.env.reset(request)
        self.reset_ns += perf_counter_ns() - started
        self.resets += 1
        return reset

    async def step(self, request: env_pb2.StepRequest) -> RuntimeEnvStep:
        started = perf_counter_ns()
        stepped = await self.env.step(request)
        self.step_ns += perf_counter_ns() - started
        self.steps += 1
        return stepped

    async def close(self, timeout: float) -> None:
        await self.env.close(timeout)


class TimedModel(RuntimeModel):
    """Delegates to ``model`` and adds up the time spent in its successful ``predict`` calls."""

    __slots__ = ("model", "predicts", "predict_ns")

    def __init__(self, model: Any) -> None:
        self.model = model
        self.predicts = 0
        self.predict_ns = 0

    async def predict(self, request: model_pb2.PredictRequest) -> RuntimeModelPrediction:
        started = perf_counter_ns()
        prediction = await self.model.predict(request)
        self.predict_ns += perf_counter_ns() - started
        self.predicts += 1
        return prediction

    async def close_route(self, request: model_pb2.CloseRouteRequest, timeout: float) -> None:
        close_route = getattr(self.model, "close_route", None)
        if close_route is not None:
            await close_route(request, timeout)
