"""Scripted envs, models and hooks for the runtime tests (the fixtures of upstream's driver tests).

Every fake appends what happens to it to a shared ``log`` list, so a test can assert the
exact interleaving of hook events, env/model calls and closes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from rlmesh_gym.proto import common_pb2, env_pb2, model_pb2, spaces_pb2
from rlmesh_gym.runtime import (
    RuntimeEnv,
    RuntimeEnvReset,
    RuntimeEnvStep,
    RuntimeHooks,
    RuntimeLimits,
    RuntimeModel,
    RuntimeModelPrediction,
    RuntimeSessionSpec,
)
from rlmesh_gym.runtime.hooks import HOOK_METHODS

NEXT_STEP = env_pb2.AUTORESET_MODE_NEXT_STEP
SAME_STEP = env_pb2.AUTORESET_MODE_SAME_STEP
DISABLED = env_pb2.AUTORESET_MODE_DISABLED
UNSPECIFIED = env_pb2.AUTORESET_MODE_UNSPECIFIED


def value(data: bytes) -> spaces_pb2.SpaceValue:
    return spaces_pb2.SpaceValue(bytes=common_pb2.MessageBytes(data=data))


def contract(num_envs: int = 0, mode: int = UNSPECIFIED) -> env_pb2.EnvContract:
    return env_pb2.EnvContract(
        action_space=spaces_pb2.SpaceSpec(),
        observation_space=spaces_pb2.SpaceSpec(),
        num_envs=num_envs,
        autoreset_mode=mode,
    )


def single_env_spec(**overrides: object) -> RuntimeSessionSpec:
    """Upstream rlmesh-runtime 0.1.0-rc.1's single-env fixture: session-1/route-1/env-1/model-1,
    UNSPECIFIED, 1 episode."""
    fields: dict[str, object] = dict(
        session_id="session-1",
        route_id="route-1",
        env_contract=contract(),
        num_envs=1,
        env_component_id="env-1",
        model_component_id="model-1",
        max_episodes=1,
        close_env_on_end=True,
        limits=RuntimeLimits(),
    )
    fields.update(overrides)
    return RuntimeSessionSpec(**fields)  # type: ignore[arg-type]


def vector_spec(num_envs: int, mode: int, **overrides: object) -> RuntimeSessionSpec:
    fields: dict[str, object] = dict(
        session_id="session-vec",
        route_id="route-vec",
        env_contract=contract(num_envs, mode),
        num_envs=num_envs,
    )
    fields.update(overrides)
    return RuntimeSessionSpec(**fields)  # type: ignore[arg-type]


class CountingEnv(RuntimeEnv):
    """Upstream rlmesh-runtime 0.1.0-rc.1's test env: reset obs [1] and id "episode-1"; step k gives
    obs [k], reward 1.0, and completes "episode-1" at k == terminal_after (step_count=k,
    cumulative_reward=k)."""

    def __init__(self, log: list | None = None, terminal_after: int = 1) -> None:
        self.log = log if log is not None else []
        self.terminal_after = terminal_after
        self.count = 0
        self.reset_requests: list[env_pb2.ResetRequest] = []
        self.step_requests: list[env_pb2.StepRequest] = []
        self.closed = False
        self.close_timeout: float | None = None

    async def reset(self, request: env_pb2.ResetRequest) -> RuntimeEnvReset:
        self.log.append(("env.reset", list(request.seeds), list(request.env_indices)))
        self.reset_requests.append(request)
        self.count = 0
        return RuntimeEnvReset(
            env_pb2.ResetResponse(observation=value(bytes([1])), episode_ids=["episode-1"])
        )

    async def step(self, request: env_pb2.StepRequest) -> RuntimeEnvStep:
        self.count += 1
        self.log.append(("env.step", self.count))
        self.step_requests.append(request)
        response = env_pb2.StepResponse(
            observation=value(bytes([self.count])), rewards=[1.0], episode_ids=["episode-1"]
        )
        if self.count == self.terminal_after:
            response.completed_episodes.add(
                episode_id="episode-1", step_count=self.count, cumulative_reward=self.count, terminated=True
            )
        return RuntimeEnvStep(response)

    async def close(self, timeout: float) -> None:
        self.log.append(("env.close",))
        self.close_timeout = timeout
        self.closed = True


class EchoModel(RuntimeModel):
    """Upstream rlmesh-runtime 0.1.0-rc.1's test model: echoes the request context, returns action [0]."""

    def __init__(self, log: list | None = None) -> None:
        self.log = log if log is not None else []
        self.requests: list[model_pb2.PredictRequest] = []
        self.close_requests: list[model_pb2.CloseRouteRequest] = []
        self.closed = False

    async def predict(self, request: model_pb2.PredictRequest) -> RuntimeModelPrediction:
        self.log.append(("model.predict", request.context.request_id))
        self.requests.append(request)
        return RuntimeModelPrediction(
            model_pb2.PredictResponse(context=request.context, action=value(b"\x00"))
        )

    async def close_route(self, request: model_pb2.CloseRouteRequest, timeout: float) -> None:
        self.log.append(("model.close_route", request.context.request_id, request.reason))
        self.close_requests.append(request)
        self.closed = True

    def observations(self) -> list[bytes | None]:
        return [r.observation.bytes.data if r.HasField("observation") else None for r in self.requests]


