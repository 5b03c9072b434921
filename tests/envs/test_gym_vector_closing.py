"""GymVectorEnv as a context manager (with / async with) and its synchronous close."""

from __future__ import annotations

import asyncio

import gymnasium as gym
import pytest
from _message_form import messages

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.proto import env_pb2
from rlmesh_gym.runtime.errors import EnvRpcError


@pytest.mark.parametrize("offload", [False, True])
def test_with_closes_an_env_made_only_to_read_its_contract(offload: bool) -> None:
    with GymVectorEnv.make("CartPole-v1", num_envs=2, offload=offload) as env:
        assert env.contract.num_envs == 2
        vector = env.env
    assert env.closed and vector.closed


def test_with_closes_the_env_when_the_block_raises() -> None:
    with pytest.raises(RuntimeError, match="boom"), GymVectorEnv.make("CartPole-v1") as env:
        raise RuntimeError("boom")
    assert env.closed and env.env.closed


def test_async_with_closes_after_the_block_and_later_calls_are_refused() -> None:
    async def scenario() -> GymVectorEnv:
        async with GymVectorEnv.make("CartPole-v1", num_envs=2, autoreset="disabled", offload=True) as env:
            reset = await messages(env).reset(env_pb2.ResetRequest(seeds=[1, 2]))
            assert len(reset.response.episode_ids) == 2
        with pytest.raises(EnvRpcError, match="the env is closed"):
            await messages(env).reset(env_pb2.ResetRequest(seeds=[1, 2]))
        return env

    env = asyncio.run(scenario())
    assert env.closed and env.env.closed


def test_close_sync_is_one_idempotent_call_and_agrees_with_the_async_close() -> None:
    env = GymVectorEnv(gym.make("CartPole-v1"))
    env.close_sync()
    env.close_sync()
    asyncio.run(env.close(1.0))  # already closed: a no-op
    assert env.closed
