"""An env and a policy that hang, for serving them from a real ``rlmesh-gym`` process.

``rlmesh-gym serve-env _hanging:HangingStep-v0`` (with this directory on ``PYTHONPATH``) serves an
env whose ``step`` never returns once it is given action 1; ``rlmesh-gym serve-policy
_hanging:hanging_policy`` serves a policy whose predict never returns once an observation's
first element is positive.
"""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
from _serve_fakes import PlainGymEnv

HANG_SECONDS = 3600.0


class HangingStep(PlainGymEnv):
    """CartPole's spaces; action 1 makes ``step`` sleep for an hour (in plain blocking code)."""

    def step(self, action):
        if int(action) == 1:
            time.sleep(HANG_SECONDS)
        return super().step(action)


def hanging_policy(observations: np.ndarray) -> np.ndarray:
    """Action 0 per row; a row whose first element is positive blocks for an hour."""
    if (np.asarray(observations)[:, 0] > 0).any():
        time.sleep(HANG_SECONDS)
    return np.zeros(len(observations), np.int64)


gym.register("HangingStep-v0", entry_point=HangingStep)
