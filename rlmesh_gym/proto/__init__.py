"""The rlmesh wire schema (``rlmesh.protocol.v1``) as Python protobuf modules.

One module per protobuf package, so the rest of the code never spells generated paths::

    from rlmesh_gym.proto import env_pb2, spaces_pb2

    request = env_pb2.ResetRequest(seeds=[1, 2])

The ``.proto`` sources live in ``schema/``; ``scripts/generate_proto.py`` regenerates
``_generated/`` from them. ``env_pb2_grpc`` and ``model_pb2_grpc`` (the service stubs) are
imported on first access because they need the optional ``grpcio`` dependency.
"""

from __future__ import annotations

from rlmesh_gym import _lazy
from rlmesh_gym.proto._generated import common_pb2, core_pb2, env_pb2, model_pb2, spaces_pb2

__all__ = ["common_pb2", "core_pb2", "env_pb2", "env_pb2_grpc", "model_pb2", "model_pb2_grpc", "spaces_pb2"]

# The service stubs import grpcio (optional): loaded on first access.
__getattr__ = _lazy.lazy_exports(
    __name__,
    {"env_pb2_grpc": "rlmesh_gym.proto._generated", "model_pb2_grpc": "rlmesh_gym.proto._generated"},
)[0]
