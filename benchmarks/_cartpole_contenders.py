"""The contenders ``throughput.py`` and ``instructions.py`` run: the same K CartPole-v1 episodes
on N lanes, evaluated by a hand-written loop, by SB3's ``evaluate_policy`` and by ``evaluate()``.

Every contender runs the same torch module greedily (argmax of the logits) under
``torch.inference_mode()`` with one torch thread, builds and closes its own env, and counts each
lane's first ``(K + i) // N`` episodes (the per-lane quotas SB3 and ``evaluate()`` both use).
The hand loop resets lane ``i`` with the seed ``evaluate()`` gives it (its default session and
route ids), so both play exactly the same episodes; SB3 seeds its lanes its own way
(``VecEnv.seed``), as its users do.

Workloads: **long** (the shipped CartPole policy: every episode lasts 500 steps) and **short**
(a seeded random-init MLP 4-64-64-2: episodes of about 9 steps).
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import torch

from rlmesh_gym.evaluation import default_ids, evaluate
from rlmesh_gym.policies.pretrained import load_pretrained
from rlmesh_gym.runtime.seeds import ResetSeeds

__all__ = [
    "ENV_ID",
    "MEAN_LENGTH",
    "WORKLOADS",
    "episodes_for",
    "policy_for",
    "run_evaluate",
    "run_hand",
    "run_sb3",
]

ENV_ID = "CartPole-v1"
WORKLOADS = ("long", "short")
MEAN_LENGTH = {"long": 500, "short": 9}

# One intra-op thread for every contender: a batch of a few four-float observations gains
# nothing from more, and the comparison is of the loops, not of torch's thread pool.
torch.set_num_threads(1)


def _short_policy() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(4, 64),
        torch.nn.Tanh(),
        torch.nn.Linear(64, 64),
        torch.nn.Tanh(),
        torch.nn.Linear(64, 2),
    ).eval()


_POLICIES: dict[str, torch.nn.Module] = {}


def policy_for(workload: str) -> torch.nn.Module:
    """The module of ``workload`` (``"long"`` or ``"short"``), built once."""
    if workload not in _POLICIES:
        _POLICIES[workload] = load_pretrained("cartpole") if workload == "long" else _short_policy()
    return _POLICIES[workload]


def episodes_for(workload: str, lanes: int, env_steps: int) -> int:
    """K: whole rounds of one episode per lane, about ``env_steps`` counted env-steps in all."""
    per_lane = max(1, -(-env_steps // (MEAN_LENGTH[workload] * lanes)))
    return per_lane * lanes


def _lane_seeds(lanes: int, seed: int) -> list[int]:
    """The cold-reset seeds ``evaluate(ENV_ID, num_envs=lanes, seed=seed)`` gives its lanes."""
    session_id, route_id = default_ids(ENV_ID, lanes)
    return ResetSeeds(seed, session_id, route_id).seeds(0, range(lanes))


def run_hand(module: torch.nn.Module, lanes: int, episodes: int, seed: int) -> int:
    """The loop a user would write: ``SyncVectorEnv`` (NEXT_STEP), seeded reset, argmax actions,
    per-lane returns and quota counting. Returns the counted episodes' env-steps."""
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(ENV_ID) for _ in range(lanes)])
    quotas = np.array([(episodes + lane) // lanes for lane in range(lanes)])
    counts = np.zeros(lanes, dtype=np.int64)
    returns = np.zeros(lanes)
    lengths = np.zeros(lanes, dtype=np.int64)
    counted_steps = 0
    pending = np.zeros(lanes, dtype=bool)  # NEXT_STEP: this step is the lane's reset step
    obs, _ = envs.reset(seed=_lane_seeds(lanes, seed))
    while (counts < quotas).any():
        with torch.inference_mode():
            actions = module(torch.as_tensor(obs)).argmax(dim=1).numpy()
        obs, rewards, terminated, truncated, _ = envs.step(actions)
        live = ~pending
        returns[live] += rewards[live]
        lengths[live] += 1
        done = (terminated | truncated) & live
        if done.any():
            for lane in np.flatnonzero(done):
                if counts[lane] < quotas[lane]:
                    counts[lane] += 1
                    counted_steps += int(lengths[lane])
            returns[done] = 0.0
            lengths[done] = 0
        pending = done
    envs.close()
    return counted_steps


class _SB3Predictor:
    """The minimal ``predict`` SB3's ``evaluate_policy`` calls, around a torch module."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        with torch.inference_mode():
            return self.module(torch.as_tensor(observation)).argmax(dim=1).numpy(), state


def run_sb3(module: torch.nn.Module, lanes: int, episodes: int, seed: int) -> int:
    """``evaluate_policy`` on a ``DummyVecEnv`` of the same envs; returns the counted env-steps."""
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import DummyVecEnv

    envs = DummyVecEnv([lambda: gym.make(ENV_ID) for _ in range(lanes)])
    envs.seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "not wrapped with a Monitor": fine for greedy CartPole
        _, lengths = evaluate_policy(
            _SB3Predictor(module), envs, n_eval_episodes=episodes, return_episode_rewards=True
        )
    envs.close()
    return int(sum(lengths))


def run_evaluate(module: torch.nn.Module, lanes: int, episodes: int, seed: int, **arguments) -> int:
    """``evaluate(ENV_ID, module, episodes=K, num_envs=N, seed=seed, progress=False, **arguments)``;
    returns the counted env-steps."""
    result = evaluate(
        ENV_ID, module, episodes=episodes, num_envs=lanes, seed=seed, progress=False, **arguments
    )
    return sum(record.length for record in result.episodes)
