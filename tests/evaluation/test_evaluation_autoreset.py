"""The env ``evaluate()`` builds from an env id resets finished lanes within their last step
(SAME_STEP): the same episodes as under NEXT_STEP in fewer vector steps. A user's env keeps its mode."""

from __future__ import annotations

import numpy as np
import pytest

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.evaluation import evaluate


def push_left(observations: np.ndarray) -> np.ndarray:
    """Always push left: CartPole episodes of about 9 steps."""
    return np.zeros(len(observations), dtype=np.int64)


def lane_episodes(result) -> dict[int, list[tuple[float, int, int | None]]]:
    """Each lane's episodes in order: (return, length, seed)."""
    lanes: dict[int, list[tuple[float, int, int | None]]] = {}
    for episode in result.episodes:
        lanes.setdefault(episode.lane, []).append((episode.episode_return, episode.length, episode.seed))
    return lanes


@pytest.mark.parametrize("num_envs", [1, 4])
def test_an_env_built_from_an_id_runs_same_step_with_the_next_step_episodes_in_fewer_steps(num_envs):
    kwargs = dict(episodes=12, num_envs=num_envs, seed=3, progress=False)
    default = evaluate("CartPole-v1", push_left, **kwargs)
    next_step = evaluate("CartPole-v1", push_left, autoreset="next_step", **kwargs)
    assert (default.autoreset, next_step.autoreset) == ("same_step", "next_step")
    assert lane_episodes(default) == lane_episodes(next_step)
    assert len(default.episodes) == 12 and default.mean_return == next_step.mean_return
    # NEXT_STEP spends one more vector step per episode on a lane's reset step.
    assert default.timings.vector_steps < next_step.timings.vector_steps
    assert default.timings.env_steps == default.timings.vector_steps * num_envs


def test_an_explicit_mode_is_kept_for_an_env_id():
    result = evaluate(
        "CartPole-v1", push_left, episodes=2, num_envs=2, seed=0, autoreset="disabled", progress=False
    )
    assert result.autoreset == "disabled"


@pytest.mark.parametrize("mode", ["next_step", "disabled"])
def test_an_env_the_user_built_keeps_its_own_mode(mode):
    with GymVectorEnv.make("CartPole-v1", num_envs=2, autoreset=mode) as env:
        result = evaluate(env, push_left, episodes=4, seed=0, progress=False)
        assert result.autoreset == mode
        assert env.autoreset_mode.name == mode.upper()
