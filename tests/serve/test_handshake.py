"""Handshake rules and texts against a live rlmesh 0.1.0b3 server; addresses, tokens, PNG frames."""

from __future__ import annotations

import warnings

import grpc
import gymnasium as gym
import numpy as np
import pytest
import rlmesh
from _serve_fakes import decode_png

from rlmesh_gym.proto import env_pb2, env_pb2_grpc, model_pb2
from rlmesh_gym.serve.auth import validate_token
from rlmesh_gym.serve.endpoint import InsecureBindWarning, parse_address, warn_if_exposed
from rlmesh_gym.serve.handshake import (
    EDITION_PINS,
    check_handshake_response,
    evaluate_handshake,
    handshake_request,
    release_channel,
    resolve_edition_pin,
)
from rlmesh_gym.serve.png import encode_png

B3, RC1 = EDITION_PINS["b3"], EDITION_PINS["rc1"]

VARIANTS = {
    "matching": {},
    "rc1 pin": {"offered_edition_spec_sha256": RC1},
    "rc1 pin, rc1 version": {"offered_edition_spec_sha256": RC1, "client_version": "0.1.0-rc.1"},
    "sealed, wrong pin": {"offered_edition_spec_sha256": RC1, "offered_edition_status": "sealed"},
    "no pin, no status": {"offered_edition_spec_sha256": "", "offered_edition_status": ""},
    "no editions": {"supported_workflow_editions": []},
    "unknown edition": {"supported_workflow_editions": ["2099.01"]},
    "unknown and known edition": {"supported_workflow_editions": ["2099.01", "2026.06"]},
    "padded edition": {"supported_workflow_editions": [" 2026.06 "]},
    "tab-padded edition and another": {"supported_workflow_editions": ["2026.06\t", "2027.01"]},
    "padded unknown editions": {"supported_workflow_editions": ["x ", " y"]},
    "blank edition": {"supported_workflow_editions": ["  "]},
    "rc2 generation": {"protocol_generation": "rlmesh-wire-v1"},
    "padded generation": {"protocol_generation": "  rlmesh.protocol.v1 "},
    "no generation": {"protocol_generation": ""},
}


def request_variant(changes: dict) -> env_pb2.HandshakeRequest:
    request = handshake_request("env", B3)
    request.client_version = "0.1.0"
    for field, value in changes.items():
        if field == "supported_workflow_editions":
            request.ClearField(field)
            request.supported_workflow_editions.extend(value)
        else:
            setattr(request, field, value)
    return request


@pytest.fixture(scope="module")
def b3_answers() -> dict[str, env_pb2.HandshakeResponse]:
    server = rlmesh.EnvServer(gym.make("CartPole-v1"), "127.0.0.1:0")
    server.start()
    try:
        with grpc.insecure_channel(server.address.removeprefix("tcp://")) as channel:
            stub = env_pb2_grpc.EnvServiceStub(channel)
            return {
                name: stub.Handshake(request_variant(changes), timeout=10)
                for name, changes in VARIANTS.items()
            }
    finally:
        server.shutdown()
        server.wait(10.0)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_our_verdict_and_text_match_the_b3_server(name, b3_answers):
    upstream = b3_answers[name]
    ours = evaluate_handshake(request_variant(VARIANTS[name]), B3, server_version="0.1.0-beta.3")
    assert ours.compatible == upstream.compatible
    assert ours.error_message == upstream.error_message
    assert ours.selected_edition == upstream.selected_workflow_edition


def test_our_env_server_accepts_a_padded_edition_offer():
    from _serve_fakes import CountingEnv, run

    from rlmesh_gym.serve import EnvServer

    async def scenario():
        async with EnvServer(CountingEnv()) as server, grpc.aio.insecure_channel(server.address) as channel:
            stub = env_pb2_grpc.EnvServiceStub(channel)
            return await stub.Handshake(request_variant(VARIANTS["padded edition"]), timeout=10)

    answer = run(scenario())
    assert answer.compatible, answer.error_message
    assert answer.selected_workflow_edition == "2026.06"


def test_the_pin_message_names_both_builds():
    verdict = evaluate_handshake(request_variant({"offered_edition_spec_sha256": RC1}), B3)
    assert verdict.error_message == (
        "provisional workflow edition 2026.06 checksum differs between peers: "
        "this build 0.1.0 (release) spec c03b0c916521 vs peer 0.1.0 (release) spec 3827ecdfb7ad; "
        "run matching releases"
    )
    assert [release_channel(v) for v in ("0.1.0", "0.1.0-beta.3", "0.1.0-rc.1")] == [
        "release",
        "beta",
        "beta",
    ]


def test_edition_pins_resolve_by_name_or_literal_sha():
    assert resolve_edition_pin("b3") == B3 and resolve_edition_pin("rc1") == RC1
    assert resolve_edition_pin("ab" * 32) == "ab" * 32
    for bad in ("b4", "", "AB" * 32, "ab" * 31):
        with pytest.raises(ValueError, match="unknown edition pin"):
            resolve_edition_pin(bad)


