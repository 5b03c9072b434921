"""Gymnasium envs and a recorded trajectory, to compare an env with itself through rlmesh and back.

``trajectory(env, ...)`` plays the same seeds and actions on any gymnasium vector env (under
DISABLED it resets finished lanes with ``reset_mask`` and the next seeds, as a gymnasium user
does) and records every result; ``assert_same`` compares two records value for value, dtype for
dtype. Shared by tests/envs (in-process) and tests/serve (served).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv


class InfoEnv(gym.Env):
    """Random-length episodes (2 to 6 steps, from the env's RNG) with every kind of info value.

    Observation: Box(3) float32 from the RNG. Reset info ``{"seed": seed or -1, "note": "reset"}``;
    step info ``{"t", "score", "ok", "label", "inner": {"x"}}`` plus ``"last": True`` on an
    episode's final step, which terminates on even lengths and truncates on odd ones.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(self, render_mode: str | None = None) -> None:
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
        self.action_space = gym.spaces.Discrete(3)
        self.render_mode = render_mode
        self._t = 0
        self._length = 2

    def _observation(self) -> np.ndarray:
        return self.np_random.uniform(-1, 1, 3).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        self._length = int(self.np_random.integers(2, 7))
        return self._observation(), {"seed": -1 if seed is None else seed, "note": "reset"}

    def step(self, action):
        self._t += 1
        done = self._t >= self._length
        info: dict[str, Any] = {
            "t": self._t,
            "score": self._t * 0.25 + int(action),
            "ok": bool(action == 1),
            "label": f"step-{self._t}",
            "inner": {"x": float(action) / 2},
        }
        if done:
            info["last"] = True
        terminated = done and self._length % 2 == 0
        truncated = done and not terminated
        return self._observation(), float(action) - 0.5 * self._t, terminated, truncated, info

    def render(self):
        frame = np.zeros((4, 6, 3), dtype=np.uint8)
        frame[:, : self._t % 6] = 200
        return frame


class DictEnv(gym.Env):
    """A Dict observation ``{"pos": Box(2) float32, "count": Discrete(8)}``; episodes of 5 steps."""

    metadata = {"render_modes": []}

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Dict(
            {"pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32), "count": gym.spaces.Discrete(8)}
        )
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self._t = 0
        self._pos = np.zeros(2, np.float32)

    def _observation(self):
        return {"pos": self._pos.copy(), "count": self._t}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        self._pos = self.np_random.uniform(-0.5, 0.5, 2).astype(np.float32)
        return self._observation(), {}

    def step(self, action):
        self._t += 1
        self._pos = np.clip(self._pos + 0.1 * np.asarray(action, np.float32), -1, 1).astype(np.float32)
        return self._observation(), float(-np.abs(self._pos).sum()), self._t >= 5, False, {"t": self._t}


def info_vector(mode: AutoresetMode, num_envs: int = 3) -> SyncVectorEnv:
    """``num_envs`` lanes of :class:`InfoEnv` under ``mode``."""
    return SyncVectorEnv([InfoEnv for _ in range(num_envs)], autoreset_mode=mode)


def trajectory(env: Any, mode: AutoresetMode, seed: int, steps: int, action_seed: int = 0) -> list[Any]:
    """Every result of ``steps`` steps of random actions on ``env`` (a gymnasium vector env).

    Under DISABLED, lanes that finished are reset with ``reset_mask`` and seeds that go on from
    ``seed``, before the next step.
    """
    rng = np.random.default_rng(action_seed)
    n = env.num_envs
    records: list[Any] = [("reset", *env.reset(seed=seed))]
    next_seed = seed + n
    for _ in range(steps):
        actions = rng.integers(0, 3, size=n)
        result = env.step(actions)
        records.append(("step", *result))
        done = np.logical_or(result[2], result[3])
        if mode is AutoresetMode.DISABLED and done.any():
            seeds = [next_seed + lane if done[lane] else None for lane in range(n)]
            next_seed += n
            records.append(("reset_mask", *env.reset(seed=seeds, options={"reset_mask": done})))
    return records


def single_trajectory(env: Any, steps: int = 40) -> list[Any]:
    """Every result of random actions on a single gymnasium env, reset with seeds 11, 0, 1, ... .

    Seeded resets: over a SAME_STEP vector env of one lane the env already began its next
    episode (and moved its RNG on), so an unseeded reset would start from elsewhere.
    """
    records = [env.reset(seed=11)]
    rng = np.random.default_rng(3)
    for seed in range(steps):
        result = env.step(int(rng.integers(0, 3)))
        records.append(result)
        if result[2] or result[3]:
            records.append(env.reset(seed=seed))
    return records


def assert_same(got: Any, expected: Any, path: str = "result") -> None:
    """``got`` equals ``expected``: same types, keys, dtypes, shapes and values, recursively."""
    if isinstance(expected, np.ndarray):
        assert isinstance(got, np.ndarray), f"{path}: {type(got).__name__}, expected an ndarray"
        assert got.dtype == expected.dtype, f"{path}: dtype {got.dtype}, expected {expected.dtype}"
        assert got.shape == expected.shape, f"{path}: shape {got.shape}, expected {expected.shape}"
        if expected.dtype == object:
            for index in range(expected.shape[0]):
                assert_same(got[index], expected[index], f"{path}[{index}]")
        else:
            np.testing.assert_array_equal(got, expected, err_msg=path)
    elif isinstance(expected, dict):
        assert isinstance(got, dict), f"{path}: {type(got).__name__}, expected a dict"
        assert sorted(got) == sorted(expected), f"{path}: keys {sorted(got)}, expected {sorted(expected)}"
        for key in expected:
            assert_same(got[key], expected[key], f"{path}[{key!r}]")
    elif isinstance(expected, (tuple, list)):
        kind = type(expected).__name__
        assert type(got) is type(expected), f"{path}: {type(got).__name__}, expected {kind}"
        assert len(got) == len(expected), f"{path}: {len(got)} items, expected {len(expected)}"
        for index, (left, right) in enumerate(zip(got, expected, strict=True)):
            assert_same(left, right, f"{path}[{index}]")
    else:
        assert got == expected, f"{path}: {got!r}, expected {expected!r}"
        assert type(got) is type(expected) or isinstance(expected, np.generic), (
            f"{path}: {type(got).__name__}, expected {type(expected).__name__}"
        )
