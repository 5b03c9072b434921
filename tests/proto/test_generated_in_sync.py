"""The committed protobuf modules match the .proto sources and docs/design/wire.md#schema."""

import subprocess
import sys
from pathlib import Path

from rlmesh_gym.proto import env_pb2, model_pb2, spaces_pb2

ROOT = Path(__file__).resolve().parents[2]


def test_generated_modules_match_proto_sources():
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "generate_proto.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_full_names_and_field_numbers_follow_the_wire_spec():
    fields = {f.name: f.number for f in env_pb2.HandshakeResponse.DESCRIPTOR.fields}
    assert fields["supported_workflow_editions"] == 8 and fields["selected_edition_status"] == 12
    fields = {f.name: f.number for f in model_pb2.HandshakeResponse.DESCRIPTOR.fields}
    assert fields["supported_workflow_editions"] == 7 and fields["selected_edition_status"] == 11
    assert {f.name: f.number for f in model_pb2.JoinRequest.DESCRIPTOR.fields}["request_id"] == 20
    assert {f.name: f.number for f in env_pb2.JoinRequest.DESCRIPTOR.fields}["request_id"] == 10
    assert env_pb2.EnvContract.DESCRIPTOR.full_name == "rlmesh.env.v1.EnvContract"
    assert spaces_pb2.SpaceSpec.DESCRIPTOR.fields_by_name["tuple"].number == 21
    assert env_pb2.EpisodeMetadata.DESCRIPTOR.fields_by_name["seed"].has_presence


def test_known_bytes_of_a_step_request():
    # JoinRequest{step{action{bytes{data=02..}}}, request_id="s2"} built by hand from the schema's tags.
    request = env_pb2.JoinRequest(request_id="s2")
    request.step.action.bytes.data = bytes.fromhex("0200000000000000")
    assert request.SerializeToString().hex() == "120e0a0c0a0a0a080200000000000000" + "5202" + b"s2".hex()


def test_service_paths():
    from rlmesh_gym.proto import env_pb2_grpc, model_pb2_grpc

    assert callable(env_pb2_grpc.add_EnvServiceServicer_to_server)
    assert callable(model_pb2_grpc.add_ModelServiceServicer_to_server)
    env_service = env_pb2.JoinRequest.DESCRIPTOR.file.pool.FindServiceByName("rlmesh.env.v1.EnvService")
    assert [m.name for m in env_service.methods] == ["Handshake", "Join", "Shutdown"]
    model_service = env_pb2.JoinRequest.DESCRIPTOR.file.pool.FindServiceByName("rlmesh.model.v1.ModelService")
    assert model_service.methods_by_name["Join"].client_streaming
