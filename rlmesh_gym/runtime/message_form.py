"""The one place where the array form of the seams and their message form convert.

* Array results to messages: :func:`episode_metadata`, :func:`reset_response`,
  :func:`step_response` (used by :class:`MessageFormEnv`, so a gRPC server or a user calling
  ``MessageFormEnv(env).step(request)`` gets exactly the bytes the array form describes, and
  by the driver's events when a hook reads a message).
* Array-form adapters seen as messages: :class:`MessageFormEnv` / :class:`MessageFormModel`
  (:func:`as_message_env` / :func:`as_message_model`) turn any array-form env or model (the
  in-process adapters implement only that form) into a ``RuntimeEnv``/``RuntimeModel``.
* Messages to array results: :func:`completed_episode`, :func:`reset_batch`,
  :class:`MessageStepBatch`, and the two ports :class:`MessageEnvPort` / :class:`MessageModelPort`,
  through which the driver drives a message-form env or model (a remote peer, or a user's own
  ``RuntimeEnv``/``RuntimeModel``) with the same loop as an in-process one.

Infos and ``final_info`` become ``MetaMap`` messages here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlmesh_gym._wire import STEP_REWARDS, STEP_TERMINATED_MASK, STEP_TRUNCATED_MASK, varint
from rlmesh_gym.proto import core_pb2, env_pb2, model_pb2, spaces_pb2
from rlmesh_gym.runtime.errors import EnvRpcError, ModelRouteMismatchError, ModelRpcError, ProtocolError
from rlmesh_gym.runtime.guarded import require_awaitable
from rlmesh_gym.runtime.seams import (
    ArrayPredictContext,
    ArrayRuntimeEnv,
    ArrayRuntimeModel,
    CompletedEpisode,
    EnvResetBatch,
    EnvStepBatch,
    ModelActionBatch,
    RuntimeEnv,
    RuntimeEnvReset,
    RuntimeEnvStep,
    RuntimeModel,
    RuntimeModelPrediction,
    is_array_env,
    is_array_model,
    is_runtime_env,
    is_runtime_model,
    passing_through,
)
from rlmesh_gym.spaces.batch import SpaceBatch
from rlmesh_gym.spaces.codec import CodecError, SpaceCodec
from rlmesh_gym.spaces.meta import MetaConversionError, from_meta_map, to_meta_map

__all__ = [
    "MessageEnvPort",
    "MessageFormEnv",
    "MessageFormModel",
    "MessageModelPort",
    "MessageStepBatch",
    "as_message_env",
    "as_message_model",
    "completed_episode",
    "detached",
    "episode_metadata",
    "expect_result",
    "final_info_message",
    "meta_map",
    "reset_batch",
    "reset_response",
    "step_message",
    "step_response",
]

_MetaMap = spaces_pb2.MetaMap
_StepResponse = env_pb2.StepResponse
_WIRE_FLOAT64 = np.dtype("<f8")
_BOOL = np.dtype(np.bool_)


def expect_result(result: object, wrapper: type, response_type: type, operation: str) -> None:
    """Raise ``ProtocolError`` unless ``result`` is a ``wrapper`` holding a ``response_type``."""
    if not isinstance(result, wrapper):
        raise ProtocolError(f"{operation} returned {type(result).__name__}; expected {wrapper.__name__}")
    response = result.response  # type: ignore[attr-defined]
    if not isinstance(response, response_type):
        raise ProtocolError(
            f"{operation} returned a {wrapper.__name__} whose response is {type(response).__name__}; "
            f"expected {response_type.__name__}"
        )


def detached(telemetry: core_pb2.OperationTelemetry | None) -> core_pb2.OperationTelemetry | None:
    """A copy of an array result's telemetry, for a message result the caller may keep."""
    if telemetry is None:
        return None
    copy = core_pb2.OperationTelemetry()
    copy.CopyFrom(telemetry)
    return copy


def meta_map(value: Mapping[str, Any] | _MetaMap | None, name: str) -> _MetaMap | None:
    """``value`` as a ``MetaMap`` (``None`` for ``None`` or an empty mapping)."""
    if value is None or type(value) is _MetaMap:
        return value
    if not value:
        return None
    return to_meta_map(value, name=name)


# -- array form -> message form ----------------------------------------------------------------


