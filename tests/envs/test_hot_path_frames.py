"""The hot path is shallow: one frame of the adapters between the driver and the vector env's
``step``, and between the driver and the policy module's forward (docs/design/envs.md#the-hot-path)."""

from __future__ import annotations

import traceback

import gymnasium as gym
import pytest
import torch

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.evaluation import evaluate

pytestmark = pytest.mark.torch  # (tests/conftest.py)


def adapter_frames(package: str) -> list[str]:
    """The functions of ``rlmesh_gym/<package>/`` on the current stack, outermost first."""
    return [frame.name for frame in traceback.extract_stack() if f"rlmesh_gym/{package}/" in frame.filename]


class StackRecordingVector(gym.vector.SyncVectorEnv):
    def __init__(self) -> None:
        super().__init__([lambda: gym.make("CartPole-v1")] * 2)
        self.stacks: list[list[str]] = []

    def step(self, actions):
        self.stacks.append(adapter_frames("envs"))
        return super().step(actions)


class StackRecordingModule(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)
        self.stacks: list[list[str]] = []

    def forward(self, observations):
        self.stacks.append(adapter_frames("policies"))
        return self.linear(observations)


def test_the_vector_env_step_and_the_forward_are_called_from_the_array_methods_directly():
    vector, module = StackRecordingVector(), StackRecordingModule()
    with GymVectorEnv(vector) as env:
        evaluate(env, module, episodes=2, seed=0, progress=False)
    assert vector.stacks and all(stack == ["step_arrays"] for stack in vector.stacks)
    assert module.stacks and all(stack == ["predict_arrays"] for stack in module.stacks)
