"""A user's own unregistered env: its contract id, and the error for passing its class."""

from __future__ import annotations

import gymnasium
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.evaluation import evaluate


class Walk1D(gymnasium.Env):
    observation_space = gymnasium.spaces.Discrete(7)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = 3
        return self.position, {}

    def step(self, action):
        self.position += 1 if action == 1 else -1
        done = self.position in (0, 6)
        return self.position, float(done), done, False, {}


def test_a_hand_built_sync_vector_env_and_a_single_env_are_named_by_their_class() -> None:
    lanes = SyncVectorEnv([Walk1D, Walk1D, Walk1D], autoreset_mode=AutoresetMode.DISABLED)
    with GymVectorEnv(lanes) as env:
        assert env.contract.id == "Walk1D" and env.contract.num_envs == 3
    with GymVectorEnv(Walk1D()) as env:
        assert env.contract.id == "Walk1D"
    # A sub-env made from a registered id keeps that id.
    registered = SyncVectorEnv([lambda: gymnasium.make("CartPole-v1")] * 2)
    with GymVectorEnv(registered) as env:
        assert env.contract.id == "CartPole-v1"


def test_passing_the_env_class_says_to_call_it() -> None:
    with pytest.raises(TypeError, match=r"got the class Walk1D itself, not an env: call it: Walk1D\(\)$"):
        evaluate(Walk1D, "random", episodes=1, progress=False)
    with pytest.raises(TypeError, match=r"GymVectorEnv wraps .*; got the class Walk1D itself.*Walk1D\(\)"):
        GymVectorEnv(Walk1D)
    with pytest.raises(TypeError, match=r"; got builtins\.int$"):
        GymVectorEnv(3)
