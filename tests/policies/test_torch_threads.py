"""TorchPolicy's intra-op threads: one for small batches by default, the caller's setting restored."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from _policy_requests import observe, predict, spec

from rlmesh_gym.evaluation import evaluate
from rlmesh_gym.policies import TorchPolicy
from rlmesh_gym.policies.torch_policy import SMALL_BATCH_ROWS

pytestmark = pytest.mark.torch  # (tests/conftest.py)

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
SPACES = (spec(OBS), spec(gym.spaces.Discrete(2)))


class ThreadsSeen(torch.nn.Module):
    """Answers action 0 and notes torch's intra-op thread count during each forward."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[int] = []

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        self.seen.append(torch.get_num_threads())
        return torch.zeros(observations.shape[0], dtype=torch.int64)


@pytest.fixture
def two_threads():
    """torch set to 2 intra-op threads, as a user (or torch's default on 2 cores) would have it."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield 2
    torch.set_num_threads(before)


def _predict(policy: TorchPolicy, rows: int) -> None:
    predict(policy, observe(OBS, np.zeros((rows, 4), np.float32), rows), rows)


def test_a_small_batch_runs_on_one_thread_and_the_setting_is_restored(two_threads):
    module = ThreadsSeen()
    policy = TorchPolicy(module, SPACES)
    _predict(policy, 8)
    _predict(policy, SMALL_BATCH_ROWS)
    _predict(policy, SMALL_BATCH_ROWS + 1)  # a large batch keeps torch's setting
    assert module.seen == [1, 1, two_threads]
    assert torch.get_num_threads() == two_threads


def test_an_explicit_count_holds_for_every_batch_and_none_leaves_torch_alone(two_threads):
    module = ThreadsSeen()
    _predict(TorchPolicy(module, SPACES, num_threads=3), 8)
    _predict(TorchPolicy(module, SPACES, num_threads=3), SMALL_BATCH_ROWS + 1)
    _predict(TorchPolicy(module, SPACES, num_threads=None), 8)
    assert module.seen == [3, 3, two_threads]
    assert torch.get_num_threads() == two_threads


def test_the_setting_is_restored_when_the_policy_raises(two_threads):
    def failing(observations):
        raise RuntimeError("boom")

    with pytest.raises(Exception, match="boom"):
        _predict(TorchPolicy(failing, SPACES), 2)
    assert torch.get_num_threads() == two_threads


def test_evaluate_runs_a_few_lanes_on_one_thread(two_threads):
    module = ThreadsSeen()
    evaluate("CartPole-v1", module, episodes=2, num_envs=2, seed=0, progress=False)
    assert module.seen and set(module.seen) == {1}
    assert torch.get_num_threads() == two_threads


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "many"])
def test_a_bad_thread_count_is_refused(bad):
    with pytest.raises(ValueError, match=r"num_threads must be 'auto', None or an int >= 1"):
        TorchPolicy(ThreadsSeen(), SPACES, num_threads=bad)
