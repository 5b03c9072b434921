"""Every message and enum of the ``rlmesh.core.v1`` protobuf package."""

from rlmesh_gym.proto._generated.rlmesh.core.v1.telemetry_pb2 import (
    OperationMetric,
    OperationTelemetry,
)

__all__ = [
    "OperationMetric",
    "OperationTelemetry",
]