def test_clients_check_what_the_b3_clients_check():
    good = env_pb2.HandshakeResponse(
        compatible=True,
        server_protocol_generation="rlmesh.protocol.v1",
        env_contract=env_pb2.EnvContract(),
        selected_workflow_edition="2026.06",
        selected_edition_spec_sha256=B3,
        selected_edition_status="provisional",
    )
    good.env_contract.observation_space.discrete.n = 2
    good.env_contract.action_space.discrete.n = 2
    assert check_handshake_response(good, B3) is None

    def variant(**changes) -> str | None:
        response = env_pb2.HandshakeResponse()
        response.CopyFrom(good)
        for field, value in changes.items():
            if value is None:
                response.ClearField(field)
            else:
                setattr(response, field, value)
        return check_handshake_response(response, B3)

    assert variant(compatible=False, error_message="nope") == "server refused the handshake: nope"
    assert "not compatible with client rlmesh.protocol.v1" in variant(
        server_protocol_generation="rlmesh-wire-v1"
    )
    assert "selected workflow edition ''" in variant(selected_workflow_edition="")
    assert "checksum differs between peers" in variant(selected_edition_spec_sha256=RC1)
    assert "checksum differs between peers" in variant(
        selected_edition_spec_sha256="", selected_edition_status=""
    )
    assert variant(env_contract=None) == "no env_contract in response"
    missing_action = env_pb2.HandshakeResponse()
    missing_action.CopyFrom(good)
    missing_action.env_contract.ClearField("action_space")
    assert check_handshake_response(missing_action, B3) == "env_contract has no action_space"
    model = model_pb2.HandshakeResponse(
        compatible=True,
        server_protocol_generation="rlmesh.protocol.v1",
        selected_workflow_edition="2026.06",
        selected_edition_spec_sha256=B3,
    )
    assert check_handshake_response(model, B3) is None


def test_model_and_env_requests_use_their_roles_capabilities():
    env, model = handshake_request("env", B3), handshake_request("model", RC1)
    assert isinstance(env, env_pb2.HandshakeRequest) and isinstance(model, model_pb2.HandshakeRequest)
    assert set(env.capabilities) == {"rlmesh.env.service.v1", "rlmesh.spaces.core.v1"}
    assert "rlmesh.model.concurrent_predict.v1" in model.capabilities
    assert model.offered_edition_spec_sha256 == RC1 and list(model.supported_workflow_editions) == ["2026.06"]
    with pytest.raises(ValueError, match="role"):
        handshake_request("router", B3)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:50051", ("127.0.0.1", 50051)),
        ("tcp://0.0.0.0:0", ("0.0.0.0", 0)),
        ("[::1]:7", ("::1", 7)),
        ("localhost:80", ("localhost", 80)),
    ],
)
def test_addresses_parse(text, expected):
    assert parse_address(text) == expected


@pytest.mark.parametrize(
    "text", ["", "50051", "host", "host:port", "host:70000", "unix:///tmp/x.sock", "[::1]7"]
)
def test_bad_addresses_are_named(text):
    with pytest.raises(ValueError, match="address"):
        parse_address(text)


def test_exposed_bind_without_token_warns_only_then():
    with pytest.warns(InsecureBindWarning, match="0.0.0.0.*no token"):
        assert warn_if_exposed("0.0.0.0", None, "env") is not None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_if_exposed("0.0.0.0", "t", "env") is None
        assert warn_if_exposed("127.0.0.1", None, "env") is None
        assert warn_if_exposed("::1", None, "model") is None


def test_tokens_must_be_sendable_as_metadata():
    assert validate_token(None) is None and validate_token("") is None
    assert validate_token("abc-DEF_123.~") == "abc-DEF_123.~"
    for bad in ("tab\there", " padded", "caf\u00e9", "line\n"):
        with pytest.raises(ValueError, match="printable ASCII"):
            validate_token(bad)


@pytest.mark.parametrize(
    ("shape", "color"), [((5, 7), 0), ((5, 7, 3), 2), ((5, 7, 4), 6), ((3, 5, 7), 2), ((4, 5, 7), 6)]
)
def test_png_frames_round_trip(shape, color):
    frame = np.arange(np.prod(shape), dtype=np.int64).reshape(shape) % 251
    header, pixels = decode_png(encode_png(frame))
    assert header == (7, 5, 8, color)
    if len(shape) == 2:
        expected = frame[..., None]
    elif shape[-1] in (3, 4):
        expected = frame
    else:
        expected = np.moveaxis(frame, 0, -1)  # channel-first input
    np.testing.assert_array_equal(pixels, expected.astype(np.uint8))


@pytest.mark.parametrize("shape", [(5,), (2, 5, 7), (5, 7, 2), (5, 7, 1), (0, 7, 3), (1, 2, 3, 4)])
def test_png_refuses_non_images(shape):
    with pytest.raises(ValueError, match="cannot encode a frame of shape"):
        encode_png(np.zeros(shape, np.uint8))


def test_client_keepalive_pings_are_slower_than_any_server_refuses():
    from rlmesh_gym.serve.endpoint import (
        CLIENT_KEEPALIVE_TIME_MS,
        SERVER_MIN_PING_INTERVAL_MS,
        channel_options,
        server_options,
    )

    client = dict(channel_options(4096))
    server = dict(server_options(4096))
    assert client["grpc.keepalive_time_ms"] == CLIENT_KEEPALIVE_TIME_MS == 300_000
    assert client["grpc.keepalive_timeout_ms"] == 20_000
    assert client["grpc.keepalive_permit_without_calls"] == 0
    # gRPC servers' default minimum ping interval on a quiet connection is 5 minutes; ours is lower.
    assert server["grpc.http2.min_recv_ping_interval_without_data_ms"] == SERVER_MIN_PING_INTERVAL_MS
    assert SERVER_MIN_PING_INTERVAL_MS < CLIENT_KEEPALIVE_TIME_MS <= 300_000
