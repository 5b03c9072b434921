"""What every policy shares as a model: spaces, bind, request checks, response and telemetry."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from _policy_requests import close_route, observe, predict, predicted_actions, request, spec

from rlmesh_gym.policies import CallablePolicy, RandomPolicy, TorchPolicy
from rlmesh_gym.proto import env_pb2, spaces_pb2
from rlmesh_gym.runtime import MessageFormModel, ModelRpcError, RuntimeModel
from rlmesh_gym.runtime.seams import ArrayRuntimeModel

OBS = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
ACT = gym.spaces.Discrete(3)
SPACES = (spec(OBS), spec(ACT))
CONTRACT = env_pb2.EnvContract(
    id="Test-v0",
    observation_space=SPACES[0],
    action_space=SPACES[1],
    num_envs=2,
    autoreset_mode=env_pb2.AUTORESET_MODE_NEXT_STEP,
)

pytestmark = pytest.mark.torch  # (tests/conftest.py)
OBS_BYTES = observe(OBS, np.array([[0.5, -0.5], [0.0, 1.0]], dtype=np.float32), 2)


def make(kind: str, spaces: object = None) -> object:
    """One policy of each class, answering action 2 for every row where it can choose."""
    if kind == "torch":
        return TorchPolicy(lambda obs: torch.full((obs.shape[0],), 2), spaces)
    if kind == "callable":
        return CallablePolicy(lambda obs: np.full(len(obs), 2), spaces)
    return RandomPolicy(0, spaces)


KINDS = ["torch", "callable", "random"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_policy_is_an_array_model_and_a_runtime_model_in_message_form(kind: str) -> None:
    policy = make(kind, CONTRACT)
    assert isinstance(policy, ArrayRuntimeModel) and not hasattr(policy, "predict")
    assert isinstance(MessageFormModel(policy), RuntimeModel)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("spaces", [CONTRACT, SPACES, list(SPACES)], ids=["contract", "pair", "list"])
def test_spaces_come_from_a_contract_or_a_pair(kind: str, spaces: object) -> None:
    policy = make(kind, spaces)
    assert policy.observation_spec == SPACES[0]
    assert policy.action_spec == SPACES[1]
    actions = predicted_actions(policy, OBS_BYTES, 2)
    assert actions.shape == (2,) and set(actions.tolist()) <= {0, 1, 2}


@pytest.mark.parametrize("kind", KINDS)
def test_response_context_mirrors_the_request_exactly(kind: str) -> None:
    req = request(
        OBS_BYTES, 2, session_id="S", route_id="R", request_id="S:R:step_observation:000042", step=7
    )
    prediction = asyncio.run(MessageFormModel(make(kind, CONTRACT)).predict(req))
    assert prediction.response.context == req.context
    assert prediction.response.context.SerializeToString(deterministic=True) == req.context.SerializeToString(
        deterministic=True
    )


@pytest.mark.parametrize("kind", KINDS)
def test_telemetry_is_one_model_predict_endpoint_total_duration(kind: str) -> None:
    telemetry = predict(make(kind, CONTRACT), OBS_BYTES, 2).telemetry
    assert telemetry.operation == "model.predict"
    assert telemetry.component_id == ""  # the driver fills in the model component id
    (metric,) = telemetry.metrics
    assert metric.name == "endpoint.total"
    assert metric.WhichOneof("value") == "duration_ns"
    assert metric.duration_ns > 0


@pytest.mark.parametrize("kind", ["torch", "callable"])
def test_deterministic_policies_encode_the_intended_action_bytes(kind: str) -> None:
    prediction = predict(make(kind, CONTRACT), OBS_BYTES, 2)
    assert prediction.response.action.bytes.data.hex() == "0200000000000000" * 2


@pytest.mark.parametrize("kind", KINDS)
def test_predict_before_spaces_are_known_is_a_clear_error(kind: str) -> None:
    with pytest.raises(ModelRpcError) as caught:
        predict(make(kind), OBS_BYTES, 2)
    assert "has no spaces yet" in caught.value.message
    assert "call .bind(contract) before predict" in caught.value.message


@pytest.mark.parametrize("kind", KINDS)
def test_bind_sets_spaces_once_and_refuses_different_ones(kind: str) -> None:
    policy = make(kind)
    assert policy.bind(CONTRACT) is policy
    assert policy.bind(SPACES) is policy  # the same spaces: fine
    other = (spec(OBS), spec(gym.spaces.Discrete(4)))
    with pytest.raises(ValueError) as caught:
        policy.bind(other)
    assert str(caught.value) == (
        f"{type(policy).__name__} is bound to observation Box(-1.0, 1.0, (2,), float32), action Discrete(3); "
        "refusing to rebind it to observation Box(-1.0, 1.0, (2,), float32), action Discrete(4). "
        "Build a new policy for a different environment"
    )
    assert policy.action_spec == SPACES[1]


def test_bind_copies_the_specs() -> None:
    contract = env_pb2.EnvContract()
    contract.CopyFrom(CONTRACT)
    policy = make("callable", contract)
    contract.action_space.discrete.n = 9
    assert policy.action_spec.discrete.n == 3


@pytest.mark.parametrize(
    ("spaces", "message"),
    [
        (
            spec(OBS),
            "expected an EnvContract or an (observation_spec, action_spec) pair of SpaceSpec messages, got ",
        ),
        ((spec(OBS),), "got a tuple of 1 items (SpaceSpec)"),
        ((OBS, ACT), "got a tuple of 2 items (Box, Discrete)"),
        (env_pb2.EnvContract(observation_space=SPACES[0]), "the EnvContract has no action_space"),
        ((spaces_pb2.SpaceSpec(), SPACES[1]), "the observation space is unusable: SpaceSpec has no kind set"),
    ],
)
def test_bad_spaces_are_refused_with_what_was_given(spaces: object, message: str) -> None:
    with pytest.raises((TypeError, ValueError)) as caught:
        CallablePolicy(lambda obs: obs, spaces)
    assert message in str(caught.value)
    assert str(caught.value).startswith("CallablePolicy: ")


@pytest.mark.parametrize("kind", KINDS)
def test_slot_count_must_match_the_observation_rows(kind: str) -> None:
    with pytest.raises(ModelRpcError) as caught:
        predict(make(kind, CONTRACT), OBS_BYTES, 3)
    assert caught.value.message == (
        "the observation batch has 2 row(s) but the request context has 3 slot(s); "
        "expected one observation row per slot"
    )
    assert caught.value.component_id == "model"


@pytest.mark.parametrize("kind", KINDS)
def test_missing_observation_and_empty_slots_are_refused(kind: str) -> None:
    policy = make(kind, CONTRACT)
    with pytest.raises(
        ModelRpcError, match=r"observation batch has 0 row\(s\) but the request context has 2 slot"
    ):
        predict(policy, None, 2)
    with pytest.raises(ModelRpcError) as caught:
        predict(policy, OBS_BYTES, 0, request_id="s:r:step_observation:000003")
    assert caught.value.message == (
        "predict request 's:r:step_observation:000003' has no slots; expected one slot per observation row"
    )


def test_a_malformed_composite_observation_names_the_space() -> None:
    space = gym.spaces.Dict({"a": gym.spaces.Discrete(2)})
    policy = CallablePolicy(
        lambda obs: np.zeros(1, dtype=np.int64), (spec(space), spec(gym.spaces.Discrete(2)))
    )
    with pytest.raises(ModelRpcError) as caught:
        predict(policy, b"\xff\xff", 1)
    assert caught.value.message.startswith(
        "the observation batch does not decode as Dict('a': Discrete(2)): "
    )


def test_component_id_is_named_in_errors() -> None:
    policy = CallablePolicy(lambda obs: obs, CONTRACT, component_id="policy-7")
    with pytest.raises(ModelRpcError) as caught:
        predict(policy, OBS_BYTES, 3)
    assert caught.value.component_id == "policy-7"
    assert str(caught.value).startswith("model endpoint policy-7 request failed: ")


@pytest.mark.parametrize("kind", KINDS)
def test_close_route_is_idempotent_and_predict_works_after_it(kind: str) -> None:
    policy = make(kind, CONTRACT)
    predict(policy, OBS_BYTES, 2)
    close_route(policy)
    close_route(policy)
    close_route(policy, route_id="never-used")
    assert predicted_actions(policy, OBS_BYTES, 2).shape == (2,)


def test_close_route_leaves_the_module_alone() -> None:
    module = torch.nn.Linear(2, 3)
    policy = TorchPolicy(module, CONTRACT)
    before = {name: value.clone() for name, value in module.state_dict().items()}
    close_route(policy)
    assert all(torch.equal(module.state_dict()[name], value) for name, value in before.items())
    assert policy.policy is module


def test_seed_must_be_a_non_negative_int() -> None:
    for seed in (-1, 1.5, "3", True):
        with pytest.raises(ValueError, match=r"seed must be None or a non-negative int"):
            RandomPolicy(seed)


@pytest.mark.slow
def test_the_package_imports_neither_torch_nor_gymnasium() -> None:
    script = (
        "import sys; import rlmesh_gym.policies as p; "
        "p.RandomPolicy(0); p.CallablePolicy(len); "
        "print('torch' in sys.modules, 'gymnasium' in sys.modules); "
        "p.TorchPolicy; print('torch' in sys.modules, 'gymnasium' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False", "True", "False"]
