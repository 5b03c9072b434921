"""Stable-Baselines3 on a served env through the gymnasium adapter: evaluation equals in-process, and
PPO learns (a short run bounded in steps, not time)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from _gym_serving import serving

from rlmesh_gym.envs import GymVectorEnv, RlmeshEnv
from rlmesh_gym.serve import connect_gym_env

pytestmark = [pytest.mark.sb3, pytest.mark.torch]

from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.evaluation import evaluate_policy  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv  # noqa: E402


@pytest.fixture(autouse=True)
def one_torch_thread():
    """A small MLP runs fastest on one thread (and the suite shares the machine)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def episode_returns(model: PPO, make_env, episodes: int) -> list[float]:
    """``evaluate_policy``'s per-episode returns (greedy) on ``make_env()``, seeded."""
    env = DummyVecEnv([lambda: Monitor(make_env())])
    env.seed(123)
    try:
        returns, _ = evaluate_policy(
            model, env, n_eval_episodes=episodes, deterministic=True, return_episode_rewards=True
        )
    finally:
        env.close()
    return list(returns)


def test_evaluate_policy_on_a_served_env_equals_in_process(no_leaked_threads):
    model = PPO("MlpPolicy", gym.make("CartPole-v1"), seed=3, device="cpu")  # untrained, deterministic
    expected = episode_returns(model, lambda: gym.make("CartPole-v1"), 4)
    in_process = episode_returns(model, lambda: RlmeshEnv(GymVectorEnv(gym.make("CartPole-v1"))), 4)
    with serving(GymVectorEnv(gym.make("CartPole-v1"))) as served:
        remote = episode_returns(model, lambda: connect_gym_env(served.address), 4)
    assert remote == in_process == expected
    assert len(set(expected)) > 1  # episodes of different lengths


def test_ppo_learns_on_a_served_cartpole(no_leaked_threads):
    # Seed 1's initial policy holds the pole about 9 steps; 3,072 steps of PPO (12 rollouts of 256)
    # take it past 100. Bounded in env steps; CPU training is deterministic for a seed.
    with serving(GymVectorEnv(gym.make("CartPole-v1"))) as served:
        env = DummyVecEnv([lambda: Monitor(connect_gym_env(served.address))])
        try:
            model = PPO(
                "MlpPolicy",
                env,
                n_steps=256,
                batch_size=64,
                n_epochs=4,
                learning_rate=1e-3,
                seed=1,
                device="cpu",
            )
            before = np.mean(episode_returns(model, lambda: gym.make("CartPole-v1"), 5))
            model.learn(3072)
        finally:
            env.close()
    after = np.mean(episode_returns(model, lambda: gym.make("CartPole-v1"), 5))
    assert before < 50 and after > 100, (before, after)
