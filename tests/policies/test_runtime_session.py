"""Full sessions: RuntimeDriver + GymVectorEnv("CartPole-v1") + TorchPolicy, checked step by step."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import torch
from torch import nn

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.policies import RandomPolicy, TorchPolicy
from rlmesh_gym.runtime import RuntimeDriver, RuntimeHooks, RuntimeSessionSpec
from rlmesh_gym.runtime.events import ActionReceivedEvent, EpisodeCompletedEvent, ObservationEmittedEvent
from rlmesh_gym.spaces import SpaceCodec

pytestmark = pytest.mark.torch  # (tests/conftest.py)

LANES = 4
EPISODES = 6


class Recorder(RuntimeHooks):
    """Keeps every observation the model saw, every action it sent and every completed episode."""

    def __init__(self) -> None:
        self.observations: list[bytes] = []
        self.actions: list[bytes] = []
        self.episodes: list[EpisodeCompletedEvent] = []

    async def observation_emitted(self, event: ObservationEmittedEvent) -> None:
        self.observations.append(event.observation)

    async def action_received(self, event: ActionReceivedEvent) -> None:
        self.actions.append(event.action)

    async def episode_completed(self, event: EpisodeCompletedEvent) -> None:
        self.episodes.append(event)


class Lean(nn.Module):
    """The classic CartPole heuristic as logits: push towards the side the pole falls to."""

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        lean = obs[:, 2] + obs[:, 3]
        return torch.stack([-lean, lean], dim=-1)


def run(policy: object, *, seed: int = 0, episodes: int = EPISODES) -> tuple[Recorder, object, GymVectorEnv]:
    env = GymVectorEnv.make("CartPole-v1", num_envs=LANES)
    policy.bind(env.contract)
    spec = RuntimeSessionSpec(
        session_id="policies-test",
        route_id="cartpole",
        env_contract=env.contract,
        num_envs=env.num_envs,
        base_seed=seed,
        max_episodes=episodes,
    )
    hooks = Recorder()
    report = asyncio.run(RuntimeDriver(spec, env, policy, hooks=hooks).run())
    return hooks, report, env


def test_an_mlp_policy_completes_k_episodes_and_sends_its_argmax_for_every_observation() -> None:
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 2))
    hooks, report, env = run(TorchPolicy(mlp))
    assert report.total_episodes == EPISODES
    assert len(hooks.episodes) == EPISODES
    assert len(hooks.actions) == report.total_steps == len(hooks.observations)
    observation_codec = SpaceCodec(env.contract.observation_space)
    action_codec = SpaceCodec(env.contract.action_space)
    for observation, action in zip(hooks.observations, hooks.actions, strict=True):
        obs = torch.from_numpy(observation_codec.decode_batch(observation, LANES).copy())
        with torch.no_grad():
            expected = mlp(obs).argmax(-1).tolist()
        assert action_codec.decode_batch(action, LANES).tolist() == expected


def test_a_good_policy_balances_the_pole_much_longer_than_a_random_one() -> None:
    lean, _, _ = run(TorchPolicy(Lean()))
    random, _, _ = run(RandomPolicy(1))
    lean_mean = np.mean([episode.cumulative_reward for episode in lean.episodes])
    random_mean = np.mean([episode.cumulative_reward for episode in random.episodes])
    assert lean_mean > 100.0 > 3 * random_mean


def test_seeded_sampling_sessions_replay_exactly() -> None:
    def returns(seed: int) -> list[tuple[int, float]]:
        hooks, _, _ = run(TorchPolicy(Lean(), deterministic=False, seed=seed), seed=5)
        return [(episode.env_index, episode.cumulative_reward) for episode in hooks.episodes]

    first = returns(11)
    assert first == returns(11)
    assert first != returns(12)
