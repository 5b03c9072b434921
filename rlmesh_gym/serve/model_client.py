"""``RemoteModel``: a :class:`~rlmesh_gym.runtime.RuntimeModel` over any rlmesh ModelService.

The Python driver can then take its actions from ``rlmesh-gym serve-policy``, from
``rlmesh.Model``/``PyModel.serve`` or from any other rlmesh model endpoint::

    import asyncio
    from rlmesh_gym.serve import RemoteModel

    async def main():
        model = await RemoteModel.connect("127.0.0.1:50052")
        model.bind(env.contract)          # routes are configured with this contract on first use
        ...                               # RuntimeDriver(spec, env, model).run()
        await model.close()

    asyncio.run(main())

A route (``session_id``, ``route_id``) must be configured with the env's contract before its
first predict: call :meth:`configure_route` yourself, or :meth:`bind` a contract (or pass
``contract=`` to :meth:`connect`) and the first predict of a new route configures it. Requests
are pipelined on one ``Join`` stream and matched to replies by ``request_id`` (a predict uses
its context's ``request_id``, as upstream's client does). Failures raise
:class:`~rlmesh_gym.runtime.errors.ModelRpcError`; in-band server errors as its subclass
:class:`~rlmesh_gym.serve.errors.RemoteModelError`.
"""

from __future__ import annotations

import asyncio
import logging
from itertools import count

import grpc

from rlmesh_gym._deadline import wait_within
from rlmesh_gym.proto import env_pb2, model_pb2, model_pb2_grpc
from rlmesh_gym.runtime.errors import ModelRpcError
from rlmesh_gym.runtime.seams import RuntimeModel, RuntimeModelPrediction
from rlmesh_gym.serve._grpc_errors import describe_rpc_error, error_code_name
from rlmesh_gym.serve._peer_session import JoinStream, PeerSession, open_join_stream
from rlmesh_gym.serve.endpoint import DEFAULT_MAX_MESSAGE_BYTES
from rlmesh_gym.serve.errors import RemoteModelError
from rlmesh_gym.serve.handshake import DEFAULT_EDITION_PIN

__all__ = ["RemoteModel"]

logger = logging.getLogger("rlmesh_gym.serve")

RouteKey = tuple[str, str]


