"""gRPC stubs of the ``rlmesh.model.v1`` package (needs ``grpcio``)."""

from rlmesh_gym.proto._generated.rlmesh.model.v1.service_pb2_grpc import (
    ModelServiceStub,
    ModelServiceServicer,
    add_ModelServiceServicer_to_server,
)

__all__ = [
    "ModelServiceStub",
    "ModelServiceServicer",
    "add_ModelServiceServicer_to_server",
]
