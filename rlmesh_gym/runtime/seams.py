"""The two seams the driver runs against: :class:`RuntimeEnv` and :class:`RuntimeModel`.

Each seam has two forms:

* **the message form** (:class:`RuntimeEnv`, :class:`RuntimeModel`): values cross as the
  generated protobuf messages of :mod:`rlmesh_gym.proto`, exactly as in upstream
  rlmesh-runtime 0.1.0-rc.1; observation and action payloads are message bytes. Every peer across a
  process edge (the gRPC clients) and any user-written env or model speaks it.
* **the array form** (:class:`ArrayRuntimeEnv`, :class:`ArrayRuntimeModel`): the same calls
  with the same meaning, but payloads are :class:`~rlmesh_gym.spaces.batch.SpaceBatch` objects
  (numpy batches that encode to message bytes only if someone reads the bytes), rewards and
  masks are arrays, infos and ``final_info`` are the Python objects the env returned, and a
  finished episode is a :class:`CompletedEpisode`. The in-process adapters implement it.

The driver runs one loop on the array form; a message-form env or model is seen through
:mod:`rlmesh_gym.runtime.message_form`, the one place where the two forms convert. Each call
returns its result plus optional endpoint-local
:class:`~rlmesh_gym.proto.core_pb2.OperationTelemetry`.

Implementations may subclass the protocols to inherit the no-op ``close`` /
``close_route``; structural typing is enough otherwise. The driver awaits one call at a time
on each seam.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from rlmesh_gym.proto import core_pb2, env_pb2, model_pb2, spaces_pb2
from rlmesh_gym.spaces.batch import SpaceBatch

if TYPE_CHECKING:
    import numpy as np

_WrapperT = TypeVar("_WrapperT")

__all__ = [
    "ArrayPredictContext",
    "ArrayRuntimeEnv",
    "ArrayRuntimeModel",
    "BindableModel",
    "CompletedEpisode",
    "DrainsEpisodes",
    "EnvResetBatch",
    "EnvStepBatch",
    "ModelActionBatch",
    "RendersFrames",
    "RuntimeEnv",
    "RuntimeEnvReset",
    "RuntimeEnvStep",
    "RuntimeModel",
    "RuntimeModelPrediction",
    "RunsInline",
    "TracksEpisodeIds",
    "has_array_form",
    "is_array_env",
    "is_array_model",
    "is_runtime_env",
    "is_runtime_model",
    "passing_through",
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


_ENV_MESSAGE_FORM = ("reset", "step")
_ENV_ARRAY_FORM = ("reset_arrays", "step_arrays")
_MODEL_MESSAGE_FORM = ("predict",)
_MODEL_ARRAY_FORM = ("predict_arrays",)


def _has_coroutines(obj: object, names: tuple[str, ...]) -> bool:
    return all(inspect.iscoroutinefunction(getattr(obj, name, None)) for name in names)


def is_runtime_env(obj: object) -> bool:
    """Whether ``obj`` is a ready message-form env: ``reset`` and ``step`` are ``async def``
    methods and it has a ``contract`` (docs/design/runtime.md#seam-rule).

    ``isinstance(obj, RuntimeEnv)`` is not this test: a runtime-checkable protocol checks only
    that the names exist, and a plain ``gymnasium.Env`` has ``reset``, ``step`` and ``close`` too.

    >>> class GymnasiumLike:
    ...     def reset(self, seed=None): ...
    ...     def step(self, action): ...
    >>> class Env(GymnasiumLike):
    ...     contract = env_pb2.EnvContract()
    ...     async def reset(self, request): ...
    ...     async def step(self, request): ...
    >>> is_runtime_env(GymnasiumLike()), is_runtime_env(Env())
    (False, True)
    """
    return hasattr(obj, "contract") and _has_coroutines(obj, _ENV_MESSAGE_FORM)


def is_array_env(obj: object) -> bool:
    """Whether ``obj`` is a ready array-form env: ``reset_arrays`` and ``step_arrays`` are
    ``async def`` methods and it has a ``contract`` (e.g. :class:`~rlmesh_gym.envs.GymVectorEnv`)."""
    return hasattr(obj, "contract") and _has_coroutines(obj, _ENV_ARRAY_FORM)


def is_runtime_model(obj: object) -> bool:
    """Whether ``obj`` is a ready message-form model: ``predict`` is an ``async def`` method
    (docs/design/runtime.md#seam-rule). A plain callable or an ``nn.Module`` is not one.

    >>> class Model:
    ...     async def predict(self, request): ...
    >>> is_runtime_model(Model()), is_runtime_model(lambda observations: observations)
    (True, False)
    """
    return _has_coroutines(obj, _MODEL_MESSAGE_FORM)


def is_array_model(obj: object) -> bool:
    """Whether ``obj`` is a ready array-form model: ``predict_arrays`` is an ``async def`` method
    (e.g. :class:`~rlmesh_gym.policies.TorchPolicy`)."""
    return _has_coroutines(obj, _MODEL_ARRAY_FORM)


def has_array_form(peer: object) -> bool:
    """Whether an env or model has the array form (``reset_arrays``/``step_arrays`` or
    ``predict_arrays`` as ``async def`` methods); the driver uses it as it is, and sees any
    other peer through :mod:`rlmesh_gym.runtime.message_form`."""
    return _has_coroutines(peer, _ENV_ARRAY_FORM) or _has_coroutines(peer, _MODEL_ARRAY_FORM)


# -- optional capabilities ----------------------------------------------------------------------
# What an env or a model may offer beyond its seam. Callers test for one with ``isinstance`` and
# do without it otherwise (docs/design/runtime.md#seam-rule); GymVectorEnv has the env ones.


@runtime_checkable
class RunsInline(Protocol):
    """An in-process peer whose operations never suspend: each runs to its end inside the
    ``await`` on the caller's thread (the gymnasium and torch adapters, unless offloaded).

    The driver awaits such a peer plainly, with no timer or task around the call (nothing
    could interrupt it anyway), and applies its limit and the cancellation token when the call
    returns (docs/design/runtime.md#operations-and-their-limits). ``runs_inline`` may be
    ``False`` for an instance that does suspend (an env offloaded to a thread).
    """

    @property
    def runs_inline(self) -> bool: ...


@runtime_checkable
class DrainsEpisodes(Protocol):
    """An env that can end its running episodes on demand.

    ``drain_episodes()`` ends every running episode as truncated and returns them (after any
    interrupted ones); the env stays open and every lane is idle until the next reset. An env
    server sends them as ``CloseResponse.final_episodes``; ``evaluate()`` drops them when it
    reuses an env it did not build.
    """

    def drain_episodes(self) -> list[env_pb2.EpisodeMetadata]: ...


@runtime_checkable
class RendersFrames(Protocol):
    """An env that can render one RGB frame per lane (for recordings and an env server's Render).

    ``render_frames(lanes)`` returns one ``uint8`` array of shape ``(H, W, 3)`` or ``None`` per
    lane; with ``lanes``, only those need to be rendered.
    """

    def render_frames(self, lanes: Sequence[int] | None = None) -> list[np.ndarray | None]: ...


@runtime_checkable
class TracksEpisodeIds(Protocol):
    """An env that says which episode each lane is in (``""`` for a lane with none), so an env
    server can check upstream's rule that every lane stepped has an episode."""

    @property
    def episode_ids(self) -> Sequence[str]: ...


@runtime_checkable
class BindableModel(Protocol):
    """A model built without spaces that takes them later: ``bind(contract)`` configures it (in
    place, returning ``None``, or returning the bound model). A ``ModelServer`` binds it to each
    route's contract; ``resolve_policy`` binds it to the evaluated env's."""

    def bind(self, contract: env_pb2.EnvContract, /) -> object: ...


def _peer_of(wrapper: Any) -> Any:
    return getattr(wrapper, wrapper.wrapped_attribute)


# Each capability (and ``bind``, ``num_envs``) as a member that hands the call or read to the peer.
_PASSED_THROUGH: dict[str, Any] = {
    "drain_episodes": lambda self: _peer_of(self).drain_episodes(),
    "render_frames": lambda self, lanes=None: _peer_of(self).render_frames(lanes),
    "episode_ids": property(lambda self: _peer_of(self).episode_ids),
    "num_envs": property(lambda self: _peer_of(self).num_envs),
    "runs_inline": property(lambda self: _peer_of(self).runs_inline),
    "bind": lambda self, contract: _peer_of(self).bind(contract),
}
_PASSING_THROUGH: dict[tuple[type, frozenset[str]], type] = {}


def passing_through(base: type[_WrapperT], peer: object, names: Iterable[str]) -> type[_WrapperT]:
    """``base`` with a member for each of ``names`` that ``peer`` has, handing it to the peer
    (``getattr(self, base.wrapped_attribute)``): a wrapper's ``__new__`` returns an instance of it.

    Real members, not ``__getattr__``: from Python 3.12 an ``isinstance`` check against a
    runtime-checkable protocol (``RendersFrames``, ``RunsInline``, ...) looks only at the class.
    One class is made per set of members. ``names`` come from ``drain_episodes``,
    ``render_frames``, ``episode_ids``, ``num_envs``, ``runs_inline`` and ``bind``.
    """
    present = frozenset(name for name in names if hasattr(peer, name))
    key = (base, present)
    if key not in _PASSING_THROUGH:
        members = {name: _PASSED_THROUGH[name] for name in present}
        _PASSING_THROUGH[key] = type(base.__name__, (base,), {"__slots__": (), **members})
    return _PASSING_THROUGH[key]


# -- the array form ---------------------------------------------------------------------------


@dataclass(slots=True)
class CompletedEpisode:
    """A finished episode, as ``EpisodeMetadata`` describes it (``seed`` ``None`` when unseeded).

    ``final_info`` is what the env returned for the episode's last step: a mapping (the array
    form; converted to a ``MetaMap`` only at a process edge), a ``MetaMap`` (from a message-form
    env), or ``None``.
    """

    episode_id: str
    env_index: int
    step_count: int
    cumulative_reward: float
    terminated: bool
    truncated: bool
    start_timestamp_ns: int = 0
    end_timestamp_ns: int = 0
    duration_ms: int = 0
    seed: int | None = None
    final_info: Mapping[str, Any] | spaces_pb2.MetaMap | None = None
    final_info_message: spaces_pb2.MetaMap | None = field(default=None, repr=False, compare=False)
    """The ``MetaMap`` of ``final_info`` once something needed it (set by ``message_form``)."""


@dataclass(slots=True)
class EnvResetBatch:
    """What :meth:`ArrayRuntimeEnv.reset_arrays` returns: the full-width observation batch
    (``None`` for none), one episode id per lane, and the env's infos (``None`` for none)."""

    observation: SpaceBatch | None
    episode_ids: list[str]
    infos: Mapping[str, Any] | spaces_pb2.MetaMap | None = None
    telemetry: core_pb2.OperationTelemetry | None = None


@dataclass(slots=True)
class EnvStepBatch:
    """What :meth:`ArrayRuntimeEnv.step_arrays` returns.

    ``rewards`` (float64), ``terminated`` and ``truncated`` (bool) have one entry per lane;
    ``episode_ids`` are every lane's id after this step's rolls; ``completed`` lists the
    episodes that ended (interrupted ones first, then this step's in lane order).
    """

    observation: SpaceBatch | None
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    episode_ids: list[str]
    completed: list[CompletedEpisode]
    infos: Mapping[str, Any] | spaces_pb2.MetaMap | None = None
    telemetry: core_pb2.OperationTelemetry | None = None


@dataclass(slots=True)
class ModelActionBatch:
    """What :meth:`ArrayRuntimeModel.predict_arrays` returns: one action row per observation row."""

    action: SpaceBatch | None
    telemetry: core_pb2.OperationTelemetry | None = None


class ArrayPredictContext:
    """The predict context of one array-form predict call.

    ``session_id`` and ``route_id`` name the route (what a policy keys its per-route random
    stream by) and ``rows`` is the number of slots. :meth:`message` builds the full
    ``PredictContext`` (request id, every slot) the message form would have sent; it is exact
    only while the call runs, before the driver records the step.
    """

    __slots__ = ("session_id", "route_id", "rows", "_build")

    def __init__(self, session_id: str, route_id: str, rows: int, build: Any) -> None:
        self.session_id = session_id
        self.route_id = route_id
        self.rows = rows
        self._build = build

    def encoded(self) -> bytes:
        """The serialized ``PredictContext`` of this call (built now; canonical bytes)."""
        return self._build()

    def message(self) -> model_pb2.PredictContext:
        """The ``PredictContext`` of this call (built now)."""
        return model_pb2.PredictContext.FromString(self._build())

    def __repr__(self) -> str:
        return (
            f"ArrayPredictContext(session_id={self.session_id!r}, route_id={self.route_id!r}, "
            f"rows={self.rows})"
        )


@runtime_checkable
class ArrayRuntimeEnv(Protocol):
    """A :class:`RuntimeEnv` in array form (see the module docstring).

    ``reset_arrays(env_indices, seeds, options)`` resets every lane when ``env_indices`` is
    empty, else those lanes, with ``seeds`` empty or aligned with the lanes reset;
    ``step_arrays(actions)`` applies one action batch (``None`` for a request without one).
    Errors and ``close`` are as in :class:`RuntimeEnv`.
    """

    async def reset_arrays(
        self, env_indices: Sequence[int], seeds: Sequence[int], options: Mapping[str, Any] | None = None
    ) -> EnvResetBatch: ...

    async def step_arrays(self, actions: SpaceBatch | None) -> EnvStepBatch: ...

    async def close(self, timeout: float) -> None:
        """Release the environment within ``timeout`` seconds."""
        return None


@runtime_checkable
class ArrayRuntimeModel(Protocol):
    """A :class:`RuntimeModel` in array form: ``predict_arrays(observation, context)`` answers
    one action row per observation row (``observation`` is ``None`` for a request without
    one). There is no echoed context to check. Errors and ``close_route`` are as in
    :class:`RuntimeModel`."""

    async def predict_arrays(
        self, observation: SpaceBatch | None, context: ArrayPredictContext
    ) -> ModelActionBatch: ...

    async def close_route(self, request: model_pb2.CloseRouteRequest, timeout: float) -> None:
        """End the route within ``timeout`` seconds."""
        return None
