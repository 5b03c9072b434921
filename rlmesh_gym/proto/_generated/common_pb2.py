"""Every message and enum of the ``rlmesh.common.v1`` protobuf package."""

from rlmesh_gym.proto._generated.rlmesh.common.v1.payload_pb2 import (
    MessageBytes,
)

__all__ = [
    "MessageBytes",
]
