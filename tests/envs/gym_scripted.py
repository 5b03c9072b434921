"""Scripted gymnasium envs and helpers for the env adapter tests.

``CountingEnv`` is one lane whose episodes last a known number of steps and pay known rewards:

* episode length: ``length + seed % 3`` when reset with a seed, else ``length``;
* observation: ``[seed or -1, t]`` (float64), ``t`` = steps taken in the episode;
* reward of step ``t``: ``t + 0.5 * action``;
* info: ``{"lane", "t"}`` on every step plus ``"last": True`` on the episode's final step;
  ``{"lane", "seed"}`` (and ``"tag"`` when the reset options carry one) on reset.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

from rlmesh_gym.proto import env_pb2

LENGTHS = (2, 3, 4)
TRUNCATING_LANES = (1,)
# AsyncVectorEnv workers start from a forkserver: a pytest-xdist worker is multi-threaded (execnet's
# receiver, offload threads), and a plain fork from it can deadlock the child before it answers.
WORKER_START_METHOD = "forkserver"


def episode_length(length: int, seed: int | None) -> int:
    return length + (seed % 3 if seed is not None else 0)


def step_reward(t: int, action: int) -> float:
    return float(t) + 0.5 * int(action)


class CountingEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(
        self,
        lane: int = 0,
        length: int = 2,
        truncate: bool = False,
        render_mode: str | None = None,
        fail_on_step: int | None = None,
    ) -> None:
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)
        self.action_space = gym.spaces.Discrete(3)
        self.render_mode = render_mode
        self.lane = lane
        self.length = length
        self.truncate = truncate
        self.fail_on_step = fail_on_step
        self.seed_used = -1
        self.t = 0
        self.episode_length = length
        self.closed = False

    def _obs(self) -> np.ndarray:
        return np.array([self.seed_used, self.t], dtype=np.float64)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if options and options.get("explode"):
            raise RuntimeError("reset exploded on request")
        self.seed_used = -1 if seed is None else seed
        self.t = 0
        self.episode_length = episode_length(self.length, seed)
        info: dict[str, Any] = {"lane": self.lane, "seed": self.seed_used}
        if options and "tag" in options:
            info["tag"] = options["tag"]
        return self._obs(), info

    def step(self, action):
        if self.fail_on_step is not None and self.t + 1 == self.fail_on_step:
            raise ValueError(f"lane {self.lane} exploded on step {self.t + 1}")
        assert self.action_space.contains(action), action
        self.t += 1
        reward = step_reward(self.t, action)
        done = self.t >= self.episode_length
        info: dict[str, Any] = {"lane": self.lane, "t": self.t}
        if done:
            info["last"] = True
        return self._obs(), reward, done and not self.truncate, done and self.truncate, info

    def render(self):
        return np.full((4, 6, 3), self.t, dtype=np.uint8)

    def close(self) -> None:
        self.closed = True


def counting_fns(lengths: Sequence[int] = LENGTHS, truncating: Sequence[int] = TRUNCATING_LANES, **kwargs):
    return [
        functools.partial(CountingEnv, lane=i, length=length, truncate=i in truncating, **kwargs)
        for i, length in enumerate(lengths)
    ]


def counting_vector(kind: str, mode: str, lengths: Sequence[int] = LENGTHS, **kwargs) -> gym.vector.VectorEnv:
    fns = counting_fns(lengths, **kwargs)
    if kind == "sync":
        return SyncVectorEnv(fns, autoreset_mode=mode)
    return AsyncVectorEnv(fns, autoreset_mode=mode, context=WORKER_START_METHOD)


def action_request(actions: Sequence[int]) -> env_pb2.StepRequest:
    request = env_pb2.StepRequest()
    request.action.bytes.data = np.asarray(actions, dtype="<i8").tobytes()
    return request


def run(coroutine):
    return asyncio.run(coroutine)
