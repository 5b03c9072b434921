"""TorchPolicy.load: TorchScript archives, state_dicts with a factory, pickled modules only on request."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from _policy_requests import observe, predicted_actions, spec
from torch import nn

from rlmesh_gym.policies import TorchPolicy

OBS = gym.spaces.Box(-5.0, 5.0, (4,), np.float32)
ACT = gym.spaces.Discrete(2)
SPACES = (spec(OBS), spec(ACT))
BATCH = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
OBS_BYTES = observe(OBS, BATCH, 16)

# torch 2.13 deprecates torch.jit; the archives are still the format this loader reads.
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.*` is deprecated:DeprecationWarning")


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.body(obs)


@pytest.fixture
def net() -> Net:
    torch.manual_seed(0)
    return Net().eval()


def expected_actions(module: nn.Module) -> list[int]:
    with torch.no_grad():
        return module(torch.from_numpy(BATCH)).argmax(-1).tolist()


def test_torchscript_round_trip(net: Net, tmp_path: Path) -> None:
    path = tmp_path / "policy.pt"
    torch.jit.save(torch.jit.script(net), str(path))
    policy = TorchPolicy.load(path, SPACES)
    assert isinstance(policy.policy, torch.jit.ScriptModule)
    assert predicted_actions(policy, OBS_BYTES, 16).tolist() == expected_actions(net)


def test_state_dict_with_a_factory(net: Net, tmp_path: Path) -> None:
    path = tmp_path / "weights.pt"
    torch.save(net.state_dict(), path)
    policy = TorchPolicy.load(str(path), SPACES, factory=Net, seed=3, deterministic=False)
    assert isinstance(policy.policy, Net) and not policy.policy.training
    assert policy.seed == 3 and policy.deterministic is False
    greedy = TorchPolicy.load(path, SPACES, factory=Net)
    assert predicted_actions(greedy, OBS_BYTES, 16).tolist() == expected_actions(net)


def test_checkpoint_dicts_holding_a_state_dict(net: Net, tmp_path: Path) -> None:
    path = tmp_path / "checkpoint.pt"
    torch.save({"model_state_dict": net.state_dict(), "step": 1000}, path)
    policy = TorchPolicy.load(path, SPACES, factory=Net)
    assert predicted_actions(policy, OBS_BYTES, 16).tolist() == expected_actions(net)


@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy"])
def test_pickled_modules_are_refused_without_opt_in(net: Net, tmp_path: Path, zip_format: bool) -> None:
    path = tmp_path / "whole.pt"
    torch.save(net, path, _use_new_zipfile_serialization=zip_format)
    with pytest.raises(ValueError) as caught:
        TorchPolicy.load(path, SPACES)
    message = str(caught.value)
    assert message.startswith(f"TorchPolicy.load: {path} holds a pickled Python object")
    assert "loading it executes code from the file" in message
    assert "pass allow_pickle=True (Python) or --allow-pickle (rlmesh-gym CLI)" in message
    policy = TorchPolicy.load(path, SPACES, allow_pickle=True)
    assert predicted_actions(policy, OBS_BYTES, 16).tolist() == expected_actions(net)


@pytest.mark.parametrize(
    ("setup", "kwargs", "error", "message"),
    [
        ("missing", {}, FileNotFoundError, "is not a file; expected a TorchScript archive"),
        (
            "garbage",
            {},
            ValueError,
            "could not be read as a TorchScript archive (torch.jit.save), a state_dict",
        ),
        ("state_dict", {}, ValueError, "holds a state_dict (4 tensors) but no module; pass factory="),
        (
            "state_dict",
            {"factory": lambda: nn.Linear(4, 2)},
            ValueError,
            "does not fit the Linear built by factory",
        ),
        ("state_dict", {"factory": lambda: "net"}, TypeError, "factory returned str, expected an nn.Module"),
        ("state_dict", {"factory": 3}, TypeError, "factory must be a callable returning an nn.Module for"),
        (
            "script",
            {"factory": Net},
            ValueError,
            "is a TorchScript archive, which holds its own module; drop factory=",
        ),
        ("tensor", {"factory": Net}, ValueError, "holds a Tensor that is not a state_dict"),
        (
            "pickled",
            {"factory": Net},
            ValueError,
            "holds a pickled Python object, not a state_dict for factory=",
        ),
        ("not_callable", {"allow_pickle": True}, ValueError, "unpickled to a Holder, which is not callable"),
    ],
)
def test_load_errors_name_the_path_and_what_was_expected(
    net: Net, tmp_path: Path, setup: str, kwargs: dict, error: type, message: str
) -> None:
    path = tmp_path / f"{setup}.pt"
    if setup == "garbage":
        path.write_bytes(b"not a torch file")
    elif setup == "state_dict":
        torch.save(net.state_dict(), path)
    elif setup == "script":
        torch.jit.save(torch.jit.script(net), str(path))
    elif setup == "tensor":
        torch.save(torch.zeros(3), path)
    elif setup == "pickled":
        torch.save(net, path)
    elif setup == "not_callable":
        torch.save(Holder(), path)
    with pytest.raises(error) as caught:
        TorchPolicy.load(path, SPACES, **kwargs)
    assert message in str(caught.value)
    assert str(path) in str(caught.value)


class Holder:
    """A picklable object that is not a policy."""


def test_a_bad_device_is_named(net: Net, tmp_path: Path) -> None:
    path = tmp_path / "weights.pt"
    torch.save(net.state_dict(), path)
    with pytest.raises(ValueError, match=r"TorchPolicy.load: device 'gpu9' is not a torch device"):
        TorchPolicy.load(path, SPACES, factory=Net, device="gpu9")
    with pytest.raises(ValueError, match=r"TorchPolicy: device 'gpu9' is not a torch device"):
        TorchPolicy(net, SPACES, device="gpu9")
