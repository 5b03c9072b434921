"""``InfoEcho-v0``: an env whose reset info echoes its seed and whose step info has env keys.

Registered on import, so a ``serve-env`` process can build it as ``_info_env:InfoEcho-v0``
(gymnasium imports the module before the id) with this directory on ``PYTHONPATH``.
"""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces


class InfoEchoEnv(gymnasium.Env):
    """Episodes of 3 steps; ``reset`` info is ``{"seed": seed, "note": "reset"}`` and each
    step's info ``{"t": step, "label": "step-<t>"}``."""

    metadata = {"render_modes": []}

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self._t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return np.zeros(2, dtype=np.float32), {"seed": seed, "note": "reset"}

    def step(self, action):
        self._t += 1
        observation = np.full(2, self._t / 10, dtype=np.float32)
        return observation, 1.0, self._t >= 3, False, {"t": self._t, "label": f"step-{self._t}"}


if "InfoEcho-v0" not in gymnasium.registry:
    gymnasium.register("InfoEcho-v0", entry_point=InfoEchoEnv)
