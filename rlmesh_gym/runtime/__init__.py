"""An asyncio port of the rlmesh runtime driver (``rlmesh-runtime`` 0.1.0-rc.1).

The driver runs one route of a session: it resets a :class:`RuntimeEnv`, sends each
observation to a :class:`RuntimeModel`, steps the env with the model's action, and reports
what happens to :class:`RuntimeHooks`::

    spec = RuntimeSessionSpec(session_id="s", route_id="r", env_contract=env.contract,
                              num_envs=env.num_envs, max_episodes=10)
    report = await RuntimeDriver(spec, env, model, hooks=MyHooks()).run()

Event classes live in :mod:`rlmesh_gym.runtime.events`, errors in
:mod:`rlmesh_gym.runtime.errors`. This package never imports gymnasium or torch.
"""

from rlmesh_gym.runtime import errors, events
from rlmesh_gym.runtime.autoreset import AutoresetMode
from rlmesh_gym.runtime.cancellation import CancellationToken
from rlmesh_gym.runtime.driver import RuntimeDriver
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
from rlmesh_gym.runtime.hooks import CompositeHooks, NoopRuntimeHooks, RuntimeHooks
from rlmesh_gym.runtime.message_form import MessageFormEnv, MessageFormModel
from rlmesh_gym.runtime.seams import (
    RuntimeEnv,
    RuntimeEnvReset,
    RuntimeEnvStep,
    RuntimeModel,
    RuntimeModelPrediction,
    is_runtime_env,
    is_runtime_model,
)
from rlmesh_gym.runtime.seeds import reset_seed
from rlmesh_gym.runtime.spec import RuntimeLimits, RuntimeReport, RuntimeSessionSpec

__all__ = [
    "AutoresetMode",
    "CancellationToken",
    "CompositeHooks",
    "EnvRpcError",
    "HookError",
    "HookFailedError",
    "InvalidSpecError",
    "MessageFormEnv",
    "MessageFormModel",
    "ModelRouteMismatchError",
    "ModelRpcError",
    "NoopRuntimeHooks",
    "OperationTimeoutError",
    "ProtocolError",
    "RouteCancelledError",
    "RuntimeDriver",
    "RuntimeDriverError",
    "RuntimeEnv",
    "RuntimeEnvReset",
    "RuntimeEnvStep",
    "RuntimeHooks",
    "RuntimeLimits",
    "RuntimeModel",
    "RuntimeModelPrediction",
    "RuntimeReport",
    "RuntimeSessionSpec",
    "errors",
    "events",
    "is_runtime_env",
    "is_runtime_model",
    "reset_seed",
]
