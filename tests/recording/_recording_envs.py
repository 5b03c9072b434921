"""Scripted envs, a scripted model and a session runner for the recording tests.

``HistoryEnv`` is one lane with any observation/action space. Its episodes last a known
number of steps (``3 + seed % 3`` when seeded, else 4), its observations are samples of the
observation space drawn from a generator seeded by ``(seed, t)`` (``(lane, episode count, t)``
when unseeded), its reward at step ``t`` is ``t + 0.25 * lane``, and it logs every episode as
it happens (observations the model is shown, actions received, rewards, flags, frames
rendered), so a test can compare a recording with what really happened. ``render()`` returns
a 2x3 RGB frame filled with ``t``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import SyncVectorEnv
from gymnasium.vector.utils import concatenate, create_empty_array

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.proto import model_pb2
from rlmesh_gym.runtime import RuntimeDriver, RuntimeModelPrediction, RuntimeSessionSpec
from rlmesh_gym.spaces.codec import SpaceCodec

SPACES: dict[str, gym.Space] = {
    "box": gym.spaces.Box(-1.0, 1.0, (2, 3), np.float32),
    "box_uint8_image": gym.spaces.Box(0, 255, (4, 5, 3), np.uint8),
    "discrete": gym.spaces.Discrete(5, start=-2),
    "multi_binary": gym.spaces.MultiBinary(4),
    "multi_discrete": gym.spaces.MultiDiscrete([3, 4]),
    "text": gym.spaces.Text(max_length=6, min_length=1),
    "dict": gym.spaces.Dict(
        {
            "pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float64),
            "id": gym.spaces.Discrete(3),
            "tag": gym.spaces.Text(4),
        }
    ),
    "tuple": gym.spaces.Tuple(
        (gym.spaces.Discrete(2), gym.spaces.Box(0.0, 1.0, (1,), np.float32), gym.spaces.MultiBinary(2))
    ),
    "nested": gym.spaces.Dict(
        {
            "inner": gym.spaces.Tuple((gym.spaces.Text(3, min_length=1), gym.spaces.MultiDiscrete([2, 2]))),
            "x": gym.spaces.Box(-5, 5, (), np.float64),
        }
    ),
}


@dataclass
class Episode:
    """What one of a HistoryEnv's episodes really was."""

    seed: int | None
    observations: list[Any] = field(default_factory=list)  # shown to the model, one per step
    actions: list[Any] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    terminated: list[bool] = field(default_factory=list)
    frames: list[int] = field(default_factory=list)  # the t of each rendered frame