def episode_metadata(
    episode: CompletedEpisode, into: env_pb2.EpisodeMetadata | None = None
) -> env_pb2.EpisodeMetadata:
    """The ``EpisodeMetadata`` of ``episode`` (written into ``into`` when given)."""
    metadata = env_pb2.EpisodeMetadata() if into is None else into
    metadata.episode_id = episode.episode_id
    metadata.env_index = episode.env_index
    metadata.step_count = episode.step_count
    metadata.cumulative_reward = episode.cumulative_reward
    metadata.terminated = episode.terminated
    metadata.truncated = episode.truncated
    metadata.start_timestamp_ns = episode.start_timestamp_ns
    metadata.end_timestamp_ns = episode.end_timestamp_ns
    metadata.duration_ms = episode.duration_ms
    if episode.seed is not None:
        metadata.seed = episode.seed
    final_info = final_info_message(episode)
    if final_info is not None:
        metadata.final_info.CopyFrom(final_info)
    return metadata


def final_info_message(episode: CompletedEpisode) -> spaces_pb2.MetaMap | None:
    """The ``MetaMap`` of ``episode.final_info``, converted once per episode."""
    message = episode.final_info_message
    if message is None and episode.final_info is not None:
        message = episode.final_info_message = meta_map(episode.final_info, "final_info")
    return message


def reset_response(batch: EnvResetBatch) -> env_pb2.ResetResponse:
    """The ``ResetResponse`` of an array-form reset."""
    response = env_pb2.ResetResponse()
    if batch.observation is not None:
        response.observation.bytes.data = batch.observation.data
    infos = meta_map(batch.infos, "infos")
    if infos is not None:
        response.infos.CopyFrom(infos)
    response.episode_ids.extend(batch.episode_ids)
    return response


def step_response(batch: EnvStepBatch) -> env_pb2.StepResponse:
    """The ``StepResponse`` of an array-form step (field for field what a message env sends)."""
    rewards = np.ascontiguousarray(batch.rewards, dtype=_WIRE_FLOAT64)
    terminated = np.ascontiguousarray(batch.terminated, dtype=_BOOL).tobytes()
    truncated = np.ascontiguousarray(batch.truncated, dtype=_BOOL).tobytes()
    # Rewards (2, packed doubles) and masks (3, 4) as encoded fields in one parse: cheaper than
    # three field sets and a list conversion.
    parts: list[bytes] = []
    if rewards.size:
        parts += (STEP_REWARDS, varint(rewards.nbytes), rewards.tobytes())
    if terminated:
        parts += (STEP_TERMINATED_MASK, varint(len(terminated)), terminated)
    if truncated:
        parts += (STEP_TRUNCATED_MASK, varint(len(truncated)), truncated)
    response = _StepResponse.FromString(b"".join(parts))
    if batch.observation is not None:
        response.observation.bytes.data = batch.observation.data
    completed = response.completed_episodes
    for episode in batch.completed:
        episode_metadata(episode, completed.add())
    response.episode_ids.extend(batch.episode_ids)
    infos = meta_map(batch.infos, "infos")
    if infos is not None:
        response.infos.CopyFrom(infos)
    return response


# -- message form -> array form ----------------------------------------------------------------


def completed_episode(metadata: env_pb2.EpisodeMetadata) -> CompletedEpisode:
    """The :class:`CompletedEpisode` of an ``EpisodeMetadata`` (``final_info`` stays a ``MetaMap``)."""
    return CompletedEpisode(
        metadata.episode_id,
        metadata.env_index,
        metadata.step_count,
        metadata.cumulative_reward,
        metadata.terminated,
        metadata.truncated,
        metadata.start_timestamp_ns,
        metadata.end_timestamp_ns,
        metadata.duration_ms,
        metadata.seed if metadata.HasField("seed") else None,
        metadata.final_info if metadata.HasField("final_info") else None,
    )


def _payload(value: Any, codec: SpaceCodec | None, rows: int) -> SpaceBatch | None:
    if not value.HasField("bytes"):
        return None
    # Without a codec only message-form peers run, and they pass the bytes on undecoded.
    return SpaceBatch.from_bytes(codec, value.bytes.data, rows)  # type: ignore[arg-type]


