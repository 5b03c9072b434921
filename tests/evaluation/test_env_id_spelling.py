"""One env, one set of episodes, however its id is spelled (``module:EnvId``, ``--import``, or the id)."""

from __future__ import annotations

import json

import pytest

from rlmesh_gym.cli import main
from rlmesh_gym.evaluation import default_ids, evaluate

SPELLED = "gymnasium.envs.classic_control:CartPole-v1"


def rows(episodes) -> list[tuple[int, int, float, int]]:
    return [(e.lane, e.seed, e.episode_return, e.length) for e in episodes]


def test_module_prefixed_and_registered_ids_play_the_same_episodes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert default_ids(SPELLED, 2) == default_ids("CartPole-v1", 2) == ("eval-CartPole-v1", "lanes-2")
    common = {"episodes": 3, "num_envs": 2, "seed": 4, "autoreset": "disabled", "progress": False}
    spelled = evaluate(SPELLED, "random", **common)
    assert spelled.env_id == SPELLED  # the result still says how it was asked for
    assert rows(spelled.episodes) == rows(evaluate("CartPole-v1", "random", **common).episodes)
    argv = ["eval", "CartPole-v1", "--import", "gymnasium.envs.classic_control", "--policy", "random",
            "--episodes", "3", "--num-envs", "2", "--seed", "4", "--autoreset", "disabled", "--json",
            "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    cli_rows = [(e["lane"], e["seed"], e["episode_return"], e["length"]) for e in result["episodes"]]
    assert cli_rows == rows(spelled.episodes)
