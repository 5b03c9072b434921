"""Whole RuntimeDriver sessions over the gymnasium adapter, one per autoreset mode, Sync and Async.

The model plays action ``(slot.step + slot.env_index) % 3``, so the t-th step of an episode on
lane i pays ``t + 0.5 * ((t - 1 + i) % 3)`` only if the adapter rolls episode ids exactly when
gymnasium starts a new episode (the driver resets a lane's slot step on a roll).
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from _message_form import messages
from gym_scripted import LENGTHS, CountingEnv, counting_vector, episode_length, run, step_reward

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.proto import env_pb2, model_pb2
from rlmesh_gym.runtime import (
    EnvRpcError,
    OperationTimeoutError,
    RuntimeDriver,
    RuntimeHooks,
    RuntimeLimits,
    RuntimeModel,
    RuntimeModelPrediction,
    RuntimeSessionSpec,
)


def lane_action(step: int, lane: int) -> int:
    return (step + lane) % 3


class MirrorModel(RuntimeModel):
    """Answers each slot with ``lane_action(slot.step, slot.env_index)`` and echoes the context."""

    def __init__(self) -> None:
        self.route_closed = False

    async def predict(self, request: model_pb2.PredictRequest) -> RuntimeModelPrediction:
        actions = [lane_action(slot.step, slot.env_index) for slot in request.context.slots]
        response = model_pb2.PredictResponse()
        response.context.CopyFrom(request.context)
        response.action.bytes.data = np.asarray(actions, dtype="<i8").tobytes()
        return RuntimeModelPrediction(response)

    async def close_route(self, request: model_pb2.CloseRouteRequest, timeout: float) -> None:
        self.route_closed = True


class Episodes(RuntimeHooks):
    def __init__(self) -> None:
        self.completed: list[env_pb2.EpisodeMetadata] = []
        self.failures: list[str] = []

    async def episode_completed(self, event) -> None:
        self.completed.append(event.metadata)

    async def session_failed(self, event) -> None:
        self.failures.append(event.reason)


def expected_return(length: int, lane: int) -> float:
    return sum(step_reward(t, lane_action(t - 1, lane)) for t in range(1, length + 1))


def spec_for(env: GymVectorEnv, **overrides) -> RuntimeSessionSpec:
    return RuntimeSessionSpec(
        session_id="s", route_id="r", env_contract=env.contract, num_envs=env.num_envs, **overrides
    )


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_autoresetting_sessions(kind, mode):
    async def body():
        env = GymVectorEnv(counting_vector(kind, mode))
        hooks, model = Episodes(), MirrorModel()
        report = await RuntimeDriver(spec_for(env, max_episodes=8), env, model, hooks).run()
        assert report.total_episodes == len(hooks.completed) >= 8
        for metadata in hooks.completed:
            lane = metadata.env_index
            assert not metadata.HasField("seed")  # unseeded reset, then gymnasium autoresets
            assert metadata.step_count == LENGTHS[lane]
            assert metadata.cumulative_reward == expected_return(LENGTHS[lane], lane)
            assert (metadata.terminated, metadata.truncated) == (
                (False, True) if lane == 1 else (True, False)
            )
        assert len({m.episode_id for m in hooks.completed}) == len(hooks.completed)
        assert env.closed and model.route_closed

    run(body())


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_disabled_session_seeds_every_episode_and_replays(kind):
    async def body():
        env = GymVectorEnv(counting_vector(kind, "Disabled"))
        hooks = Episodes()
        spec = spec_for(env, base_seed=2024, max_episodes=12)
        report = await RuntimeDriver(spec, env, MirrorModel(), hooks).run()
        assert report.total_episodes == len(hooks.completed) >= 12
        lanes_seen = set()
        for metadata in hooks.completed:
            lane = metadata.env_index
            lanes_seen.add(lane)
            assert metadata.HasField("seed")
            length = episode_length(LENGTHS[lane], metadata.seed)
            assert metadata.step_count == length
            assert metadata.cumulative_reward == expected_return(length, lane)
            # Replay: a plain single env reset with the recorded seed and fed the same actions.
            replay = CountingEnv(lane=lane, length=LENGTHS[lane], truncate=lane == 1)
            replay.reset(seed=metadata.seed)
            total, steps, done = 0.0, 0, False
            while not done:
                _, reward, terminated, truncated, _ = replay.step(lane_action(steps, lane))
                total, steps, done = total + reward, steps + 1, terminated or truncated
            assert (steps, total) == (metadata.step_count, metadata.cumulative_reward)
        assert lanes_seen == {0, 1, 2}
        assert len({m.seed for m in hooks.completed}) == len(hooks.completed)  # fresh seed per episode
        assert env.closed

    run(body())


def test_single_env_session():
    async def body():
        env = GymVectorEnv(CountingEnv(lane=0, length=2))
        hooks = Episodes()
        report = await RuntimeDriver(
            spec_for(env, base_seed=7, max_episodes=4), env, MirrorModel(), hooks
        ).run()
        assert report.total_episodes == 4
        for metadata in hooks.completed:
            length = episode_length(2, metadata.seed)
            assert (metadata.step_count, metadata.cumulative_reward) == (length, expected_return(length, 0))

    run(body())


@pytest.mark.filterwarnings("ignore:.*ERROR.*:UserWarning")  # AsyncVectorEnv logs the worker's traceback
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_env_failure_fails_the_session_and_closes_the_env(kind):
    async def body():
        lanes = counting_vector(kind, "NextStep", fail_on_step=3)
        env = GymVectorEnv(lanes)
        hooks = Episodes()
        with pytest.raises(
            EnvRpcError, match=r"env.step raised ValueError: lane \d exploded on step 3"
        ) as failed:
            await RuntimeDriver(spec_for(env, max_episodes=50), env, MirrorModel(), hooks).run()
        assert failed.value.operation == "env.step"
        assert env.closed and lanes.closed
        assert len(hooks.failures) == 1 and "exploded on step 3" in hooks.failures[0]

    run(body())


def test_offloaded_slow_env_lets_the_driver_time_out():
    class SlowEnv(CountingEnv):
        def step(self, action):
            if self.t == 1:
                time.sleep(0.3)
            return super().step(action)

    async def body():
        env = GymVectorEnv(SlowEnv(length=5), offload=True)
        limits = RuntimeLimits(env_step_timeout=0.05, service_close_timeout=2.0)
        with pytest.raises(OperationTimeoutError, match="env.step timed out"):
            await RuntimeDriver(spec_for(env, max_episodes=3, limits=limits), env, MirrorModel()).run()
        assert env.closed  # the close waited for the abandoned step in the worker thread
        with pytest.raises(EnvRpcError, match="closed"):
            await messages(env).step(env_pb2.StepRequest())

    run(body())
