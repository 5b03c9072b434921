"""The hot path is shallow: at most two frames of our own code between the driver's loop and the
vector env's ``step``, and between the loop and the policy module's ``forward``
(docs/design/overview.md).

Counted on the path ``evaluate()`` takes with an in-process gymnasium vector env and a torch
policy: the probes below walk the Python frames from the call up to ``_Run.loop``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType

import gymnasium as gym
import pytest

import rlmesh_gym
from rlmesh_gym import evaluate

pytestmark = pytest.mark.torch

PACKAGE = Path(rlmesh_gym.__file__).resolve().parent
DRIVER = PACKAGE / "runtime" / "driver.py"
MAX_FRAMES = 2


def our_frames_below_the_loop(frame: FrameType | None) -> list[str]:
    """The frames of rlmesh_gym code between ``frame`` (included) and the driver loop (excluded)."""
    ours = []
    while frame is not None:
        path = Path(frame.f_code.co_filename).resolve()
        if path == DRIVER and frame.f_code.co_name == "loop":
            return ours
        if PACKAGE in path.parents:
            ours.append(f"{path.relative_to(PACKAGE)}:{frame.f_code.co_qualname}")
        frame = frame.f_back
    raise AssertionError("the call was not made from the driver loop")


class ProbedVectorEnv(gym.vector.SyncVectorEnv):
    def __init__(self, num_envs: int) -> None:
        super().__init__([lambda: gym.make("CartPole-v1") for _ in range(num_envs)])
        self.depths: list[list[str]] = []

    def step(self, actions):
        self.depths.append(our_frames_below_the_loop(sys._getframe(1)))
        return super().step(actions)


def test_at_most_two_of_our_frames_between_the_loop_and_env_step_and_model_forward() -> None:
    import torch

    class ProbedModule(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 2)
            self.depths: list[list[str]] = []

        def forward(self, observations):
            self.depths.append(our_frames_below_the_loop(sys._getframe(1)))
            return self.linear(observations)

    env, module = ProbedVectorEnv(4), ProbedModule()
    result = evaluate(env, module, episodes=4, seed=0, progress=False)
    assert len(result.episodes) == 4
    assert env.depths and module.depths
    for depths in (env.depths, module.depths):
        deepest = max(depths, key=len)
        assert len(deepest) <= MAX_FRAMES, deepest


class ProbedLane(gym.Wrapper):
    """A sub-env that records the frames of our code above each of its steps."""

    depths: list[list[str]] = []

    def step(self, action):
        ProbedLane.depths.append(our_frames_below_the_loop(sys._getframe(1)))
        return super().step(action)


def test_a_made_same_step_env_s_lane_loop_stands_where_the_vector_step_stood() -> None:
    """An env ``GymVectorEnv.make`` builds under SAME_STEP (what ``evaluate()`` builds from an id)
    is stepped by the adapter's own lane loop (envs/same_step_lanes.py) instead of
    ``SyncVectorEnv.step``: the two frames above it are the same, and it calls the sub-envs."""
    from rlmesh_gym.envs import GymVectorEnv

    ProbedLane.depths = []
    env = GymVectorEnv.make("CartPole-v1", num_envs=2, autoreset="same_step", wrappers=[ProbedLane])
    with env:
        evaluate(env, "random", episodes=2, seed=0, progress=False)
    assert ProbedLane.depths
    deepest = max(ProbedLane.depths, key=len)
    assert deepest[0] == "envs/same_step_lanes.py:SameStepLanes.step", deepest
    assert len(deepest) <= MAX_FRAMES + 1, deepest
