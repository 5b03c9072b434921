"""gRPC stubs of the ``rlmesh.env.v1`` package (needs ``grpcio``)."""

from rlmesh_gym.proto._generated.rlmesh.env.v1.service_pb2_grpc import (
    EnvServiceStub,
    EnvServiceServicer,
    add_EnvServiceServicer_to_server,
)

__all__ = [
    "EnvServiceStub",
    "EnvServiceServicer",
    "add_EnvServiceServicer_to_server",
]
