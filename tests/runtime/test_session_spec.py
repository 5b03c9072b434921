"""Session spec validation with this port's extensions (docs/design/runtime.md#session-spec),
limits and report."""

from __future__ import annotations

import json
import math
import re

import pytest
from _runtime_fakes import DISABLED, NEXT_STEP, SAME_STEP, UNSPECIFIED, contract, single_env_spec

from rlmesh_gym.proto import env_pb2, spaces_pb2
from rlmesh_gym.runtime import InvalidSpecError, RuntimeLimits, RuntimeReport, RuntimeSessionSpec
from rlmesh_gym.runtime.events import RuntimeRouteContext


def violation(spec: RuntimeSessionSpec) -> str:
    with pytest.raises(InvalidSpecError) as caught:
        spec.validate()
    assert str(caught.value) == f"invalid runtime session spec: {caught.value.message}"
    return caught.value.message


def test_seed_fixture_is_valid() -> None:
    single_env_spec().validate()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"session_id": ""}, "runtime session_id must not be empty"),
        ({"session_id": " \t"}, "runtime session_id must not be empty"),
        ({"route_id": "  "}, "runtime route_id must not be empty"),
        ({"env_component_id": ""}, "runtime env_component_id must not be empty"),
        ({"model_component_id": "\n"}, "runtime model_component_id must not be empty"),
        ({"num_envs": 0}, "runtime num_envs must be greater than zero"),
        ({"num_envs": -2}, "runtime num_envs must be greater than zero"),
        (
            {"env_contract": env_pb2.EnvContract(action_space=spaces_pb2.SpaceSpec())},
            "runtime env_contract is missing observation_space",
        ),
        (
            {"env_contract": env_pb2.EnvContract(observation_space=spaces_pb2.SpaceSpec())},
            "runtime env_contract is missing action_space",
        ),
        ({"max_episodes": 0}, "runtime max_episodes must be greater than zero when set"),
        ({"max_episodes": -1}, "runtime max_episodes must be greater than zero when set"),
        (
            {"workflow_edition": "2099.01"},
            'runtime cannot drive workflow edition "2099.01"; this build implements "2026.06"',
        ),
        (
            {"workflow_edition": ' 2026.06 "x"\n'},
            'runtime cannot drive workflow edition " 2026.06 \\"x\\"\\n"; this build implements "2026.06"',
        ),
        (
            {"env_contract": contract(mode=7)},
            "unknown autoreset mode 7 on the wire; this build supports UNSPECIFIED, NEXT_STEP, SAME_STEP, "
            "DISABLED only",
        ),
    ],
)
def test_seed_rules_and_sentences(overrides, message) -> None:
    assert violation(single_env_spec(**overrides)) == message


def test_first_failure_wins_in_the_seed_order() -> None:
    spec = single_env_spec(
        route_id="", num_envs=0, max_episodes=0, workflow_edition="x", env_contract=contract(mode=9)
    )
    assert violation(spec) == "runtime route_id must not be empty"
    spec.route_id = "r"
    assert violation(spec) == "runtime num_envs must be greater than zero"
    spec.num_envs = 1
    assert violation(spec) == "runtime max_episodes must be greater than zero when set"
    spec.max_episodes = None
    assert "cannot drive workflow edition" in violation(spec)
    spec.workflow_edition = "2026.06"
    assert violation(spec).startswith("unknown autoreset mode 9")


def test_edition_is_compared_exactly() -> None:
    assert "2099.01" in violation(single_env_spec(workflow_edition="2099.01"))
    assert "cannot drive" in violation(single_env_spec(workflow_edition="2026.06 "))
    single_env_spec(workflow_edition="2026.06").validate()


@pytest.mark.parametrize("mode", [NEXT_STEP, SAME_STEP, DISABLED, UNSPECIFIED])
@pytest.mark.parametrize("num_envs", [1, 4])
def test_extensions_accept_same_step_and_vectorised_disabled(mode, num_envs) -> None:
    # The seed refuses SAME_STEP (any num_envs) and num_envs > 1 without NEXT_STEP; this port
    # drives both (module docstring of rlmesh_gym.runtime.spec).
    spec = single_env_spec(env_contract=contract(num_envs, mode), num_envs=num_envs)
    spec.validate()


def test_num_envs_must_match_a_stated_contract_lane_count() -> None:
    spec = single_env_spec(env_contract=contract(2, NEXT_STEP), num_envs=4)
    assert violation(spec) == (
        "runtime num_envs (4) does not match env_contract.num_envs (2); the driver tracks one slot "
        "per env lane, so build the spec with num_envs equal to the contract's lane count"
    )
    # A contract with num_envs == 0 states no lane count.
    single_env_spec(env_contract=contract(0, NEXT_STEP), num_envs=4).validate()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"base_seed": 2**63}, "runtime base_seed must fit a signed 64-bit integer; got 9223372036854775808"),
        ({"base_seed": -(2**63) - 1}, "runtime base_seed must fit a signed 64-bit integer"),
        ({"base_seed": 1.0}, "runtime base_seed must be an integer or None; got float 1.0"),
        ({"num_envs": 1.0}, "runtime num_envs must be an integer lane count; got float 1.0"),
        ({"max_episodes": True}, "runtime max_episodes must be an integer or None; got bool True"),
        ({"limits": {"envStepTimeoutMs": 5}}, "runtime limits must be a RuntimeLimits; got dict"),
        ({"env_contract": "contract"}, "runtime env_contract must be an EnvContract message; got str"),
        ({"session_id": None}, "runtime session_id must not be empty"),
    ],
)
def test_additions_refuse_bad_types_and_ranges(overrides, message) -> None:
    assert violation(single_env_spec(**overrides)).startswith(message)


