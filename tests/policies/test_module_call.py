"""TorchPolicy calls the policy as ``module(x)`` would: ``forward`` directly only when torch's
dispatch would do nothing else, an ``nn.Sequential``'s layers one by one by the same rule, and
``module(x)`` whenever a hook, a compiled call or another ``__call__`` is involved."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from _policy_requests import observe, predicted_actions, spec
from torch import nn

from rlmesh_gym.policies import TorchPolicy, _module_call
from rlmesh_gym.policies._module_call import CALL, FORWARD, LAYERS, forward_plan

pytestmark = pytest.mark.torch  # (tests/conftest.py)

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
SPACES = (spec(OBS), spec(gym.spaces.Discrete(3)))
ROWS = 16


def _mlp() -> nn.Sequential:
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 3)).eval()


def _observations() -> np.ndarray:
    return np.random.default_rng(5).uniform(-1, 1, (ROWS, 4)).astype(np.float32)


def _actions(module: object) -> list[int]:
    data = observe(OBS, _observations(), ROWS)
    return predicted_actions(TorchPolicy(module, SPACES), data, ROWS).tolist()


def _expected(module: nn.Module) -> list[int]:
    with torch.inference_mode():
        return module(torch.from_numpy(_observations())).argmax(1).tolist()


class Custom(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = _mlp()

    def forward(self, observations: torch.Tensor) -> torch.Tensor:
        return self.body(observations)


class OwnCall(Custom):
    def __call__(self, observations: torch.Tensor) -> torch.Tensor:
        return -super().__call__(observations)


class Stack(nn.Sequential):
    pass


def test_the_plan_of_each_kind_of_policy() -> None:
    sequential = _mlp()
    assert forward_plan(sequential) == LAYERS
    assert forward_plan(Custom()) == FORWARD
    assert forward_plan(Stack(nn.Linear(4, 3))) == FORWARD  # a subclass may change the forward
    assert forward_plan(OwnCall()) == CALL
    assert forward_plan(lambda observations: observations) == CALL
    sequential.forward = lambda observations: observations  # an instance's own forward
    assert forward_plan(sequential) == FORWARD


@pytest.mark.parametrize(
    "register",
    [
        lambda module: module.register_forward_hook(lambda *_: None),
        lambda module: module.register_forward_pre_hook(lambda *_: None),
        lambda module: module.register_full_backward_hook(lambda *_: None),
        lambda module: module.register_full_backward_pre_hook(lambda *_: None),
    ],
    ids=["forward hook", "forward pre-hook", "backward hook", "backward pre-hook"],
)
def test_a_hook_on_the_module_makes_it_a_call_until_removed(register) -> None:
    module = _mlp()
    handle = register(module)
    assert forward_plan(module) == CALL
    handle.remove()
    assert forward_plan(module) == LAYERS


@pytest.mark.parametrize(
    "register",
    [
        nn.modules.module.register_module_forward_hook,
        nn.modules.module.register_module_forward_pre_hook,
        nn.modules.module.register_module_full_backward_hook,
        nn.modules.module.register_module_full_backward_pre_hook,
    ],
)
def test_a_global_hook_makes_every_policy_a_call(register) -> None:
    handle = register(lambda *_: None)
    try:
        assert forward_plan(_mlp()) == CALL
        assert forward_plan(Custom()) == CALL
    finally:
        handle.remove()
    assert forward_plan(_mlp()) == LAYERS


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.compile's imports (torch.jit)
def test_a_compiled_module_is_called_through_its_compiled_call() -> None:
    module = _mlp()
    module.compile()  # sets the compiled call; nothing compiles until the module is called
    assert forward_plan(module) == CALL


def test_an_unknown_torch_dispatch_makes_every_policy_a_call(monkeypatch) -> None:
    assert _module_call.DISPATCH_IS_KNOWN, "this torch's nn.Module dispatch changed: re-check the rule"
    monkeypatch.setattr(_module_call, "DISPATCH_IS_KNOWN", False)
    assert forward_plan(_mlp()) == CALL
    assert forward_plan(Custom()) == CALL


def test_the_layers_run_give_the_actions_of_the_module_call() -> None:
    sequential, custom = _mlp(), Custom()
    assert _actions(sequential) == _expected(sequential)
    assert _actions(custom) == _expected(custom)
    assert len(set(_expected(sequential))) > 1  # the observations tell the actions apart


def test_a_layer_s_hooks_still_run_once_per_predict_and_can_change_its_output() -> None:
    module = _mlp()
    calls: list[tuple[str, int]] = []
    module[0].register_forward_pre_hook(lambda layer, args: calls.append(("pre", args[0].shape[0])))
    # Flipping the last layer's logits flips the greedy action: the hook's output is used.
    module[4].register_forward_hook(lambda layer, args, output: -output)
    assert forward_plan(module) == LAYERS  # the Sequential has no hook; its layers decide
    actions = _actions(module)
    assert calls == [("pre", ROWS)]
    with torch.inference_mode():
        logits = module(torch.from_numpy(_observations()))
    assert actions == logits.argmax(1).tolist()  # (the hook is in this call too)
    plain = _mlp()
    assert actions == (-plain(torch.from_numpy(_observations()))).argmax(1).tolist()


def test_a_global_hook_sees_every_module_of_each_predict() -> None:
    module, seen = _mlp(), []
    handle = nn.modules.module.register_module_forward_hook(
        lambda layer, *_: seen.append(type(layer).__name__)
    )
    try:
        _actions(module)
    finally:
        handle.remove()
    assert seen == ["Linear", "Tanh", "Linear", "ReLU", "Linear", "Sequential"]


def test_a_policy_with_its_own_call_is_called() -> None:
    own = OwnCall()  # its __call__ negates the logits, which flips the greedy action
    with torch.inference_mode():
        logits = own.forward(torch.from_numpy(_observations()))
    assert _actions(own) == (-logits).argmax(1).tolist()
