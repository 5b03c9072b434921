"""An asyncio port of the rlmesh runtime driver (``rlmesh-runtime`` 0.1.0-rc.1)."""

from rlmesh_gym.runtime.errors import (
    EnvRpcError,
    HookError,
    HookFailedError,
    InvalidSpecError,
    ModelRouteMismatchError,
    ModelRpcError,
    OperationTimeoutError,
    ProtocolError,
    RouteCancelledError,
    RuntimeDriverError,
)
from rlmesh_gym.runtime.seams import (
    RuntimeEnv,
    RuntimeEnvReset,
    RuntimeEnvStep,
    RuntimeModel,
    RuntimeModelPrediction,
)

__all__ = [
    "EnvRpcError",
    "HookError",
    "HookFailedError",
    "InvalidSpecError",
    "ModelRouteMismatchError",
    "ModelRpcError",
    "OperationTimeoutError",
    "ProtocolError",
    "RouteCancelledError",
    "RuntimeDriverError",
    "RuntimeEnv",
    "RuntimeEnvReset",
    "RuntimeEnvStep",
    "RuntimeModel",
    "RuntimeModelPrediction",
]