def reset_batch(response: env_pb2.ResetResponse, codec: SpaceCodec | None, rows: int) -> EnvResetBatch:
    """The array form of a ``ResetResponse`` (payload still bytes, decoded on first use)."""
    return EnvResetBatch(
        _payload(response.observation, codec, rows),
        list(response.episode_ids),
        response.infos if response.HasField("infos") else None,
    )


_UNREAD: Any = object()


def _converted_on_read(slot: Any, convert: Any) -> property:
    """A property over the dataclass slot ``slot``: ``convert(self.response)`` on first read."""

    def read(self: MessageStepBatch) -> Any:
        value = slot.__get__(self)
        if value is _UNREAD:
            value = convert(self.response)
            slot.__set__(self, value)
        return value

    def write(self: MessageStepBatch, value: Any) -> None:
        slot.__set__(self, value)

    return property(read, write)


class MessageStepBatch(EnvStepBatch):
    """An :class:`EnvStepBatch` read from a ``StepResponse`` (kept as :attr:`response`).

    The driver reads ids, finished episodes and the payload of every step, but rewards and
    masks only when a hook asks for them, so those are converted on first read.
    """

    __slots__ = ("response",)

    # A slot read through a class-level descriptor, which mypy cannot follow.
    rewards = _converted_on_read(
        EnvStepBatch.rewards,  # type: ignore[misc]
        lambda r: np.array(r.rewards, dtype=np.float64),
    )
    terminated = _converted_on_read(
        EnvStepBatch.terminated,  # type: ignore[misc]
        lambda r: np.frombuffer(r.terminated_mask, dtype=np.uint8) != 0,
    )
    truncated = _converted_on_read(
        EnvStepBatch.truncated,  # type: ignore[misc]
        lambda r: np.frombuffer(r.truncated_mask, dtype=np.uint8) != 0,
    )

    def __init__(self, response: env_pb2.StepResponse, codec: SpaceCodec | None, rows: int) -> None:
        self.response = response
        completed = response.completed_episodes
        EnvStepBatch.__init__(
            self,
            _payload(response.observation, codec, rows),
            _UNREAD,
            _UNREAD,
            _UNREAD,
            list(response.episode_ids),
            [completed_episode(metadata) for metadata in completed] if completed else [],
            response.infos if response.HasField("infos") else None,
        )


def step_message(batch: EnvStepBatch) -> env_pb2.StepResponse:
    """The message of a step: the env's own for one read from a message, else one built."""
    return batch.response if type(batch) is MessageStepBatch else step_response(batch)


class MessageEnvPort:
    """A message-form :class:`RuntimeEnv` seen through the array form.

    Requests carry the driver's timeouts (``timeout_ms``) as upstream's do. Step results are
    :class:`MessageStepBatch` objects, so events that expose the ``StepResponse`` hand on the
    env's own message (:func:`step_message`).
    """

    __slots__ = ("env", "_codec", "_rows", "_reset_timeout_ms", "_step_timeout_ms")

    def __init__(
        self,
        env: RuntimeEnv,
        observation_codec: SpaceCodec | None,
        rows: int,
        reset_timeout_ms: int,
        step_timeout_ms: int,
    ) -> None:
        self.env = env
        self._codec = observation_codec
        self._rows = rows
        self._reset_timeout_ms = reset_timeout_ms
        self._step_timeout_ms = step_timeout_ms

    async def reset_arrays(
        self, env_indices: Sequence[int], seeds: Sequence[int], options: Mapping[str, Any] | None = None
    ) -> EnvResetBatch:
        request = env_pb2.ResetRequest(
            seeds=seeds, timeout_ms=self._reset_timeout_ms, env_indices=env_indices
        )
        if options:
            request.options.CopyFrom(to_meta_map(options, name="options"))
        result = await require_awaitable(self.env.reset(request), "env.reset")
        expect_result(result, RuntimeEnvReset, env_pb2.ResetResponse, "env.reset")
        batch = reset_batch(result.response, self._codec, self._rows)
        batch.telemetry = result.telemetry
        return batch

    async def step_arrays(self, actions: SpaceBatch | None) -> EnvStepBatch:
        request = env_pb2.StepRequest(timeout_ms=self._step_timeout_ms)
        if actions is not None:
            request.action.bytes.data = actions.data
        result = await require_awaitable(self.env.step(request), "env.step")
        if type(result) is not RuntimeEnvStep or type(result.response) is not _StepResponse:
            expect_result(result, RuntimeEnvStep, _StepResponse, "env.step")
        batch = MessageStepBatch(result.response, self._codec, self._rows)
        batch.telemetry = result.telemetry
        return batch

    async def close(self, timeout: float) -> None:
        """Close the env behind the port."""
        await require_awaitable(self.env.close(timeout), "env.close")