def test_base_seed_extremes_are_valid() -> None:
    single_env_spec(base_seed=2**63 - 1).validate()
    single_env_spec(base_seed=-(2**63)).validate()


def test_defaults_and_helpers() -> None:
    spec = RuntimeSessionSpec(session_id="s", route_id="r", env_contract=contract(), num_envs=1)
    assert (spec.env_component_id, spec.model_component_id, spec.env_id) == ("env", "model", "")
    assert (spec.workflow_edition, spec.base_seed, spec.max_episodes) == ("2026.06", None, None)
    assert spec.close_env_on_end is True and spec.limits == RuntimeLimits()
    assert spec.route_context() == RuntimeRouteContext("r", "env", "model")
    assert spec.observation_space() == spaces_pb2.SpaceSpec() and spec.action_space() is not None
    empty = RuntimeSessionSpec(session_id="s", route_id="r", env_contract=env_pb2.EnvContract(), num_envs=1)
    assert empty.observation_space() is None and empty.action_space() is None


# -- limits ----------------------------------------------------------------------------------

DEFAULT_JSON = {
    "envConnectTimeoutMs": 60_000,
    "modelConnectTimeoutMs": 600_000,
    "configureRouteTimeoutMs": 600_000,
    "envResetTimeoutMs": 300_000,
    "modelPredictTimeoutMs": 300_000,
    "envStepTimeoutMs": 300_000,
    "serviceCloseTimeoutMs": 5_000,
    "telemetryWindowMs": 1_000,
}


def test_default_limits() -> None:
    limits = RuntimeLimits()
    assert (limits.env_reset_timeout, limits.model_predict_timeout, limits.env_step_timeout) == (
        300,
        300,
        300,
    )
    assert (limits.service_close_timeout, limits.telemetry_window) == (5.0, 1.0)
    assert (limits.env_connect_timeout, limits.model_connect_timeout, limits.configure_route_timeout) == (
        60.0,
        600.0,
        600.0,
    )
    assert limits.env_step_timeout_ms() == 300_000 and limits.env_reset_timeout_ms() == 300_000


def test_limits_serialise_to_the_eight_ms_keys() -> None:
    data = RuntimeLimits().to_json()
    assert data == DEFAULT_JSON
    assert "envConnectTimeout" not in data and "telemetryWindow" not in data
    assert json.loads(json.dumps(data)) == data


def test_limits_read_back_whole_milliseconds() -> None:
    keys = list(DEFAULT_JSON)
    limits = RuntimeLimits.from_json({key: index + 1 for index, key in enumerate(keys)})
    assert limits.to_json() == {key: index + 1 for index, key in enumerate(keys)}
    assert limits.env_connect_timeout == 0.001 and limits.telemetry_window == 0.008
    assert RuntimeLimits.from_json("{}") == RuntimeLimits()
    assert RuntimeLimits.from_json(b'{"envStepTimeoutMs": 1500}').env_step_timeout == 1.5


def test_unsuffixed_and_unknown_keys_are_rejected_by_name() -> None:
    with pytest.raises(ValueError, match=re.escape("unknown field `envConnectTimeout` in runtime limits")):
        RuntimeLimits.from_json({"envConnectTimeout": 5})
    with pytest.raises(ValueError, match="unknown field `bogusMs`"):
        RuntimeLimits.from_json('{"bogusMs": 1}')


@pytest.mark.parametrize("bad", [-1, 1.5, 5.0, "5", True, None, 2**64])
def test_limits_json_values_must_be_non_negative_integers(bad) -> None:
    with pytest.raises(
        ValueError, match=re.escape("runtime limits field `envStepTimeoutMs` must be a non-negative")
    ):
        RuntimeLimits.from_json({"envStepTimeoutMs": bad})


def test_limits_json_must_be_an_object() -> None:
    with pytest.raises(ValueError, match="must be an object; got list"):
        RuntimeLimits.from_json("[1]")


@pytest.mark.parametrize("bad", [-0.001, math.nan, -math.inf])
def test_limits_refuse_negative_and_nan(bad) -> None:
    with pytest.raises(ValueError, match="RuntimeLimits.model_predict_timeout must be a non-negative number"):
        RuntimeLimits(model_predict_timeout=bad)


def test_limits_refuse_non_numbers() -> None:
    with pytest.raises(
        TypeError, match="RuntimeLimits.telemetry_window must be a number of seconds; got str"
    ):
        RuntimeLimits(telemetry_window="1")  # type: ignore[arg-type]


def test_limits_saturate_and_allow_zero_and_infinity() -> None:
    limits = RuntimeLimits(env_step_timeout=math.inf, env_reset_timeout=0, service_close_timeout=1e30)
    assert limits.env_step_timeout_ms() == 2**63 - 1
    assert limits.env_reset_timeout_ms() == 0
    assert limits.to_json()["envStepTimeoutMs"] == 2**64 - 1
    assert limits.to_json()["serviceCloseTimeoutMs"] == 2**64 - 1
    # Whole milliseconds truncate, as Duration::as_millis.
    assert RuntimeLimits(env_step_timeout=0.0019999).env_step_timeout_ms() == 1
    assert RuntimeLimits(env_step_timeout=0.007).env_step_timeout_ms() == 7


def test_report_fields() -> None:
    report = RuntimeReport("s", "r", 3, 2)
    assert (report.session_id, report.route_id, report.total_steps, report.total_episodes) == ("s", "r", 3, 2)
    assert report.reason == "completed requested episodes"
