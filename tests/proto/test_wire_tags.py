"""Every protobuf tag the package writes by hand equals the one the message descriptors give."""

from __future__ import annotations

import pytest
from google.protobuf.descriptor import FieldDescriptor

from rlmesh_gym import _wire
from rlmesh_gym.proto import env_pb2, model_pb2, spaces_pb2

_FIXED64_TYPES = {FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED64}
_LENGTH_TYPES = {FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES, FieldDescriptor.TYPE_MESSAGE}

TAGS = [
    ("CONTEXT_SESSION_ID", model_pb2.PredictContext, "session_id"),
    ("CONTEXT_ROUTE_ID", model_pb2.PredictContext, "route_id"),
    ("CONTEXT_REQUEST_ID", model_pb2.PredictContext, "request_id"),
    ("CONTEXT_SLOTS", model_pb2.PredictContext, "slots"),
    ("SLOT_ENV_INDEX", model_pb2.PredictSlot, "env_index"),
    ("SLOT_EPISODE_ID", model_pb2.PredictSlot, "episode_id"),
    ("SLOT_STEP", model_pb2.PredictSlot, "step"),
    ("SLOT_RESET", model_pb2.PredictSlot, "reset"),
    ("STEP_REWARDS", env_pb2.StepResponse, "rewards"),
    ("STEP_TERMINATED_MASK", env_pb2.StepResponse, "terminated_mask"),
    ("STEP_TRUNCATED_MASK", env_pb2.StepResponse, "truncated_mask"),
    ("META_VALUE_INT", spaces_pb2.MetaValue, "int"),
    ("META_VALUE_FLOAT", spaces_pb2.MetaValue, "float"),
    ("META_VALUE_BOOL", spaces_pb2.MetaValue, "bool"),
    ("META_VALUE_LIST", spaces_pb2.MetaValue, "list"),
    ("META_LIST_ITEMS", spaces_pb2.MetaList, "items"),
]


def _descriptor_tag(field: FieldDescriptor) -> bytes:
    if field.type in _LENGTH_TYPES or field.is_packed:
        wire_type = _wire.LENGTH_DELIMITED
    elif field.type in _FIXED64_TYPES:
        wire_type = _wire.FIXED64
    else:
        wire_type = _wire.VARINT
    return _wire.varint((field.number << 3) | wire_type)


@pytest.mark.parametrize(("name", "message", "field"), TAGS, ids=[name for name, _, _ in TAGS])
def test_hand_written_tag_matches_the_descriptor(name, message, field):
    assert getattr(_wire, name) == _descriptor_tag(message.DESCRIPTOR.fields_by_name[field])


def test_every_tag_constant_is_checked():
    constants = {
        name
        for name in _wire.__all__
        if name.isupper() and name not in ("VARINT", "FIXED64", "LENGTH_DELIMITED")
    }
    assert constants == {name for name, _, _ in TAGS}


def test_a_message_with_every_hand_written_field_parses_as_written():
    # The field values below go through the tags: a wrong tag would parse as another field.
    slot = (
        _wire.SLOT_ENV_INDEX + b"\x02" + _wire.length_delimited(_wire.SLOT_EPISODE_ID, b"e") + _wire.SLOT_STEP
    )
    slot += b"\x05" + _wire.SLOT_RESET + b"\x01"
    data = (
        _wire.length_delimited(_wire.CONTEXT_SESSION_ID, b"s")
        + _wire.length_delimited(_wire.CONTEXT_ROUTE_ID, b"r")
        + _wire.length_delimited(_wire.CONTEXT_REQUEST_ID, b"q")
        + _wire.length_delimited(_wire.CONTEXT_SLOTS, slot)
    )
    expected = model_pb2.PredictContext(session_id="s", route_id="r", request_id="q")
    expected.slots.add(env_index=2, episode_id="e", step=5, reset=True)
    assert model_pb2.PredictContext.FromString(data) == expected