class MessageModelPort:
    """A message-form :class:`RuntimeModel` seen through the array form.

    Builds the ``PredictRequest`` from the call's context, and fails with
    :class:`~rlmesh_gym.runtime.errors.ModelRouteMismatchError` unless the response echoes
    that context exactly (compared with the bytes as sent, so a model that mutates the
    request in place is caught).
    """

    __slots__ = ("model", "_codec", "_component_id")

    def __init__(self, model: RuntimeModel, action_codec: SpaceCodec | None, component_id: str) -> None:
        self.model = model
        self._codec = action_codec
        self._component_id = component_id

    async def predict_arrays(
        self, observation: SpaceBatch | None, context: ArrayPredictContext
    ) -> ModelActionBatch:
        request = model_pb2.PredictRequest()
        context_bytes = context.encoded()
        request.context.ParseFromString(context_bytes)
        if observation is not None:
            request.observation.bytes.data = observation.data
        result = await require_awaitable(self.model.predict(request), "model.predict")
        if (
            type(result) is not RuntimeModelPrediction
            or type(result.response) is not model_pb2.PredictResponse
        ):
            expect_result(result, RuntimeModelPrediction, model_pb2.PredictResponse, "model.predict")
        response = result.response
        # Serialising the echo and comparing bytes is cheaper than comparing messages; the
        # message comparison decides only if the bytes differ.
        echoed = response.context
        if echoed.SerializeToString() != context_bytes:
            expected = model_pb2.PredictContext.FromString(context_bytes)
            if echoed != expected:
                raise ModelRouteMismatchError(self._component_id, expected.request_id)
        return ModelActionBatch(_payload(response.action, self._codec, context.rows), result.telemetry)

    async def close_route(self, request: model_pb2.CloseRouteRequest, timeout: float) -> None:
        """End the route on the model behind the port."""
        await require_awaitable(self.model.close_route(request, timeout), "model.close_route")


# -- array-form adapters seen through the message form ----------------------------------------
# The in-process adapters (GymVectorEnv, the policies) implement only the array form; a gRPC
# server, or a user who wants messages, wraps them here.

# The optional capabilities (runtime.seams) an adapter passes through from the env it wraps.
_ENV_CAPABILITIES = frozenset({"drain_episodes", "render_frames", "episode_ids", "num_envs"})


def as_message_env(env: object) -> RuntimeEnv:
    """``env`` in the message form: itself if it has one
    (:func:`~rlmesh_gym.runtime.seams.is_runtime_env`), a :class:`MessageFormEnv` around it if it
    is an array-form env; ``TypeError`` otherwise."""
    if is_runtime_env(env):
        return env  # type: ignore[return-value]
    if is_array_env(env):
        return MessageFormEnv(env)  # type: ignore[arg-type]
    raise TypeError(
        "expected a RuntimeEnv (async reset()/step() and a .contract) or an array-form env (async "
        f"reset_arrays()/step_arrays() and a .contract, such as GymVectorEnv); got "
        f"{type(env).__module__}.{type(env).__qualname__}"
    )


def as_message_model(model: object) -> RuntimeModel:
    """``model`` in the message form: itself if it has one
    (:func:`~rlmesh_gym.runtime.seams.is_runtime_model`), a :class:`MessageFormModel` around it if
    it is an array-form model; ``TypeError`` otherwise."""
    if is_runtime_model(model):
        return model  # type: ignore[return-value]
    if is_array_model(model):
        return MessageFormModel(model)  # type: ignore[arg-type]
    raise TypeError(
        "expected a RuntimeModel (an async predict()) or an array-form model (an async "
        f"predict_arrays(), such as TorchPolicy); got {type(model).__module__}.{type(model).__qualname__}"
    )


