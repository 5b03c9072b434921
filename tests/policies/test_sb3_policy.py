"""Stable-Baselines3 models through evaluate(), the CLI and SB3Policy: SB3's own predict, same returns."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3 import PPO

from rlmesh_gym.cli import main
from rlmesh_gym.evaluation import evaluate
from rlmesh_gym.policies import SB3Policy
from rlmesh_gym.spaces import space_spec

pytestmark = [pytest.mark.sb3, pytest.mark.slow]  # sb3: tests/conftest.py; slow: trains a PPO first


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[PPO, Path]:
    """A PPO trained on CartPole for a few hundred steps (seconds), and its model.save() zip."""
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=128, batch_size=64, n_epochs=2, seed=0, device="cpu")
    model.learn(total_timesteps=256)
    path = tmp_path_factory.mktemp("sb3") / "ppo_cartpole.zip"
    model.save(path)
    return model, path


def plain_gymnasium_return(model: PPO, seed: int) -> float:
    """One CartPole episode from reset(seed=seed), acting with model.predict(obs, deterministic=True)."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    total, done = 0.0, False
    while not done:
        action, _ = model.predict(obs, deterministic=True)
        obs, reward, terminated, truncated, _ = env.step(action)
        total += float(reward)
        done = terminated or truncated
    env.close()
    return total


@pytest.mark.parametrize("form", ["object", "zip path", "sb3: reference"])
def test_evaluate_returns_equal_a_plain_gymnasium_loop_with_the_same_seeds(
    trained: tuple[PPO, Path], form: str
) -> None:
    model, path = trained
    policy = {"object": model, "zip path": path, "sb3: reference": f"sb3:{path}"}[form]
    # DISABLED autoreset: the driver resets every episode with its own recorded seed.
    result = evaluate(
        "CartPole-v1", policy, episodes=6, num_envs=3, seed=11, autoreset="disabled", progress=False
    )
    assert len(result.episodes) == 6 and all(record.seed is not None for record in result.episodes)
    expected = [plain_gymnasium_return(model, record.seed) for record in result.episodes]
    assert result.returns == expected
    assert len(set(expected)) > 1  # the seeds matter, so the comparison can fail


def test_the_cli_evaluates_an_sb3_zip(trained: tuple[PPO, Path], capsys: pytest.CaptureFixture[str]) -> None:
    model, path = trained
    code = main(["eval", "CartPole-v1", "--policy", f"sb3:{path}", "--episodes", "3", "--num-envs", "3",
                 "--autoreset", "disabled", "--json"])  # fmt: skip
    assert code == 0
    import json

    result = json.loads(capsys.readouterr().out)
    assert [e["episode_return"] for e in result["episodes"]] == [
        plain_gymnasium_return(model, e["seed"]) for e in result["episodes"]
    ]


def test_an_sb3_zip_for_another_observation_space_is_refused(tmp_path: Path) -> None:
    other = PPO("MlpPolicy", "MountainCar-v0", n_steps=64, batch_size=64, device="cpu")
    path = tmp_path / "mountaincar.zip"
    other.save(path)
    refused = r"trained on the observation space Box\(\[-1\.2.*env's observation space"
    with pytest.raises(ValueError, match=refused):
        evaluate("CartPole-v1", f"sb3:{path}", episodes=1, progress=False)
    assert main(["eval", "CartPole-v1", "--policy", str(path), "--episodes", "1"]) == 2


def test_sb3policy_checks_its_input(trained: tuple[PPO, Path], tmp_path: Path) -> None:
    model, _ = trained
    with pytest.raises(TypeError, match="must be a Stable-Baselines3 algorithm or policy"):
        SB3Policy(object())
    not_sb3 = tmp_path / "not.zip"
    not_sb3.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a Stable-Baselines3 model.save"):
        SB3Policy.load(not_sb3)
    # The policy object alone works too (SB3Policy binds to the env's contract).
    spaces = (space_spec(model.observation_space), space_spec(model.action_space))
    policy = SB3Policy(model.policy, spaces)
    assert policy.model is model.policy


def test_without_stable_baselines3_the_error_names_the_extra(trained: tuple[PPO, Path]) -> None:
    _, path = trained
    code = (
        "import sys; sys.modules['stable_baselines3'] = None\n"
        "from rlmesh_gym.evaluation import evaluate\n"
        "try:\n"
        f"    evaluate('CartPole-v1', 'sb3:{path}', episodes=1, progress=False)\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ.copy()
    ).stdout
    assert "pip install 'rlmesh-gym[sb3]'" in out


def test_predict_batches_match_sb3_row_by_row(trained: tuple[PPO, Path]) -> None:
    model, _ = trained
    from _policy_requests import observe, predicted_actions

    batch = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    spaces = (space_spec(model.observation_space), space_spec(model.action_space))
    got = predicted_actions(SB3Policy(model, spaces), observe(model.observation_space, batch, 8), 8)
    assert got.tolist() == [int(model.predict(row, deterministic=True)[0]) for row in batch]
