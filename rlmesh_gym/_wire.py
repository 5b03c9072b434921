"""Hand-encoded protobuf wire pieces for the hot paths, and every field tag they use.

Building a few fields as bytes and parsing them in one C call is cheaper than setting them
one by one from Python. Every tag written by hand anywhere in the package is named here, and
``tests/proto/test_wire_tags.py`` derives each one from the message descriptors, so a schema
change cannot leave a stale tag behind.
"""

from __future__ import annotations

__all__ = [
    "CONTEXT_REQUEST_ID",
    "CONTEXT_ROUTE_ID",
    "CONTEXT_SESSION_ID",
    "CONTEXT_SLOTS",
    "FIXED64",
    "LENGTH_DELIMITED",
    "META_LIST_ITEMS",
    "META_VALUE_BOOL",
    "META_VALUE_FLOAT",
    "META_VALUE_INT",
    "META_VALUE_LIST",
    "SLOT_ENV_INDEX",
    "SLOT_EPISODE_ID",
    "SLOT_RESET",
    "SLOT_STEP",
    "STEP_REWARDS",
    "STEP_TERMINATED_MASK",
    "STEP_TRUNCATED_MASK",
    "VARINT",
    "length_delimited",
    "tag",
    "varint",
]


def varint(value: int) -> bytes:
    """Protobuf base-128 varint of a non-negative integer.

    >>> varint(1), varint(300)
    (b'\\x01', b'\\xac\\x02')
    """
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def length_delimited(tag: bytes, data: bytes) -> bytes:
    """A length-delimited field, always written (as a repeated or submessage field is)."""
    return tag + varint(len(data)) + data


VARINT, FIXED64, LENGTH_DELIMITED = 0, 1, 2
"""Protobuf wire types."""


def tag(field_number: int, wire_type: int) -> bytes:
    """The encoded key of a field: ``(field_number << 3) | wire_type`` as a varint."""
    return varint((field_number << 3) | wire_type)


# rlmesh.model.v1.PredictContext and PredictSlot (runtime.state builds contexts as bytes).
CONTEXT_SESSION_ID = tag(1, LENGTH_DELIMITED)
CONTEXT_ROUTE_ID = tag(2, LENGTH_DELIMITED)
CONTEXT_REQUEST_ID = tag(3, LENGTH_DELIMITED)
CONTEXT_SLOTS = tag(4, LENGTH_DELIMITED)
SLOT_ENV_INDEX = tag(1, VARINT)
SLOT_EPISODE_ID = tag(2, LENGTH_DELIMITED)
SLOT_STEP = tag(3, VARINT)
SLOT_RESET = tag(4, VARINT)

# rlmesh.env.v1.StepResponse (runtime.message_form writes rewards and masks as bytes).
STEP_REWARDS = tag(2, LENGTH_DELIMITED)  # packed doubles
STEP_TERMINATED_MASK = tag(3, LENGTH_DELIMITED)
STEP_TRUNCATED_MASK = tag(4, LENGTH_DELIMITED)

# rlmesh.spaces.v1.MetaValue and MetaList (spaces.meta writes numeric arrays as bytes).
META_VALUE_INT = tag(1, VARINT)
META_VALUE_FLOAT = tag(2, FIXED64)
META_VALUE_BOOL = tag(4, VARINT)
META_VALUE_LIST = tag(6, LENGTH_DELIMITED)
META_LIST_ITEMS = tag(1, LENGTH_DELIMITED)
