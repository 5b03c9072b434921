"""An in-process env's failure says what happened and where, not a remote server's story."""

from __future__ import annotations

import gymnasium
import pytest

from rlmesh_gym.evaluation import EvaluationError, evaluate


class BreaksOnStep(gymnasium.Env):
    observation_space = gymnasium.spaces.Discrete(3)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return 0, {}

    def step(self, action):
        raise ValueError("the wheel came off")


def test_an_in_process_env_failure_names_the_exception_and_where_it_was_raised() -> None:
    with pytest.raises(EvaluationError) as caught:
        evaluate(BreaksOnStep(), "random", episodes=1, seed=0, progress=False)
    message = str(caught.value)
    assert "env.step (lane 0) raised ValueError: the wheel came off" in message
    assert "(raised in test_in_process_failure_message.py line 20, in step)" in message
    assert "transport error" not in message and "container" not in message