@dataclass
class Lane:
    """A scripted lane: episodes of `length` steps, ids ep-<lane>-<n>."""

    length: int
    left: int = 0
    generation: int = 0
    pending: bool = False  # NEXT_STEP: done last step, autoreset on this one
    cumulative: float = 0.0
    steps: int = 0


class ScriptedVectorEnv(RuntimeEnv):
    """A vector env whose lane i runs episodes of `lengths[i]` steps under `mode`.

    NEXT_STEP: a done lane autoresets on the following step (reward 0, not terminal) and its
    id rolls there. SAME_STEP: the id rolls in the completing step. DISABLED: the lane keeps
    its id until the driver resets it (whole vector or `env_indices`).
    Observation: one byte per lane, the lane's step within its episode.
    """

    def __init__(self, lengths: list[int], mode: int, log: list | None = None) -> None:
        self.lanes = [Lane(length) for length in lengths]
        self.mode = mode
        self.log = log if log is not None else []
        self.reset_requests: list[tuple[list[int], list[int]]] = []
        self.steps = 0
        self.closed = False

    def _id(self, lane: int) -> str:
        return f"ep-{lane}-{self.lanes[lane].generation}"

    def _ids(self) -> list[str]:
        return [self._id(lane) for lane in range(len(self.lanes))]

    def _observation(self) -> spaces_pb2.SpaceValue:
        return value(bytes(min(lane.steps, 255) for lane in self.lanes))

    def _restart(self, lane: int, roll: bool) -> None:
        state = self.lanes[lane]
        if roll:
            state.generation += 1
        state.left, state.pending, state.cumulative, state.steps = state.length, False, 0.0, 0

    async def reset(self, request: env_pb2.ResetRequest) -> RuntimeEnvReset:
        seeds, indices = list(request.seeds), list(request.env_indices)
        self.log.append(("env.reset", seeds, indices))
        self.reset_requests.append((seeds, indices))
        first = not self.steps and len(self.reset_requests) == 1
        for lane in indices or range(len(self.lanes)):
            self._restart(lane, roll=not first)
        return RuntimeEnvReset(
            env_pb2.ResetResponse(observation=self._observation(), episode_ids=self._ids())
        )

    async def step(self, request: env_pb2.StepRequest) -> RuntimeEnvStep:
        self.steps += 1
        self.log.append(("env.step", self.steps))
        response = env_pb2.StepResponse()
        for index, lane in enumerate(self.lanes):
            if lane.pending:  # NEXT_STEP autoreset step
                self._restart(index, roll=True)
                response.rewards.append(0.0)
                continue
            lane.left -= 1
            lane.steps += 1
            lane.cumulative += 1.0
            response.rewards.append(1.0)
            if lane.left == 0:
                response.completed_episodes.add(
                    episode_id=self._id(index),
                    env_index=index,
                    step_count=lane.steps,
                    cumulative_reward=lane.cumulative,
                    terminated=True,
                )
                if self.mode == SAME_STEP:
                    self._restart(index, roll=True)
                elif self.mode == NEXT_STEP:
                    lane.pending = True
        response.episode_ids.extend(self._ids())
        response.observation.CopyFrom(self._observation())
        return RuntimeEnvStep(response)

    async def close(self, timeout: float) -> None:
        self.log.append(("env.close",))
        self.closed = True


class RecordingHooks(RuntimeHooks):
    """Records every hook call as (method, event) in `entries`; transforms return the payload.

    (Not `self.log`: that would hide the `log` hook method.)
    """

    def __init__(self, entries: list | None = None) -> None:
        self.entries = entries if entries is not None else []

    def named(self, name: str) -> list:
        return [entry[1] for entry in self.entries if entry[0] == name]


def _recorder(name: str):
    if name == "transform_action":

        async def transform_action(self, event):
            self.entries.append((name, event))
            return event.action

        return transform_action
    if name == "transform_observation":

        async def transform_observation(self, event):
            self.entries.append((name, event))
            return event.observation

        return transform_observation

    async def record(self, event):
        self.entries.append((name, event))

    record.__name__ = name
    return record


for _name in HOOK_METHODS:
    if _name != "episodes_completed":  # upstream's hooks only: the logs compare with its order
        setattr(RecordingHooks, _name, _recorder(_name))


def names(log: list) -> list[str]:
    """The first element of every log entry."""
    return [entry[0] for entry in log]


@dataclass
class Blocker:
    """An awaitable that never finishes unless released; counts cancellations it saw."""

    event: asyncio.Event = field(default_factory=asyncio.Event)
    cancellations: int = 0

    async def wait(self) -> None:
        try:
            await self.event.wait()
        except asyncio.CancelledError:
            self.cancellations += 1
            raise
