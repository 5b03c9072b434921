"""Serve any :class:`~rlmesh_gym.runtime.RuntimeModel` as an rlmesh ModelService.

rlmesh's runtime (and our :class:`~rlmesh_gym.serve.model_client.RemoteModel`) can then ask it
for actions over gRPC::

    import asyncio
    from rlmesh_gym.policies import TorchPolicy
    from rlmesh_gym.serve import ModelServer

    async def main():
        policy = TorchPolicy.load("policy.pt", contract)
        async with ModelServer(policy, address="127.0.0.1:50052") as server:
            await server.wait_closed()

    asyncio.run(main())

Session rules (docs/design/wire.md#model-session): each ``Join`` stream configures routes (``ConfigureRoute``
stores the route's ``EnvContract``; a model with a ``bind(contract)`` method is bound to it),
asks for actions (``Predict``), and ends routes (``CloseRoute``) or everything (``Close``).
A route belongs to the stream that configured it: another stream's ``ConfigureRoute``,
``Predict`` or ``CloseRoute`` for it is refused with ``INVALID_REQUEST``.
Several streams may be open at once; the model sees one call at a time (the RuntimeModel
contract), and requests of one stream are answered in arrival order, each with its
``request_id``. A route's contract fixes the spaces: while a route is open, a ``bind``-able
model refuses another route with different spaces.

A model served unbound is bound on the first route; once all routes have closed, a route with
other spaces gets a fresh copy of it (a model bound before serving keeps its spaces).

Errors carry upstream's codes and texts: malformed ``ConfigureRoute``/``CloseRoute`` requests, an
empty request and a failing ``close_route`` are ``INVALID_REQUEST``; a malformed ``Predict``
context, more slots than the route's lanes and every model failure are ``INTERNAL``
(recoverable as the model's error says), and so is a reply larger than the server's
``max_message_bytes`` (the stream stays open). A ``Predict`` for a route that was never
configured is ``NOT_CONFIGURED`` (rlmesh 0.1.0b3 says ``INTERNAL``; the edition document and
this package say ``NOT_CONFIGURED``). The model's calls run in the server's call thread, never on
the event loop.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import AsyncIterator
from itertools import count

import grpc

from rlmesh_gym.proto import env_pb2, model_pb2, spaces_pb2
from rlmesh_gym.runtime.errors import RuntimeDriverError
from rlmesh_gym.runtime.message_form import as_message_model
from rlmesh_gym.runtime.seams import ArrayRuntimeModel, BindableModel, RuntimeModel
from rlmesh_gym.serve._lifecycle import ServerLifecycle
from rlmesh_gym.serve._session import SessionGuard
from rlmesh_gym.serve._telemetry import endpoint_telemetry
from rlmesh_gym.serve.endpoint import DEFAULT_MAX_MESSAGE_BYTES
from rlmesh_gym.serve.handshake import DEFAULT_EDITION_PIN, MODEL_CAPABILITIES

__all__ = ["ModelServer"]

logger = logging.getLogger("rlmesh_gym.serve")

_INVALID_REQUEST = model_pb2.MODEL_ERROR_CODE_INVALID_REQUEST
_NOT_CONFIGURED = model_pb2.MODEL_ERROR_CODE_NOT_CONFIGURED
_INTERNAL = model_pb2.MODEL_ERROR_CODE_INTERNAL

RouteKey = tuple[str, str]


class _RequestFailed(Exception):
    """One request's in-band ``ModelError``."""

    def __init__(self, code: model_pb2.ModelErrorCode, message: str, recoverable: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.recoverable = recoverable


class ModelServer(ServerLifecycle):
    """An rlmesh ModelService endpoint for one model.

    Args:
        model: The model to serve: a message-form :class:`~rlmesh_gym.runtime.RuntimeModel`
            or an array-form one such as :class:`~rlmesh_gym.policies.TorchPolicy` (seen through
            :class:`~rlmesh_gym.runtime.message_form.MessageFormModel`). If it has ``bind(contract)``, each
            ``ConfigureRoute`` binds it to the route's ``EnvContract``.
        address: ``HOST:PORT`` to bind; port 0 picks a free port (see :attr:`address`).
        token: If set, every RPC must carry it as ``authorization`` metadata.
        edition_pin: ``"b3"`` (default), ``"rc1"`` or a 64-hex SHA-256 clients must offer.
        allow_remote_shutdown: Whether a ``Shutdown`` RPC may stop the server.
        idle_timeout: End a stream whose client sent nothing, or left a reply unread, for this
            many seconds (``None``: never); its routes are closed.
        idle_shutdown: Stop the whole server (:attr:`stop_reason` ``"idle timeout"``) once no RPC
            has been in flight for this many seconds (``None``: never), as upstream's
            ``idle_timeout``. An open ``Join`` stream counts as in flight until it ends, so this
            never fires during a session; combine it with ``idle_timeout`` to cut quiet clients off.
        close_timeout: Seconds given to the model's ``close_route`` for each route.
        max_message_bytes: gRPC send and receive limit (256 MiB by default, as upstream).
    """

    _role = "model"
    _noun = "model"
    _messages = model_pb2
    _capabilities = MODEL_CAPABILITIES
    _service = "rlmesh.model.v1.ModelService"

    def __init__(
        self,
        model: RuntimeModel | ArrayRuntimeModel,
        *,
        address: str = "127.0.0.1:0",
        token: str | None = None,
        edition_pin: str = DEFAULT_EDITION_PIN,
        allow_remote_shutdown: bool = False,
        idle_timeout: float | None = None,
        idle_shutdown: float | None = None,
        close_timeout: float = 5.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        try:
            predictor = as_message_model(model)
        except TypeError:
            raise TypeError(
                "ModelServer needs a RuntimeModel (an async predict()) or an array-form model (an async "
                f"predict_arrays(), such as TorchPolicy); got "
                f"{type(model).__module__}.{type(model).__qualname__} "
                "(rlmesh_gym.policies.resolve.resolve_policy turns modules, callables and files into one)"
            ) from None
        if idle_timeout is not None and not idle_timeout > 0:
            raise ValueError(f"idle_timeout must be > 0 seconds or None, got {idle_timeout!r}")
        if not close_timeout > 0:
            raise ValueError(f"close_timeout must be > 0 seconds, got {close_timeout!r}")
        super().__init__(
            address=address,
            token=token,
            edition_pin=edition_pin,
            allow_remote_shutdown=allow_remote_shutdown,
            max_message_bytes=max_message_bytes,
            idle_shutdown=idle_shutdown,
        )
        self._model = model
        self._predictor = predictor  # the model in the message form: what predict requests go to
        self._idle_timeout = idle_timeout
        self._close_timeout = float(close_timeout)
        self._model_lock = asyncio.Lock()
        # Every open route: its contract and the stream that configured it.
        self._routes: dict[RouteKey, tuple[env_pb2.EnvContract, int]] = {}
        self._bound_spaces = _model_spaces_fingerprint(model)
        # A copy of a model served unbound, to bind afresh when a later client brings other spaces.
        self._unbound_model = _unbound_copy(model) if self._bound_spaces is None else None
        self._sessions: dict[int, SessionGuard] = {}
        self._stream_ids = count(1)

    @property
    def model(self) -> RuntimeModel | ArrayRuntimeModel:
        """The model being served (bound to the current routes' spaces, if it binds)."""
        return self._model

    @property
    def routes(self) -> list[RouteKey]:
        """The ``(session_id, route_id)`` of every configured route."""
        return list(self._routes)

    async def _on_stop(self) -> None:
        for guard in list(self._sessions.values()):
            guard.interrupt(grpc.StatusCode.UNAVAILABLE, "model server is shutting down")

    # -- RPCs ----------------------------------------------------------------------------------

    async def _join(
        self, requests: AsyncIterator[model_pb2.JoinRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[model_pb2.JoinResponse]:
        stream = next(self._stream_ids)
        guard = SessionGuard("model", self._idle_timeout)
        self._sessions[stream] = guard
        closed = False
        try:
            await context.send_initial_metadata(())
            while (request := await guard.next_request(requests, context)) is not None:
                response = await self._handle(request, stream)
                closed = response.WhichOneof("kind") == "close"
                guard.replying()
                yield response
                if closed:
                    return
        except asyncio.CancelledError:
            await guard.abort_if_interrupted(context, f"model stream {stream}")
            raise
        finally:
            guard.close()
            del self._sessions[stream]
            if not closed:
                # The client vanished or was cut off: its routes end here.
                await asyncio.shield(self._close_routes(stream, "model session ended without Close"))

    async def _handle(self, request: model_pb2.JoinRequest, stream: int) -> model_pb2.JoinResponse:
        started = time.perf_counter_ns()
        kind = request.WhichOneof("kind")
        response = model_pb2.JoinResponse(request_id=request.request_id)
        operation = f"model.{kind}" if kind is not None else "model.unknown"
        try:
            if kind == "predict":
                await self._predict(request.predict, response, stream)
            elif kind == "configure_route":
                await self._configure_route(request.configure_route, stream)
                response.configure_route.SetInParent()
            elif kind == "close_route":
                await self._close_route(request.close_route, stream)
                response.close_route.SetInParent()
            elif kind == "close":
                failures = await self._close_routes(stream, request.close.reason or "model session closed")
                if failures:
                    raise _RequestFailed(_INVALID_REQUEST, "; ".join(failures))
                response.close.SetInParent()
            else:
                raise _RequestFailed(_INVALID_REQUEST, "empty model request")
            problem = self._oversize_reply(response, operation)
            if problem is not None:
                raise _RequestFailed(_INTERNAL, problem)
        except _RequestFailed as failure:
            response.error.code = failure.code
            response.error.message = failure.message
            response.error.is_recoverable = failure.recoverable
            logger.debug("model %s request %r failed: %s", operation, request.request_id, failure.message)
        response.telemetry.CopyFrom(endpoint_telemetry(operation, started))
        return response

    async def _configure_route(self, request: model_pb2.ConfigureRouteRequest, stream: int) -> None:
        # Upstream's checks and texts, in upstream's order.
        if not request.HasField("context"):
            raise _RequestFailed(_INVALID_REQUEST, "configure_route missing route context")
        context = request.context
        if not context.route_id:
            raise _RequestFailed(_INVALID_REQUEST, "configure_route route_id is empty")
        if not context.session_id:
            raise _RequestFailed(_INVALID_REQUEST, "configure_route missing session_id or route_id")
        if not request.HasField("env_contract"):
            raise _RequestFailed(_INVALID_REQUEST, "configure_route missing env_contract")
        contract = request.env_contract
        if contract.num_envs < 1:
            raise _RequestFailed(_INVALID_REQUEST, "configure_route env_contract.num_envs must be positive")
        for name in ("observation_space", "action_space"):
            if not contract.HasField(name):
                # Deliberate difference: upstream stores such a route; our models need both spaces.
                raise _RequestFailed(
                    _INVALID_REQUEST,
                    f"configure_route env_contract has no {name} (a model needs both spaces to act)",
                )
        key = (context.session_id, context.route_id)
        owner = self._routes.get(key)
        if owner is not None and owner[1] != stream:
            raise _RequestFailed(
                _INVALID_REQUEST, f"route {_route_name(key)} is already configured by another model session"
            )
        if isinstance(self._model, BindableModel):
            await self._bind(contract, key)
        stored = env_pb2.EnvContract()
        stored.CopyFrom(contract)
        self._routes[key] = (stored, stream)
        logger.info(
            "model route %s configured (%s, num_envs=%d)", _route_name(key), contract.id, contract.num_envs
        )

    async def _bind(self, contract: env_pb2.EnvContract, key: RouteKey) -> None:
        """Bind the model to ``contract``'s spaces, unless it already is.

        While a route is open the spaces are fixed. Once every route has closed, a model that
        was unbound when served is replaced by a fresh copy bound to the new spaces; a model
        bound before serving (``serve-policy --env-id``) keeps its spaces for good.
        """
        spaces = _spaces_fingerprint(contract)
        if spaces == self._bound_spaces:
            return  # already bound to these spaces: nothing to wait for, even behind a busy model
        others = [other for other in self._routes if other != key]
        if others:
            raise _RequestFailed(
                _INVALID_REQUEST,
                f"this model is bound to the spaces of route {_route_name(others[0])}; route "
                f"{_route_name(key)} has different observation/action spaces (serve one model per env, "
                "or configure this route once the other routes are closed)",
            )
        model = self._model
        if self._bound_spaces is not None:
            if self._unbound_model is None:
                raise _RequestFailed(
                    _INVALID_REQUEST,
                    f"configure_route: this model was bound to other spaces before it was served and "
                    f"cannot act in {contract.id or 'this env'}; serve a policy built for this env",
                )
            model = copy.deepcopy(self._unbound_model)
        async with self._model_lock:
            try:
                # Never true: only a model with bind() is bound (see the caller).
                if not isinstance(model, BindableModel):
                    raise TypeError(f"{type(model).__name__} has no bind() method")
                bound = await self._calls.call(model.bind, contract)
            except Exception as error:
                raise _RequestFailed(
                    _INVALID_REQUEST,
                    f"configure_route: the model cannot act in this env: {type(error).__name__}: {error}",
                ) from error
        self._model = model if bound is None else bound  # bind may configure in place or return the model
        self._predictor = as_message_model(self._model)
        self._bound_spaces = spaces

    async def _predict(
        self, request: model_pb2.PredictRequest, response: model_pb2.JoinResponse, stream: int
    ) -> None:
        _check_predict_context(request)
        context = request.context
        key = (context.session_id, context.route_id)
        route = self._routes.get(key)
        if route is None:
            raise _RequestFailed(
                _NOT_CONFIGURED,
                f"model error: model route was not configured (route {_route_name(key)}; send "
                "ConfigureRoute first)",
            )
        _check_owner(key, route[1], stream, "predict on")
        if len(context.slots) > route[0].num_envs:
            raise _RequestFailed(
                _INTERNAL,
                f"model error: predict route has more slots than configured route ({len(context.slots)} "
                f"slots, num_envs={route[0].num_envs})",
            )
        async with self._model_lock:
            try:
                prediction = await self._calls.call(self._predictor.predict, request)
            except RuntimeDriverError as error:
                raise _RequestFailed(_INTERNAL, f"model error: {error}", error.recoverable) from error
            except Exception as error:
                raise _RequestFailed(_INTERNAL, f"model error: {type(error).__name__}: {error}") from error
        answer = prediction.response
        if answer.context != context:
            raise _RequestFailed(
                _INTERNAL, "model error: the model answered with a context that differs from the request's"
            )
        response.predict.CopyFrom(answer)

    async def _close_route(self, request: model_pb2.CloseRouteRequest, stream: int) -> None:
        context = request.context
        if not context.route_id:
            raise _RequestFailed(_INVALID_REQUEST, "close_route missing route_id")
        key = (context.session_id, context.route_id)
        route = self._routes.get(key)
        if route is None:
            return  # already closed, or never configured: nothing to end
        _check_owner(key, route[1], stream, "close")
        del self._routes[key]
        failure = await self._call_close_route(request)
        if failure is not None:
            raise _RequestFailed(_INVALID_REQUEST, failure)

    async def _close_routes(self, stream: int, reason: str) -> list[str]:
        failures = []
        for key in [key for key, (_, owner) in self._routes.items() if owner == stream]:
            del self._routes[key]
            request = model_pb2.CloseRouteRequest(
                context=model_pb2.PredictContext(session_id=key[0], route_id=key[1]), reason=reason
            )
            failure = await self._call_close_route(request)
            if failure is not None:
                failures.append(failure)
        return failures

    async def _call_close_route(self, request: model_pb2.CloseRouteRequest) -> str | None:
        key = (request.context.session_id, request.context.route_id)
        async with self._model_lock:
            try:
                await self._calls.call(
                    self._model.close_route, request, self._close_timeout, timeout=self._close_timeout
                )
            except asyncio.TimeoutError:
                return (
                    f"close_route of route {_route_name(key)} did not finish within {self._close_timeout:g}s"
                )
            except Exception as error:
                logger.warning("model close_route of route %s failed: %s", _route_name(key), error)
                return f"close_route of route {_route_name(key)} failed: {type(error).__name__}: {error}"
        logger.info("model route %s closed (%s)", _route_name(key), request.reason)
        return None


def _route_name(key: RouteKey) -> str:
    return f"{key[0]}:{key[1]}"


def _check_owner(key: RouteKey, owner: int, stream: int, action: str) -> None:
    """Only the stream that configured a route may use or end it."""
    if owner != stream:
        raise _RequestFailed(
            _INVALID_REQUEST,
            f"route {_route_name(key)} is configured by another model session; this session cannot "
            f"{action} it",
        )


def _spaces_fingerprint(contract: env_pb2.EnvContract) -> bytes:
    return _fingerprint(contract.observation_space, contract.action_space)


def _fingerprint(observation: spaces_pb2.SpaceSpec, action: spaces_pb2.SpaceSpec) -> bytes:
    return (
        observation.SerializeToString(deterministic=True)
        + b"\0|\0"
        + action.SerializeToString(deterministic=True)
    )


def _model_spaces_fingerprint(model: RuntimeModel | ArrayRuntimeModel) -> bytes | None:
    """The spaces a model is already bound to (its ``observation_spec``/``action_spec``), else ``None``."""
    observation, action = getattr(model, "observation_spec", None), getattr(model, "action_spec", None)
    if isinstance(observation, spaces_pb2.SpaceSpec) and isinstance(action, spaces_pb2.SpaceSpec):
        return _fingerprint(observation, action)
    return None


def _unbound_copy(model: RuntimeModel | ArrayRuntimeModel) -> RuntimeModel | ArrayRuntimeModel | None:
    """A deep copy of an unbound, bind-able model (``None`` when it cannot be copied)."""
    if not isinstance(model, BindableModel):
        return None
    try:
        return copy.deepcopy(model)
    except Exception as error:
        logger.info(
            "model server: %s cannot be copied (%s); it can be bound once only", type(model).__name__, error
        )
        return None


def _check_predict_context(request: model_pb2.PredictRequest) -> None:
    """Upstream's predict-context rules, in its order; violations are INTERNAL with upstream's texts."""
    if not request.HasField("context"):
        raise _RequestFailed(_INTERNAL, "internal error: model request missing route context")
    context = request.context
    if not context.route_id:
        raise _RequestFailed(_INTERNAL, "internal error: model route_id is empty")
    if not context.request_id:
        raise _RequestFailed(_INTERNAL, "internal error: model request_id is empty")
    if not context.slots:
        raise _RequestFailed(_INTERNAL, "internal error: model route must include at least one slot")
    seen: set[int] = set()
    for position, slot in enumerate(context.slots):
        if slot.env_index < 0:
            raise _RequestFailed(
                _INTERNAL,
                f"internal error: model route slot {position} has negative env_index {slot.env_index}",
            )
        if slot.env_index in seen:
            raise _RequestFailed(
                _INTERNAL, f"internal error: model route has duplicate env_index {slot.env_index}"
            )
        seen.add(slot.env_index)
        if not slot.episode_id:
            raise _RequestFailed(_INTERNAL, f"internal error: model route slot {position} missing episode_id")
