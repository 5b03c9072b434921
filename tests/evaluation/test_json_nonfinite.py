"""Results with infinite or NaN returns still export valid JSON (``--json`` included): NaN is
``null``, an infinity the string ``"inf"`` / ``"-inf"``."""

from __future__ import annotations

import json
import math

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from rlmesh_gym.cli import main
from rlmesh_gym.evaluation import evaluate

ENV_ID = "RlmeshGymTestInfiniteReturn-v0"

# gymnasium's env checker warns about the very rewards these tests are about.
pytestmark = pytest.mark.filterwarnings("ignore:.*(inf|NaN) value:UserWarning")


class InfiniteReturnEnv(gymnasium.Env):
    """One-step episodes: the reward is +inf when the action is 1, NaN for action 2, else 1."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action):
        reward = {0: 1.0, 1: math.inf, 2: math.nan}[int(action)]
        return np.zeros(1, dtype=np.float32), reward, True, False, {}


@pytest.fixture
def env_id():
    gymnasium.register(ENV_ID, entry_point=InfiniteReturnEnv)
    yield ENV_ID
    gymnasium.registry.pop(ENV_ID)


def _always(action: int):
    return lambda observations: np.full(len(observations), action, dtype=np.int64)


def _strict_loads(text: str):
    def refuse(constant: str):
        raise AssertionError(f"not valid JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_to_json_writes_infinite_returns_as_strings(env_id):
    result = evaluate(env_id, _always(1), episodes=2, num_envs=2, seed=0, progress=False)
    assert result.mean_return == math.inf
    data = _strict_loads(result.to_json())
    assert [episode["episode_return"] for episode in data["episodes"]] == ["inf", "inf"]
    assert data["summary"]["mean_return"] == "inf" and data["summary"]["max_return"] == "inf"
    # No interval for infinite returns: null bounds and the reason.
    assert data["summary"]["mean_return_ci_low"] is None and data["summary"]["iqm_return"] is None
    assert "finite returns" in data["bootstrap"]["note"]
    assert float(data["summary"]["mean_return"]) == math.inf  # reads back


def test_to_json_writes_nan_returns_as_null(env_id):
    result = evaluate(env_id, _always(2), episodes=2, num_envs=2, seed=0, progress=False)
    data = _strict_loads(result.to_json())
    assert [episode["episode_return"] for episode in data["episodes"]] == [None, None]
    assert data["summary"]["mean_return"] is None


def test_cli_json_with_infinite_returns(env_id, capsys, monkeypatch):
    monkeypatch.setattr(
        InfiniteReturnEnv, "step", lambda self, action: (np.zeros(1, np.float32), math.inf, True, False, {})
    )
    code = main(["eval", env_id, "--policy", "random", "--episodes", "2", "--num-envs", "2", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = _strict_loads(out)
    assert data["summary"]["mean_return"] == "inf" and data["summary"]["episodes"] == 2