def _codec_of(spec: spaces_pb2.SpaceSpec, name: str) -> SpaceCodec | None:
    """The codec of ``spec``, or ``None`` (then payloads pass as bytes and the array env decides)."""
    try:
        return SpaceCodec(spec, name=name)
    except (CodecError, ValueError):
        return None


class MessageFormEnv:
    """An array-form env (:class:`~rlmesh_gym.runtime.seams.ArrayRuntimeEnv` with a
    ``contract``) as a message-form :class:`~rlmesh_gym.runtime.seams.RuntimeEnv`.

    ``reset(ResetRequest)`` and ``step(StepRequest)`` decode the request, call
    ``reset_arrays``/``step_arrays`` and answer with exactly the message the array result
    describes (:func:`reset_response`, :func:`step_response`). ``close`` and the optional
    capabilities the wrapped env has (``drain_episodes``, ``render_frames``, ``episode_ids``,
    ``num_envs``) pass through; the wrapped env is :attr:`env`.

    Errors: undecodable reset options and subset stepping (``StepRequest.env_indices``) are
    recoverable :class:`~rlmesh_gym.runtime.errors.EnvRpcError`\\ s. A result the wire cannot
    carry (infos with values a ``MetaMap`` cannot hold) fails the step: the env has moved on
    while the caller never saw its step, so later steps and partial resets are refused until a
    whole-vector reset.

    ``GymVectorEnv``'s docstring and docs/envs.md show it in use.
    """

    __slots__ = ("env", "_action_codec", "_rows", "_steps", "_failure")
    wrapped_attribute = "env"

    def __init__(self, env: ArrayRuntimeEnv) -> None:
        if not is_array_env(env):
            raise TypeError(
                "MessageFormEnv wraps an array-form env (async reset_arrays()/step_arrays() and a "
                f".contract, such as GymVectorEnv); got {type(env).__module__}.{type(env).__qualname__}"
            )
        contract = env.contract  # type: ignore[attr-defined]
        self.env = env
        self._rows = int(getattr(env, "num_envs", 0) or contract.num_envs or 1)
        self._action_codec = _codec_of(contract.action_space, "action")
        self._steps = 0  # steps answered through this adapter, named in its errors
        self._failure: str | None = None

    @property
    def contract(self) -> env_pb2.EnvContract:
        """The wrapped env's contract."""
        return self.env.contract  # type: ignore[attr-defined]

    def __new__(cls, env: ArrayRuntimeEnv) -> MessageFormEnv:
        # Real members for the capabilities the wrapped env has, and only those: from Python 3.12
        # a runtime-checkable protocol looks at the class, not at __getattr__.
        if cls is MessageFormEnv:
            cls = passing_through(cls, env, _ENV_CAPABILITIES)
        return super().__new__(cls)

    def __repr__(self) -> str:
        return f"MessageFormEnv({self.env!r})"

    async def reset(self, request: env_pb2.ResetRequest) -> RuntimeEnvReset:
        """The message form of ``env.reset_arrays``: ``options`` (a ``MetaMap``) becomes a dict."""
        if self._failure is not None and request.env_indices:
            raise self._unusable("env.reset")
        options = None
        if request.HasField("options"):
            try:
                options = from_meta_map(request.options)
            except (MetaConversionError, ValueError, TypeError) as error:
                raise EnvRpcError(
                    "env.reset", self._steps, f"reset options could not be decoded: {error}", recoverable=True
                ) from error
        batch = await self.env.reset_arrays(list(request.env_indices), list(request.seeds), options)
        response = self._message(reset_response, batch, "env.reset")
        self._failure = None
        return RuntimeEnvReset(response, detached(batch.telemetry))

    async def step(self, request: env_pb2.StepRequest) -> RuntimeEnvStep:
        """The message form of ``env.step_arrays``: ``request.action`` holds one action per lane."""
        step = self._steps + 1
        if request.env_indices:
            raise EnvRpcError(
                "env.step",
                step,
                f"subset stepping (StepRequest.env_indices={list(request.env_indices)}) is not supported; "
                f"send one action for each of the {self._rows} lanes and leave env_indices empty",
                recoverable=True,
            )
        if self._failure is not None:
            raise self._unusable("env.step")
        action = request.action
        actions = (
            SpaceBatch.from_bytes(self._action_codec, action.bytes.data, self._rows)  # type: ignore[arg-type]
            if action.HasField("bytes")
            else None
        )
        batch = await self.env.step_arrays(actions)
        self._steps = step
        return RuntimeEnvStep(self._message(step_response, batch, "env.step"), detached(batch.telemetry))

    async def close(self, timeout: float) -> None:
        """Close the wrapped env."""
        await self.env.close(timeout)

    def _message(self, convert: Any, batch: Any, operation: str) -> Any:
        try:
            return convert(batch)
        except (MetaConversionError, CodecError, TypeError, ValueError) as error:
            self._failure = f"{operation}'s result cannot be sent as a message: {error}"
            raise EnvRpcError(operation, self._steps, self._failure) from error

    def _unusable(self, operation: str) -> EnvRpcError:
        return EnvRpcError(
            operation,
            self._steps,
            f"the env is unusable after an earlier failure ({self._failure}); "
            "reset every lane (an empty env_indices) to recover, or close it",
        )


