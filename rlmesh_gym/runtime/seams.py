"""The two seams the driver runs against: :class:`RuntimeEnv` and :class:`RuntimeModel`.

Values cross them as the generated protobuf messages of :mod:`rlmesh_gym.proto`, exactly as
in upstream ``rlmesh-runtime``; observation and action payloads are message bytes
(:mod:`rlmesh_gym.spaces.codec`). Each call returns the response plus optional
endpoint-local :class:`~rlmesh_gym.proto.core_pb2.OperationTelemetry`.

Implementations may subclass the protocols to inherit the no-op ``close`` /
``close_route``; structural typing is enough otherwise. The driver awaits one call at a time
on each seam.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from rlmesh_gym.proto import core_pb2, env_pb2, model_pb2

__all__ = [
    "RuntimeEnv",
    "RuntimeEnvReset",
    "RuntimeEnvStep",
    "RuntimeModel",
    "RuntimeModelPrediction",
]


@dataclass(slots=True)
class RuntimeEnvReset:
    """What :meth:`RuntimeEnv.reset` returns."""

    response: env_pb2.ResetResponse
    telemetry: core_pb2.OperationTelemetry | None = None


@dataclass(slots=True)
class RuntimeEnvStep:
    """What :meth:`RuntimeEnv.step` returns."""

    response: env_pb2.StepResponse
    telemetry: core_pb2.OperationTelemetry | None = None


@dataclass(slots=True)
class RuntimeModelPrediction:
    """What :meth:`RuntimeModel.predict` returns."""

    response: model_pb2.PredictResponse
    telemetry: core_pb2.OperationTelemetry | None = None


@runtime_checkable
class RuntimeEnv(Protocol):
    """An environment of ``num_envs`` lanes, driven one whole-vector call at a time.

    Contract:

    * ``reset`` resets every lane when ``request.env_indices`` is empty, else only those
      lanes, with ``request.seeds`` empty (unseeded) or aligned with the lanes reset. The
      response carries a full-width observation batch and one episode id per lane.
    * ``step`` applies one batched action (``request.action``, N rows) and reports rewards,
      masks, ``episode_ids`` per lane and every episode that ended in ``completed_episodes``.
    * Failures raise :class:`~rlmesh_gym.runtime.errors.RuntimeDriverError` (normally
      :class:`~rlmesh_gym.runtime.errors.EnvRpcError`).
    * ``close(timeout)`` releases the env within ``timeout`` seconds. An exception reports a
      failed close; the driver logs it and finishes its shutdown. The default does nothing.
    """

    async def reset(self, request: env_pb2.ResetRequest) -> RuntimeEnvReset: ...

    async def step(self, request: env_pb2.StepRequest) -> RuntimeEnvStep: ...

    async def close(self, timeout: float) -> None:
        """Release the environment within ``timeout`` seconds."""
        return None


@runtime_checkable
class RuntimeModel(Protocol):
    """A model serving one route: one batched action per batched observation.

    Contract:

    * ``predict`` answers with an action batch of one row per ``request.context.slots``
      entry and a ``context`` equal to the request's (the driver fails the session with
      :class:`~rlmesh_gym.runtime.errors.ModelRouteMismatchError` otherwise).
    * Failures raise :class:`~rlmesh_gym.runtime.errors.RuntimeDriverError` (normally
      :class:`~rlmesh_gym.runtime.errors.ModelRpcError`).
    * ``close_route(request, timeout)`` ends the route within ``timeout`` seconds, releasing
      only what the route owns. An exception reports a failed close; the driver logs it. The
      default does nothing.
    """

    async def predict(self, request: model_pb2.PredictRequest) -> RuntimeModelPrediction: ...

    async def close_route(self, request: model_pb2.CloseRouteRequest, timeout: float) -> None:
        """End the route within ``timeout`` seconds."""
        return None
