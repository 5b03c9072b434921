"""The shipped CartPole policy: architecture, weights from package data, and its greedy return."""

from __future__ import annotations

import subprocess
import sys
import warnings
from importlib.resources import files

import gymnasium as gym
import numpy as np
import pytest
import safetensors.torch
import torch

from rlmesh_gym.policies.pretrained import PRETRAINED, MLPPolicy, load_pretrained

pytestmark = pytest.mark.torch  # (tests/conftest.py)

NUM_LANES = 20
EPISODES_PER_LANE = 5  # 100 episodes in total


def test_load_pretrained_builds_the_cartpole_mlp_in_eval_mode() -> None:
    policy = load_pretrained()
    assert isinstance(policy, MLPPolicy)
    assert not policy.training
    shapes = {name: tuple(p.shape) for name, p in policy.state_dict().items()}
    assert shapes == {
        "net.0.weight": (64, 4),
        "net.0.bias": (64,),
        "net.2.weight": (64, 64),
        "net.2.bias": (64,),
        "net.4.weight": (2, 64),
        "net.4.bias": (2,),
    }
    with torch.no_grad():
        logits = policy(torch.zeros((7, 4)))
    assert logits.shape == (7, 2)
    assert logits.dtype == torch.float32


def test_loaded_weights_are_the_shipped_file_not_a_fresh_init() -> None:
    entry = PRETRAINED["cartpole"]
    shipped = safetensors.torch.load(files("rlmesh_gym.assets").joinpath(entry.asset).read_bytes())
    loaded = load_pretrained("cartpole").state_dict()
    assert loaded.keys() == shipped.keys()
    for name, tensor in shipped.items():
        assert torch.equal(loaded[name], tensor), name
    fresh = entry.factory().state_dict()
    assert not torch.equal(fresh["net.0.weight"], shipped["net.0.weight"])


def test_loading_the_shipped_policy_raises_no_deprecation_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_pretrained("cartpole")


def test_registry_entry_matches_the_gymnasium_env_spaces() -> None:
    entry = PRETRAINED["cartpole"]
    env = gym.make(entry.env_id)
    policy = load_pretrained("cartpole")
    assert env.observation_space.shape == (policy.obs_dim,)
    assert env.action_space.n == policy.n_actions
    env.close()


def test_greedy_policy_mean_return_over_100_episodes_is_at_least_475() -> None:
    policy = load_pretrained()
    envs = gym.make_vec("CartPole-v1", num_envs=NUM_LANES)
    assert envs.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    obs, _ = envs.reset(seed=2024)
    episode_return = np.zeros(NUM_LANES)
    finished: list[list[float]] = [[] for _ in range(NUM_LANES)]
    autoresetting = np.zeros(NUM_LANES, dtype=bool)
    while min(len(lane) for lane in finished) < EPISODES_PER_LANE:
        with torch.no_grad():
            action = policy(torch.as_tensor(obs, dtype=torch.float32)).argmax(dim=1).numpy()
        obs, reward, terminated, truncated, _ = envs.step(action)
        # NEXT_STEP: the step after an episode ends only resets the lane; it belongs to no episode.
        live = ~autoresetting
        episode_return += reward * live
        for lane in np.flatnonzero((terminated | truncated) & live):
            if len(finished[lane]) < EPISODES_PER_LANE:
                finished[lane].append(float(episode_return[lane]))
            episode_return[lane] = 0.0
        autoresetting = terminated | truncated
    envs.close()

    returns = np.array([r for lane in finished for r in lane])
    assert returns.shape == (NUM_LANES * EPISODES_PER_LANE,)
    assert np.all((returns >= 1) & (returns <= 500))
    assert returns.mean() >= 475.0, f"mean {returns.mean():.1f}, min {returns.min():.0f}"


def test_unknown_name_lists_available_policies() -> None:
    with pytest.raises(ValueError, match=r"unknown pretrained policy 'pong'; available: cartpole"):
        load_pretrained("pong")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"obs_dim": 0}, "obs_dim must be a positive int, got 0"),
        ({"n_actions": 2.0}, "n_actions must be a positive int, got 2.0"),
        ({"hidden": (64, -1)}, r"hidden must be a sequence of positive ints, got \(64, -1\)"),
    ],
)
def test_mlp_rejects_bad_sizes(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MLPPolicy(**kwargs)


def test_mlp_rejects_observations_of_the_wrong_width() -> None:
    with pytest.raises(ValueError, match=r"last dimension 4, got shape \(3, 5\)"):
        MLPPolicy()(torch.zeros((3, 5)))


@pytest.mark.slow
def test_pretrained_module_does_not_import_gymnasium() -> None:
    code = (
        "import sys, rlmesh_gym.policies.pretrained as m; m.load_pretrained(); "
        "sys.exit(3 if 'gymnasium' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
