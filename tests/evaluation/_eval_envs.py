"""Small scripted gymnasium envs for the evaluation tests."""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces


class FixedLengthEnv(gymnasium.Env):
    """Every episode lasts ``length`` steps and pays 1 per step, so return == length.

    The observation is ``[step, length]``; the action is ignored.
    """

    metadata = {"render_modes": []}

    def __init__(self, length: int = 5) -> None:
        self.length = length
        self.observation_space = spaces.Box(0.0, 1000.0, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return np.array([0.0, self.length], dtype=np.float32), {}

    def step(self, action):
        self._t += 1
        done = self._t >= self.length
        return np.array([self._t, self.length], dtype=np.float32), 1.0, done, False, {}


class RandomLengthEnv(gymnasium.Env):
    """Each episode's length is drawn at reset from ``lengths`` with the env's seeded RNG.

    Return == length, and ``info["is_success"]`` is true for the short episodes.
    """

    def __init__(self, lengths: tuple[int, ...] = (2, 30)) -> None:
        self.lengths = lengths
        self.observation_space = spaces.Box(0.0, 1000.0, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self._t = 0
        self._length = lengths[0]

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        self._length = int(self.np_random.choice(self.lengths))
        return np.array([0.0, self._length], dtype=np.float32), {}

    def step(self, action):
        self._t += 1
        done = self._t >= self._length
        info = {"is_success": self._length == min(self.lengths)} if done else {}
        return np.array([self._t, self._length], dtype=np.float32), 1.0, done, False, info


class ExplodingEnv(FixedLengthEnv):
    """A FixedLengthEnv (length 3) whose ``explode_at``-th step call raises; counts closes."""

    closes = 0

    def __init__(self, explode_at: int = 8) -> None:
        super().__init__(length=3)
        self.explode_at = explode_at
        self._calls = 0

    def step(self, action):
        self._calls += 1
        if self._calls >= self.explode_at:
            raise OSError(f"simulated env failure on step call {self._calls}")
        return super().step(action)

    def close(self):
        type(self).closes += 1
        super().close()


def register_test_envs() -> None:
    """Register the envs under ``rlmesh_eval_test/`` ids (idempotent)."""
    for name, entry_point in (
        ("rlmesh_eval_test/FixedLength-v0", FixedLengthEnv),
        ("rlmesh_eval_test/RandomLength-v0", RandomLengthEnv),
        ("rlmesh_eval_test/Exploding-v0", ExplodingEnv),
    ):
        if name not in gymnasium.registry:
            gymnasium.register(name, entry_point=entry_point, disable_env_checker=True)


def mixed_length_vector_env(
    lengths: list[int], autoreset: str = "NextStep"
) -> gymnasium.vector.SyncVectorEnv:
    """A SyncVectorEnv whose lane ``i`` runs episodes of ``lengths[i]`` steps."""
    return gymnasium.vector.SyncVectorEnv(
        [lambda n=n: FixedLengthEnv(n) for n in lengths], autoreset_mode=autoreset
    )


def balance_pole(observation: np.ndarray) -> np.ndarray:
    """A deterministic numpy CartPole controller: push towards the side the pole leans to."""
    obs = np.asarray(observation)
    return ((obs[..., 2] + 0.5 * obs[..., 3]) > 0).astype(np.int64)


def episode_key(record) -> tuple:
    """What must be identical between two runs (ids, timestamps and durations are not)."""
    return (
        record.lane,
        record.seed,
        record.episode_return,
        record.length,
        record.terminated,
        record.truncated,
        record.success,
    )