class RemoteModel(PeerSession, RuntimeModel):
    """An rlmesh model endpoint as a RuntimeModel; create it with :meth:`connect`.

    Attributes:
        address: The ``HOST:PORT`` connected to.
        component_id: The name used in :class:`ModelRpcError` messages.
        handshake: The server's ``HandshakeResponse``.
    """

    _role = "model"
    _messages = model_pb2

    def __init__(
        self,
        stream: JoinStream,
        max_message_bytes: int,
        *,
        component_id: str,
        contract: env_pb2.EnvContract | None,
    ) -> None:
        super().__init__(stream, max_message_bytes)
        self.component_id = component_id
        self._contract: env_pb2.EnvContract | None = None
        if contract is not None:
            self.bind(contract)
        self._routes: set[RouteKey] = set()
        self._pending: dict[str, asyncio.Future[model_pb2.JoinResponse]] = {}
        self._write_lock = asyncio.Lock()
        self._configure_lock = asyncio.Lock()
        self._ids = count(1)
        self._reader = asyncio.get_running_loop().create_task(self._read_replies())

    @classmethod
    async def connect(
        cls,
        address: str,
        *,
        token: str | None = None,
        edition_pin: str = DEFAULT_EDITION_PIN,
        connect_timeout: float = 10.0,
        request_timeout: float | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        component_id: str = "model",
        contract: env_pb2.EnvContract | None = None,
    ) -> RemoteModel:
        """Connect to the model server at ``address`` (``HOST:PORT``), handshake and open the stream.

        Args:
            token: Sent as ``authorization`` metadata on every RPC when the server needs one.
            edition_pin: ``"b3"`` (default), ``"rc1"`` or a 64-hex SHA; must match the server's.
            connect_timeout: Seconds to wait for the server, the handshake and the stream.
            request_timeout: Seconds to wait for each reply (``None``: as long as it takes).
            max_message_bytes: gRPC send and receive limit (256 MiB by default).
            component_id: The model's name in error messages.
            contract: The env contract new routes are configured with (see :meth:`bind`).

        Raises:
            PeerUnavailableError, AuthenticationError, HandshakeRejectedError: as
            :meth:`RemoteEnv.connect <rlmesh_gym.serve.env_client.RemoteEnv.connect>`.
        """
        stream = await open_join_stream(
            address,
            role="model",
            stub_type=model_pb2_grpc.ModelServiceStub,
            token=token,
            edition_pin=edition_pin,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            max_message_bytes=max_message_bytes,
        )
        return cls(stream, max_message_bytes, component_id=component_id, contract=contract)

    def __str__(self) -> str:
        return f"model server {self.address}"

    def __repr__(self) -> str:
        return f"RemoteModel({self.address}, routes={len(self._routes)}, {self._state()})"

    def bind(self, contract: env_pb2.EnvContract) -> None:
        """Use ``contract`` for routes that are configured on their first predict."""
        if not isinstance(contract, env_pb2.EnvContract):
            raise TypeError(f"bind needs an EnvContract, got {type(contract).__name__}")
        for name in ("observation_space", "action_space"):
            if not contract.HasField(name):
                raise ValueError(f"bind: the contract has no {name}")
        stored = env_pb2.EnvContract()
        stored.CopyFrom(contract)
        stored.num_envs = max(1, stored.num_envs)
        self._contract = stored

    async def configure_route(
        self, contract: env_pb2.EnvContract | None = None, *, session_id: str, route_id: str
    ) -> None:
        """Send ``ConfigureRoute`` for the route with ``contract`` (default: the bound contract)."""
        if not session_id or not route_id:
            raise ValueError("configure_route needs a non-empty session_id and route_id")
        if contract is not None:
            self.bind(contract)
        if self._contract is None:
            raise ModelRpcError(
                self.component_id,
                f"route {session_id}:{route_id} has no contract: pass one to configure_route, or "
                "bind(contract)",
            )
        context = model_pb2.PredictContext(session_id=session_id, route_id=route_id)
        request = model_pb2.JoinRequest(
            configure_route=model_pb2.ConfigureRouteRequest(context=context, env_contract=self._contract),
            request_id=f"rlmesh-gym:configure_route:{next(self._ids)}",
        )
        await self._request(request, "configure_route")
        self._routes.add((session_id, route_id))

    # -- RuntimeModel ------------------------------------------------------------------------------

    async def predict(self, request: model_pb2.PredictRequest) -> RuntimeModelPrediction:
        """Send ``request`` as a Join ``predict`` (configuring its route first if needed)."""
        context = request.context
        key = (context.session_id, context.route_id)
        if key not in self._routes:
            async with self._configure_lock:
                if key not in self._routes:
                    await self.configure_route(session_id=key[0], route_id=key[1])
        request_id = context.request_id or f"rlmesh-gym:predict:{next(self._ids)}"
        response = await self._request(
            model_pb2.JoinRequest(predict=request, request_id=request_id), "predict"
        )
        return RuntimeModelPrediction(response.predict, self._telemetry(response))

    async def close_route(self, request: model_pb2.CloseRouteRequest, timeout: float = 5.0) -> None:
        """Send ``CloseRoute`` for a configured route (a route never configured needs nothing)."""
        key = (request.context.session_id, request.context.route_id)
        if key not in self._routes:
            return
        self._routes.discard(key)
        join = model_pb2.JoinRequest(
            close_route=request,
            request_id=request.context.request_id or f"rlmesh-gym:close_route:{next(self._ids)}",
        )
        try:
            await wait_within(self._request(join, "close_route"), timeout)
        except asyncio.TimeoutError:
            raise ModelRpcError(
                self.component_id, f"the model server did not answer CloseRoute within {timeout:g}s"
            ) from None

    async def close(self, timeout: float = 5.0, reason: str = "client closed the session") -> None:
        """Send ``Close`` (the server ends every route of this stream), end the stream, close the channel.

        Idempotent. Raises :class:`ModelRpcError` when the server could not be told.
        """
        if self._closed:
            return
        try:
            if self._broken is None:
                request = model_pb2.JoinRequest(
                    close=model_pb2.CloseRequest(reason=reason),
                    request_id=f"rlmesh-gym:close:{next(self._ids)}",
                )
                try:
                    await wait_within(self._request(request, "close"), timeout)
                    await wait_within(self._call.done_writing(), timeout)
                    await wait_within(asyncio.shield(self._reader), timeout)
                except asyncio.TimeoutError:
                    raise ModelRpcError(
                        self.component_id, f"the model server did not answer Close within {timeout:g}s"
                    ) from None
        finally:
            self._closed = True
            self._routes.clear()
            self._reader.cancel()
            self._call.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
            await self._channel.close()

    def _session_error(self, operation: str, message: str) -> ModelRpcError:
        return ModelRpcError(self.component_id, message)

    # -- the Join stream ---------------------------------------------------------------------------

    async def _request(self, request: model_pb2.JoinRequest, kind: str) -> model_pb2.JoinResponse:
        if self._closed:
            raise ModelRpcError(self.component_id, f"the session with {self.address} is closed")
        if self._broken is not None:
            raise ModelRpcError(
                self.component_id, f"session unusable after an earlier failure: {self._broken}"
            )
        oversize = self._oversize(kind, request)
        if oversize is not None:
            raise ModelRpcError(self.component_id, oversize, recoverable=True)
        request_id = request.request_id
        if request_id in self._pending:
            raise ModelRpcError(
                self.component_id, f"request id {request_id!r} is already waiting for a reply"
            )
        reply: asyncio.Future[model_pb2.JoinResponse] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = reply
        try:
            async with self._write_lock:
                try:
                    await self._call.write(request)
                except (grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError) as error:
                    self._fail(await self._transport_failure(error))
                    raise ModelRpcError(self.component_id, self._broken or str(error)) from error
            if self._request_timeout is None:
                response = await reply
            else:
                try:
                    response = await wait_within(asyncio.shield(reply), self._request_timeout)
                except asyncio.TimeoutError:
                    raise ModelRpcError(
                        self.component_id,
                        f"no reply from {self.address} to {kind} {request_id!r} within "
                        f"request_timeout={self._request_timeout:g}s",
                    ) from None
        finally:
            self._pending.pop(request_id, None)
        answered = response.WhichOneof("kind")
        if answered == "error":
            failure = response.error
            raise RemoteModelError(
                self.component_id,
                failure.code,
                error_code_name(model_pb2.ModelErrorCode, failure.code),
                failure.message,
                failure.is_recoverable,
            )
        if answered != kind:
            raise ModelRpcError(
                self.component_id,
                f"protocol error: the model server answered a {kind} request with {answered!r}",
            )
        return response

    async def _read_replies(self) -> None:
        try:
            while True:
                response = await self._call.read()
                if response is grpc.aio.EOF:
                    self._fail("transport error: connection closed (the model server ended the stream)")
                    return
                reply = self._pending.get(response.request_id)
                if reply is None:
                    logger.debug("model reply with unknown request id %r dropped", response.request_id)
                elif not reply.done():
                    reply.set_result(response)
        except grpc.aio.AioRpcError as error:
            self._fail(describe_rpc_error(error, self._max_message_bytes))
        except asyncio.CancelledError:
            self._fail("the session was closed")
            raise

    def _fail(self, reason: str) -> None:
        if self._broken is None:
            self._broken = reason
        for reply in self._pending.values():
            if not reply.done():
                reply.set_exception(ModelRpcError(self.component_id, reason))
