"""TorchPolicy.load: torch.export programs, TorchScript archives, state_dicts (torch.save or safetensors)
with a factory, pickled modules only on request; evaluate() on .pt2 paths."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from _policy_requests import observe, predicted_actions, spec
from safetensors.torch import save_file
from torch import nn

from rlmesh_gym.evaluation import PolicyMismatchError, evaluate
from rlmesh_gym.policies import TorchPolicy
from rlmesh_gym.runtime import ModelRpcError

OBS = gym.spaces.Box(-5.0, 5.0, (4,), np.float32)
ACT = gym.spaces.Discrete(2)
SPACES = (spec(OBS), spec(ACT))
BATCH = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
OBS_BYTES = observe(OBS, BATCH, 16)

# torch 2.13 deprecates torch.jit; the archives are still the format this loader reads.
pytestmark = [
    pytest.mark.torch,
    pytest.mark.filterwarnings("ignore:`torch.jit.*` is deprecated:DeprecationWarning"),
]


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
    assert "Pass allow_pickle=True only if you trust the file" in message and "--allow-pickle" not in message
    policy = TorchPolicy.load(path, SPACES, allow_pickle=True)
    assert predicted_actions(policy, OBS_BYTES, 16).tolist() == expected_actions(net)


@pytest.mark.parametrize(
    ("setup", "kwargs", "error", "message"),
    [
        ("missing", {}, FileNotFoundError, "is not a file; expected a torch.export program"),
        (
            "garbage",
            {},
            ValueError,
            "could not be read as a torch.export program (torch.export.save, .pt2), a TorchScript archive",
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


def greedy(module: nn.Module, batch: np.ndarray) -> list[int]:
    with torch.no_grad():
        return module(torch.from_numpy(batch)).argmax(-1).tolist()


def export(module: nn.Module, path: Path, example: torch.Tensor, *, dynamic: bool = True) -> Path:
    shapes = ({0: torch.export.Dim("batch")},) if dynamic else None
    torch.export.save(torch.export.export(module, (example,), dynamic_shapes=shapes), path)
    return path


def test_a_dynamic_batch_program_serves_any_row_count(net: Net, tmp_path: Path) -> None:
    path = export(net, tmp_path / "policy.pt2", torch.zeros(3, 4))
    policy = TorchPolicy.load(path, SPACES)
    for rows in (16, 1):
        got = predicted_actions(policy, observe(OBS, BATCH[:rows], rows), rows)
        assert got.tolist() == greedy(net, BATCH[:rows])


def test_an_exported_program_object_is_a_policy_too(net: Net) -> None:
    program = torch.export.export(net, (torch.zeros(2, 4),), dynamic_shapes=({0: torch.export.Dim("b")},))
    policy = TorchPolicy(program, SPACES)
    assert predicted_actions(policy, observe(OBS, BATCH, 16), 16).tolist() == greedy(net, BATCH)


def test_a_fixed_batch_program_names_the_fix_when_the_rows_differ(net: Net, tmp_path: Path) -> None:
    path = export(net, tmp_path / "fixed.pt2", torch.zeros(3, 4), dynamic=False)
    policy = TorchPolicy.load(path, SPACES)
    assert predicted_actions(policy, observe(OBS, BATCH[:3], 3), 3).tolist() == greedy(net, BATCH[:3])
    with pytest.raises(ModelRpcError, match=r'fixed batch size of 3.*16 rows.*Dim\("batch"\)'):
        predicted_actions(policy, observe(OBS, BATCH, 16), 16)
    with pytest.raises(PolicyMismatchError, match=r"fixed batch size of 3, but this predict has 8 rows"):
        evaluate("CartPole-v1", path, episodes=2, num_envs=8, progress=False)


@pytest.mark.parametrize(
    ("example", "message"),
    [
        (torch.zeros(2, 3), r"exported for inputs of shape \(batch, 3\).*\(batch, 4\)"),
        (torch.zeros(2, 4, dtype=torch.float64), "exported for float64 inputs.*gives float32 batches"),
    ],
)
def test_a_program_whose_signature_does_not_fit_the_observation_space_is_refused(
    tmp_path: Path, example: torch.Tensor, message: str
) -> None:
    module = nn.Linear(example.shape[1], 2).to(example.dtype)
    path = export(module, tmp_path / "other.pt2", example)
    with pytest.raises(ValueError, match=message):
        TorchPolicy.load(path, SPACES)
    with pytest.raises(ValueError, match=message):
        evaluate("CartPole-v1", str(path), episodes=1, progress=False)


def test_a_program_does_not_take_a_factory(net: Net, tmp_path: Path) -> None:
    path = export(net, tmp_path / "policy.pt2", torch.zeros(3, 4))
    with pytest.raises(ValueError, match="torch.export program.*drop factory="):
        TorchPolicy.load(path, SPACES, factory=Net)


def test_evaluate_takes_a_pt2_path_and_matches_the_module(net: Net, tmp_path: Path) -> None:
    path = export(net, tmp_path / "policy.pt2", torch.zeros(3, 4))
    from_file = evaluate("CartPole-v1", path, episodes=6, num_envs=3, seed=5, progress=False)
    from_module = evaluate("CartPole-v1", net, episodes=6, num_envs=3, seed=5, progress=False)
    assert from_file.returns == from_module.returns and len(from_file.returns) == 6


def test_a_safetensors_state_dict_loads_into_the_factory(net: Net, tmp_path: Path) -> None:
    path = tmp_path / "weights.safetensors"
    save_file(net.state_dict(), path)
    policy = TorchPolicy.load(path, SPACES, factory=Net)
    assert isinstance(policy.policy, Net)
    assert predicted_actions(policy, observe(OBS, BATCH, 16), 16).tolist() == greedy(net, BATCH)
    renamed = tmp_path / "weights.bin"  # detected from the bytes, not the suffix
    renamed.write_bytes(path.read_bytes())
    assert isinstance(TorchPolicy.load(renamed, SPACES, factory=Net).policy, Net)


def test_a_safetensors_file_needs_a_factory_that_fits(net: Net, tmp_path: Path) -> None:
    path = tmp_path / "weights.safetensors"
    save_file(net.state_dict(), path)
    with pytest.raises(ValueError, match=r"state_dict \(4 tensors\) but no module; pass factory="):
        TorchPolicy.load(path, SPACES)
    with pytest.raises(ValueError, match="does not fit the Linear built by factory"):
        TorchPolicy.load(path, SPACES, factory=lambda: nn.Linear(4, 2))


def test_a_truncated_safetensors_file_is_reported_broken(net: Net, tmp_path: Path) -> None:
    path = tmp_path / "weights.safetensors"
    save_file(net.state_dict(), path)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ValueError, match="broken safetensors file"):
        TorchPolicy.load(path, SPACES, factory=Net)
