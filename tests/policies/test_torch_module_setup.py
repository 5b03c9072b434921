"""TorchPolicy puts an ``nn.Module`` on its device and in eval mode, submodules included."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rlmesh_gym.policies import TorchPolicy

pytestmark = pytest.mark.torch  # (tests/conftest.py)


def _module() -> nn.Sequential:
    return nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.1), nn.Linear(8, 2))


def test_a_module_in_training_mode_is_put_in_eval_mode() -> None:
    module = _module()  # training mode, as nn.Module starts
    TorchPolicy(module)
    assert not any(submodule.training for submodule in module.modules())


def test_a_submodule_left_in_training_mode_is_put_in_eval_mode_too() -> None:
    module = _module().eval()
    module[1].train()  # only the dropout: the parent says eval
    TorchPolicy(module)
    assert not any(submodule.training for submodule in module.modules())


def test_a_module_is_moved_to_the_policys_device() -> None:
    module = _module().eval()
    module.register_buffer("scale", torch.ones(2))
    TorchPolicy(module, device="meta")  # a device every machine has
    assert {tensor.device.type for tensor in [*module.parameters(), *module.buffers()]} == {"meta"}


def test_a_module_already_on_the_device_and_in_eval_mode_is_not_walked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = _module().eval()
    calls: list[str] = []
    monkeypatch.setattr(nn.Module, "to", lambda self, *args, **kwargs: calls.append("to") or self)
    monkeypatch.setattr(nn.Module, "train", lambda self, mode=True: calls.append("train") or self)
    TorchPolicy(module, device="cpu")
    assert calls == []
    assert not any(submodule.training for submodule in module.modules())
