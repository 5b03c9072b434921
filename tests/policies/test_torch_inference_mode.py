"""TorchPolicy runs the policy's forward under torch's inference mode, and only the forward."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from _policy_requests import observe, predict, spec

from rlmesh_gym.policies import TorchPolicy
from rlmesh_gym.runtime.errors import ModelRpcError

pytestmark = pytest.mark.torch  # (tests/conftest.py)

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
SPACES = (spec(OBS), spec(gym.spaces.Discrete(2)))


class ModeSeen(torch.nn.Module):
    """Notes whether inference mode and grad mode are on during each forward; logits favour 1."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.fail = fail
        self.seen: list[tuple[bool, bool]] = []

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        self.seen.append((torch.is_inference_mode_enabled(), torch.is_grad_enabled()))
        if self.fail:
            raise RuntimeError("broken policy")
        return torch.tensor([[0.0, 1.0]]).repeat(observations.shape[0], 1)


def _predict(policy: TorchPolicy, rows: int = 2) -> object:
    return predict(policy, observe(OBS, np.zeros((rows, 4), np.float32), rows), rows)


def test_the_forward_runs_in_inference_mode_and_the_mode_ends_with_it():
    module = ModeSeen()
    _predict(TorchPolicy(module, SPACES))
    assert module.seen == [(True, False)]
    assert not torch.is_inference_mode_enabled() and torch.is_grad_enabled()


def test_a_failing_forward_leaves_inference_mode_too():
    module = ModeSeen(fail=True)
    with pytest.raises(ModelRpcError, match="broken policy"):
        _predict(TorchPolicy(module, SPACES))
    assert module.seen == [(True, False)]
    assert not torch.is_inference_mode_enabled() and torch.is_grad_enabled()
