"""The wire ``DType`` enum and its numpy counterparts (little-endian, fixed sizes)."""

from __future__ import annotations

import numpy as np

from rlmesh_gym.proto import spaces_pb2

# DType -> (name, little-endian numpy dtype of the wire bytes). bfloat16 has no numpy dtype:
# its wire elements are raw uint16 bit patterns (the top half of a float32).
WIRE_DTYPES: dict[spaces_pb2.DType, tuple[str, np.dtype]] = {
    spaces_pb2.D_TYPE_BOOL: ("bool", np.dtype("?")),
    spaces_pb2.D_TYPE_UINT8: ("uint8", np.dtype("u1")),
    spaces_pb2.D_TYPE_INT8: ("int8", np.dtype("i1")),
    spaces_pb2.D_TYPE_INT16: ("int16", np.dtype("<i2")),
    spaces_pb2.D_TYPE_UINT16: ("uint16", np.dtype("<u2")),
    spaces_pb2.D_TYPE_INT32: ("int32", np.dtype("<i4")),
    spaces_pb2.D_TYPE_UINT32: ("uint32", np.dtype("<u4")),
    spaces_pb2.D_TYPE_INT64: ("int64", np.dtype("<i8")),
    spaces_pb2.D_TYPE_UINT64: ("uint64", np.dtype("<u8")),
    spaces_pb2.D_TYPE_FLOAT16: ("float16", np.dtype("<f2")),
    spaces_pb2.D_TYPE_FLOAT32: ("float32", np.dtype("<f4")),
    spaces_pb2.D_TYPE_FLOAT64: ("float64", np.dtype("<f8")),
    spaces_pb2.D_TYPE_BFLOAT16: ("bfloat16", np.dtype("<u2")),
}

DTYPE_BY_NAME: dict[str, spaces_pb2.DType] = {name: code for code, (name, _) in WIRE_DTYPES.items()}

SUPPORTED_DTYPE_NAMES = ", ".join(DTYPE_BY_NAME)


def dtype_label(code: spaces_pb2.DType) -> str:
    """The readable name of a ``DType`` value, e.g. ``float32`` or ``D_TYPE(99)``."""
    entry = WIRE_DTYPES.get(code)
    if entry is not None:
        return entry[0]
    if code == spaces_pb2.D_TYPE_UNSPECIFIED:
        return "unspecified"
    return f"D_TYPE({code})"
