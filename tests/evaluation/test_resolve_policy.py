"""resolve_policy with and without a contract: one resolver for evaluate() and serve-policy."""

from __future__ import annotations

import gymnasium  # noqa: E402
import numpy as np
import pytest

from rlmesh_gym.evaluation import evaluate
from rlmesh_gym.policies import CallablePolicy, RandomPolicy, TorchPolicy
from rlmesh_gym.policies.resolve import resolve_policy, shipped_policy
from rlmesh_gym.spaces import space_spec

pytestmark = pytest.mark.torch  # (tests/conftest.py)

_OPTIONS = dict(seed=3, device="cpu", deterministic=True)


def _cartpole_contract():
    from rlmesh_gym.envs import GymVectorEnv

    env = GymVectorEnv.make("CartPole-v1", num_envs=2)
    try:
        return env.contract
    finally:
        env.env.close()


def _push_right(observation: np.ndarray) -> np.ndarray:
    return np.ones(len(observation), dtype=np.int64)


@pytest.mark.parametrize(
    ("policy", "expected_type"),
    [("random", RandomPolicy), ("pretrained:cartpole", TorchPolicy), (_push_right, CallablePolicy)],
)
def test_without_a_contract_the_policy_is_unbound_and_binds_later(policy, expected_type):
    contract = _cartpole_contract()
    unbound = resolve_policy(policy, None, **_OPTIONS)
    assert isinstance(unbound, expected_type)
    assert unbound.observation_spec is None and unbound.action_spec is None
    assert unbound.bind(contract) is unbound
    bound = resolve_policy(policy, contract, **_OPTIONS)
    assert unbound.observation_spec == bound.observation_spec == contract.observation_space
    assert unbound.action_spec == bound.action_spec == contract.action_space


def test_a_runtime_model_is_bound_only_when_a_contract_is_given():
    class Recorder:
        def __init__(self):
            self.bound = []

        def bind(self, contract):
            self.bound.append(contract.id)

        async def predict(self, request):
            raise AssertionError("not called")

    model = Recorder()
    assert resolve_policy(model, None, **_OPTIONS) is model
    assert model.bound == []
    assert resolve_policy(model, _cartpole_contract(), **_OPTIONS) is model
    assert model.bound == ["CartPole-v1"]


def test_bad_references_fail_the_same_way_without_a_contract():
    with pytest.raises(ValueError, match="is not 'random', 'pretrained:NAME', an existing file"):
        resolve_policy("no-such-policy", None, **_OPTIONS)
    with pytest.raises(ValueError, match="cannot import module 'no_such_module_xyz'"):
        resolve_policy("no_such_module_xyz:act", None, **_OPTIONS)
    with pytest.raises(TypeError, match="policy must be an nn.Module"):
        resolve_policy(42, None, **_OPTIONS)


def test_an_unbound_policy_refuses_other_spaces_once_bound():
    policy = resolve_policy("random", None, **_OPTIONS).bind(_cartpole_contract())
    other = (space_spec(gymnasium.spaces.Box(-1.0, 1.0, (2,))), space_spec(gymnasium.spaces.Discrete(3)))
    with pytest.raises(ValueError, match="refusing to rebind"):
        policy.bind(other)


def test_shipped_policy_names_the_pretrained_reference_for_an_env_id():
    assert shipped_policy("CartPole-v1") == "pretrained:cartpole"
    assert shipped_policy("Acrobot-v1") is None
    result = evaluate(
        "CartPole-v1", shipped_policy("CartPole-v1"), episodes=2, num_envs=2, seed=0, progress=False
    )
    assert result.mean_return == 500.0


def test_default_policy_is_the_shipped_one_else_a_clear_error():
    from rlmesh_gym._audience import command_line_audience
    from rlmesh_gym.policies.resolve import default_policy

    assert default_policy("CartPole-v1") == shipped_policy("CartPole-v1") == "pretrained:cartpole"
    with pytest.raises(
        ValueError, match=r"^no policy given and no shipped policy for 'Acrobot-v1'; pass a policy"
    ):
        default_policy("Acrobot-v1")
    with (
        command_line_audience(),
        pytest.raises(
            ValueError,
            match=r"^no --policy given and no shipped policy for 'Acrobot-v1' served at 127.0.0.1:5; "
            r"pass --policy PATH, .* or --policy-address HOST:PORT$",
        ),
    ):
        default_policy("Acrobot-v1", served_at="127.0.0.1:5")
