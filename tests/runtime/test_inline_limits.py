"""RuntimeLimits hold for inline calls too: a call that returns after its limit is that timeout."""

from __future__ import annotations

import asyncio
import time

import gymnasium as gym
import numpy as np
import pytest

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.policies import CallablePolicy, RandomPolicy
from rlmesh_gym.runtime import OperationTimeoutError, RuntimeDriver, RuntimeLimits, RuntimeSessionSpec


class SlowStepEnv(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, step_seconds: float = 0.0, length: int = 5) -> None:
        self.step_seconds, self.length, self.t = step_seconds, length, 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        time.sleep(self.step_seconds)
        self.t += 1
        return np.zeros(2, np.float32), 1.0, self.t >= self.length, False, {}


def spec_for(env: GymVectorEnv, limits: RuntimeLimits) -> RuntimeSessionSpec:
    return RuntimeSessionSpec(
        session_id="s",
        route_id="r",
        env_contract=env.contract,
        num_envs=1,
        base_seed=0,
        max_episodes=1,
        limits=limits,
    )


def run(env: GymVectorEnv, model, limits: RuntimeLimits) -> OperationTimeoutError:
    with pytest.raises(OperationTimeoutError) as caught:
        asyncio.run(RuntimeDriver(spec_for(env, limits), env, model).run())
    return caught.value


@pytest.mark.parametrize("offload", [False, True], ids=["inline", "offloaded"])
def test_a_slow_env_step_is_the_same_timeout_inline_and_offloaded(offload):
    env = GymVectorEnv(SlowStepEnv(step_seconds=0.4), offload=offload)
    limits = RuntimeLimits(env_step_timeout=0.1, service_close_timeout=2.0)
    error = run(env, RandomPolicy(0, env.contract), limits)
    assert str(error) == "env.step timed out on route r component env at runtime step 1 after 100ms"
    assert env.closed


def test_an_inline_predict_past_model_predict_timeout_is_refused_not_accepted():
    def slow_policy(observations):
        time.sleep(0.4)
        return np.zeros(len(observations), dtype=np.int64)

    env = GymVectorEnv(SlowStepEnv())
    error = run(env, CallablePolicy(slow_policy, env.contract), RuntimeLimits(model_predict_timeout=0.1))
    assert (error.operation, error.step) == ("model.predict", 0)
    assert str(error).endswith("after 100ms")


def test_inline_calls_within_their_limits_and_zero_limits_still_pass():
    env = GymVectorEnv(SlowStepEnv())
    spec = spec_for(env, RuntimeLimits(env_step_timeout=5.0, model_predict_timeout=0, env_reset_timeout=0))
    report = asyncio.run(RuntimeDriver(spec, env, RandomPolicy(0, env.contract)).run())
    assert report.total_steps == 5