class HistoryEnv(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(
        self,
        obs_space: gym.Space,
        act_space: gym.Space,
        lane: int = 0,
        render_mode: str | None = None,
        fail_after_steps: int | None = None,
    ) -> None:
        self.observation_space = obs_space
        self.action_space = act_space
        self.render_mode = render_mode
        self.lane = lane
        self.fail_after_steps = fail_after_steps
        self.episodes: list[Episode] = []
        self.total_steps = 0
        self.render_calls = 0
        self._t = 0
        self._length = 4
        self._seed: int | None = None

    def _observe(self) -> Any:
        episode = len(self.episodes)
        space = self.observation_space
        # Seeded episodes depend on (seed, t) only, so a fresh env replays them.
        key = self._seed if self._seed is not None else 10**6 + self.lane * 1000 + episode
        space.seed(key * 100 + self._t)
        return space.sample()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._seed = seed
        self._t = 0
        self._length = 3 + seed % 3 if seed is not None else 4
        obs = self._observe()
        self.episodes.append(Episode(seed))
        self.episodes[-1].observations.append(obs)
        return obs, {}

    def step(self, action: Any):
        if self.fail_after_steps is not None and self.total_steps >= self.fail_after_steps:
            raise ValueError(f"lane {self.lane} failed on purpose after {self.total_steps} steps")
        self.total_steps += 1
        self._t += 1
        episode = self.episodes[-1]
        episode.actions.append(action)
        reward = self._t + 0.25 * self.lane
        terminated = self._t >= self._length
        episode.rewards.append(reward)
        episode.terminated.append(terminated)
        obs = self._observe()
        if not terminated:
            episode.observations.append(obs)
        return obs, reward, terminated, False, {}

    def render(self) -> np.ndarray:
        self.render_calls += 1
        self.episodes[-1].frames.append(self._t)
        return np.full((2, 3, 3), self._t, dtype=np.uint8)


class ScriptedModel:
    """A RuntimeModel answering every predict with seeded samples of the action space."""

    def __init__(self, action_space: gym.Space, contract: Any, seed: int = 0) -> None:
        self.space = action_space
        self.codec = SpaceCodec(contract.action_space)
        self.rng_seed = seed
        self.calls = 0

    async def predict(self, request: model_pb2.PredictRequest) -> RuntimeModelPrediction:
        n = len(request.context.slots)
        self.space.seed(self.rng_seed + self.calls)
        self.calls += 1
        items = [self.space.sample() for _ in range(n)]
        batch = concatenate(self.space, items, create_empty_array(self.space, n))
        response = model_pb2.PredictResponse(context=request.context)
        response.action.bytes.data = self.codec.encode_batch(batch, n)
        return RuntimeModelPrediction(response)

    async def close_route(self, request: model_pb2.CloseRouteRequest, timeout: float) -> None:
        return None


def make_env(
    obs_space: gym.Space,
    act_space: gym.Space | None = None,
    *,
    num_envs: int = 2,
    autoreset: str = "next_step",
    render_mode: str | None = None,
    fail_after_steps: int | None = None,
) -> tuple[GymVectorEnv, list[HistoryEnv]]:
    """A GymVectorEnv over ``num_envs`` HistoryEnvs, and the HistoryEnvs themselves."""
    act_space = obs_space if act_space is None else act_space
    lanes: list[HistoryEnv] = []

    def factory(lane: int):
        def build() -> HistoryEnv:
            env = HistoryEnv(obs_space, act_space, lane, render_mode, fail_after_steps if lane == 0 else None)
            lanes.append(env)
            return env

        return build

    modes = {"next_step": "NextStep", "same_step": "SameStep", "disabled": "Disabled"}
    vector = SyncVectorEnv(
        [factory(i) for i in range(num_envs)], autoreset_mode=gym.vector.AutoresetMode(modes[autoreset])
    )
    return GymVectorEnv(vector), sorted(lanes, key=lambda env: env.lane)


def run_session(
    env: GymVectorEnv,
    hooks: Sequence[Any],
    *,
    max_episodes: int,
    base_seed: int | None = 7,
    model: Any = None,
    action_space: gym.Space | None = None,
) -> Any:
    """Run one driver session to ``max_episodes``; return the report (or raise its error)."""
    contract = env.contract
    if model is None:
        model = ScriptedModel(action_space, contract)
    spec = RuntimeSessionSpec(
        session_id="rec-test",
        route_id="route-0",
        env_contract=contract,
        num_envs=contract.num_envs,
        env_id=contract.id,
        base_seed=base_seed,
        max_episodes=max_episodes,
    )
    return asyncio.run(RuntimeDriver(spec, env, model, hooks=list(hooks)).run())


def stack(values: list[Any]) -> Any:
    """Per-step values stacked the way a recording stores them (dicts/tuples per leaf)."""
    first = values[0]
    if isinstance(first, dict):
        return {key: stack([value[key] for value in values]) for key in first}
    if isinstance(first, tuple):
        return tuple(stack([value[i] for value in values]) for i in range(len(first)))
    if isinstance(first, str):
        return np.array(values, dtype=np.str_)
    return np.stack([np.asarray(value) for value in values])


def assert_tree_equal(recorded: Any, expected: Any, where: str = "value") -> None:
    """Equal structure and values; leaves are numpy arrays, never Python lists."""
    if isinstance(expected, dict):
        assert isinstance(recorded, dict), f"{where}: expected a dict, got {type(recorded).__name__}"
        assert sorted(recorded) == sorted(expected), where
        for key in expected:
            assert_tree_equal(recorded[key], expected[key], f"{where}[{key!r}]")
        return
    if isinstance(expected, tuple):
        assert isinstance(recorded, tuple), f"{where}: expected a tuple, got {type(recorded).__name__}"
        assert len(recorded) == len(expected), where
        for index, (left, right) in enumerate(zip(recorded, expected, strict=True)):
            assert_tree_equal(left, right, f"{where}[{index}]")
        return
    assert isinstance(recorded, np.ndarray), f"{where}: expected a numpy array, got {type(recorded).__name__}"
    assert recorded.shape == expected.shape, f"{where}: shape {recorded.shape} != {expected.shape}"
    np.testing.assert_array_equal(recorded, expected, err_msg=where)