class MessageFormModel:
    """An array-form model (:class:`~rlmesh_gym.runtime.seams.ArrayRuntimeModel`) as a
    message-form :class:`~rlmesh_gym.runtime.seams.RuntimeModel`.

    ``predict(PredictRequest)`` calls ``predict_arrays`` with the request's observation bytes
    and context and answers with the action bytes and a ``context`` equal to the request's.
    ``close_route`` and ``bind`` pass through; the wrapped model is :attr:`model`.

    >>> import asyncio
    >>> class Echo:  # an array-form model answering each observation row as its action
    ...     async def predict_arrays(self, observation, context):
    ...         return ModelActionBatch(observation)
    >>> request = model_pb2.PredictRequest()
    >>> _ = request.context.slots.add(env_index=0, episode_id="episode-0")
    >>> request.observation.bytes.data = bytes(8)
    >>> response = asyncio.run(MessageFormModel(Echo()).predict(request)).response
    >>> response.context == request.context, response.action.bytes.data == bytes(8)
    (True, True)
    """

    __slots__ = ("model",)
    wrapped_attribute = "model"

    def __init__(self, model: ArrayRuntimeModel) -> None:
        if not is_array_model(model):
            raise TypeError(
                "MessageFormModel wraps an array-form model (an async predict_arrays(), such as "
                f"TorchPolicy); got {type(model).__module__}.{type(model).__qualname__}"
            )
        self.model = model

    def __repr__(self) -> str:
        return f"MessageFormModel({self.model!r})"

    def __new__(cls, model: ArrayRuntimeModel) -> MessageFormModel:
        # A BindableModel stays one (a model server binds it per route): a real ``bind`` member,
        # as for MessageFormEnv's capabilities.
        if cls is MessageFormModel:
            cls = passing_through(cls, model, ("bind",))
        return super().__new__(cls)

    async def predict(self, request: model_pb2.PredictRequest) -> RuntimeModelPrediction:
        """The message form of ``model.predict_arrays``; the response's context equals the request's."""
        context = request.context
        rows = len(context.slots)
        observation = request.observation
        # No codec here: the model decodes the bytes with its own (and names what does not fit).
        batch = (
            SpaceBatch.from_bytes(None, observation.bytes.data, rows)  # type: ignore[arg-type]
            if observation.HasField("bytes")
            else None
        )
        arrays_context = ArrayPredictContext(
            context.session_id, context.route_id, rows, context.SerializeToString
        )
        prediction = await self.model.predict_arrays(batch, arrays_context)
        response = model_pb2.PredictResponse()
        response.context.CopyFrom(context)
        if prediction.action is not None:
            try:
                response.action.bytes.data = prediction.action.data
            except CodecError as error:
                component = getattr(self.model, "component_id", "model")
                raise ModelRpcError(component, f"the actions do not encode: {error}") from error
        return RuntimeModelPrediction(response, detached(prediction.telemetry))

    async def close_route(self, request: model_pb2.CloseRouteRequest, timeout: float) -> None:
        """End the route on the wrapped model (if it has ``close_route``)."""
        close_route = getattr(self.model, "close_route", None)
        if close_route is not None:
            await require_awaitable(close_route(request, timeout), "model.close_route")
