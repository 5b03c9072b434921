"""An env that raised for one client is reset for the next one: the server keeps serving."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from _serve_fakes import run

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.proto import env_pb2
from rlmesh_gym.runtime.errors import EnvRpcError
from rlmesh_gym.serve import EnvServer, RemoteEnv


class GlitchOnActionOne(gym.Env):
    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        if action == 1:
            raise RuntimeError("transient glitch")
        return np.full(2, 0.5, np.float32), 1.0, False, False, {}


def step_request(action: int) -> env_pb2.StepRequest:
    request = env_pb2.StepRequest()
    request.action.bytes.data = action.to_bytes(8, "little", signed=True)
    return request


def test_the_next_client_is_served_after_the_env_raised():
    async def body():
        env = GymVectorEnv(GlitchOnActionOne())
        async with EnvServer(env) as server:
            first = await RemoteEnv.connect(server.address, request_timeout=10)
            await first.reset(env_pb2.ResetRequest())
            with pytest.raises(EnvRpcError, match="transient glitch") as failed:
                await first.step(step_request(1))
            assert not failed.value.recoverable
            await first.close()

            second = await RemoteEnv.connect(server.address, request_timeout=10)
            reset = await second.reset(env_pb2.ResetRequest(seeds=[3]))
            stepped = await second.step(step_request(0))
            assert list(stepped.response.rewards) == [1.0]
            assert list(stepped.response.episode_ids) == list(reset.response.episode_ids)
            await second.close()
        await env.close(1.0)

    run(body())
