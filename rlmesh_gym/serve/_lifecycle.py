"""The life of one gRPC server: bind, serve, answer Handshake and Shutdown, and stop cleanly.

Shared by :class:`~rlmesh_gym.serve.env_server.EnvServer` and
:class:`~rlmesh_gym.serve.model_server.ModelServer`; each adds its servicer and its ``Join``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator
from types import ModuleType, TracebackType
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from rlmesh_gym import __version__
from rlmesh_gym._daemon_thread import DaemonThreadExecutor
from rlmesh_gym.serve.auth import TokenInterceptor, validate_token
from rlmesh_gym.serve.endpoint import (
    DEFAULT_BIND_HOST,
    check_max_message_bytes,
    check_timeout,
    format_address,
    parse_address,
    probe_bind,
    server_options,
    warn_if_exposed,
)
from rlmesh_gym.serve.handshake import (
    EDITION_STATUS,
    PROTOCOL_GENERATION,
    SUPPORTED_WORKFLOW_EDITIONS,
    evaluate_handshake,
    resolve_edition_pin,
)

__all__ = ["ServerLifecycle"]

logger = logging.getLogger("rlmesh_gym.serve")

# How long a stop waits for ended Join handlers to finish their clean-up before closing the
# thread that runs env/model calls (their clean-up may still call into the env or model).
_HANDLER_CLEANUP_SECONDS = 3.0


class ServerLifecycle:
    """Bind/serve/stop plumbing for a grpc.aio server with optional token authentication."""

    _role = "endpoint"
    _noun = "endpoint"
    _messages: ModuleType  # the service's messages: env_pb2 or model_pb2
    _capabilities: dict[str, str]

    def __init__(
        self,
        *,
        address: str,
        token: str | None,
        edition_pin: str,
        allow_remote_shutdown: bool,
        max_message_bytes: int,
        idle_shutdown: float | None = None,
    ) -> None:
        self._idle_shutdown = check_timeout("idle_shutdown", idle_shutdown, optional=True)
        self._host, self._requested_port = parse_address(address, default_host=DEFAULT_BIND_HOST)
        self._token = validate_token(token)
        self._edition_sha256 = resolve_edition_pin(edition_pin)
        self._allow_remote_shutdown = bool(allow_remote_shutdown)
        self._max_message_bytes = check_max_message_bytes(max_message_bytes)
        self._server: grpc.aio.Server | None = None
        self._port: int | None = None
        self._stopped: asyncio.Event | None = None
        self._stop_task: asyncio.Task[None] | None = None
        self._exposure_warning: str | None = None
        # The served env's or model's calls run here, so one that hangs never blocks this loop.
        self._calls = DaemonThreadExecutor(f"rlmesh-gym-{self._role}-calls")
        # RPCs in flight (an open Join stream counts until it ends) and when the last one ended.
        self._in_flight = 0
        self._quiet_since = 0.0
        self._idle_watch: asyncio.Task[None] | None = None
        self._stop_reason: str | None = None

    # -- overridden by the concrete servers ----------------------------------------------------

    _service: str  # the full gRPC service name, "rlmesh.env.v1.EnvService" or the model's

    def _register(self, server: grpc.aio.Server) -> None:
        """Serve Handshake, Join and Shutdown; the unary requests are parsed here, so corrupt bytes
        get INVALID_ARGUMENT with a plain message instead of grpc's UNKNOWN and a class name."""
        messages = self._messages
        handlers = {
            "Handshake": grpc.unary_unary_rpc_method_handler(
                self._handshake_rpc, response_serializer=messages.HandshakeResponse.SerializeToString
            ),
            "Join": grpc.stream_stream_rpc_method_handler(
                self._join_rpc,
                request_deserializer=messages.JoinRequest.FromString,
                response_serializer=messages.JoinResponse.SerializeToString,
            ),
            "Shutdown": grpc.unary_unary_rpc_method_handler(
                self._shutdown_rpc, response_serializer=messages.ShutdownResponse.SerializeToString
            ),
        }
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(self._service, handlers),))

    async def _on_stop(self) -> None:
        """End open sessions before the server stops (default: nothing to end)."""

    def _oversize_reply(self, response: Any, operation: str) -> str | None:
        """Why ``response`` cannot be sent (larger than this server's limit), else ``None``.

        gRPC would fail the whole ``Join`` stream on such a reply; the servers answer the one
        request with an in-band INTERNAL error instead, so the session stays usable.
        """
        size = response.ByteSize()
        if size <= self._max_message_bytes:
            return None
        return (
            f"{operation} reply of {size} bytes exceeds the server's max message size of "
            f"{self._max_message_bytes} bytes; serve with a larger max_message_bytes (--max-message-mb) "
            "and give the client the same limit"
        )

    # -- public lifecycle ----------------------------------------------------------------------

    @property
    def address(self) -> str:
        """The bound ``HOST:PORT`` (the real port when 0 was requested); needs :meth:`start`."""
        if self._port is None:
            raise RuntimeError(f"{type(self).__name__} is not started; await start() first")
        return format_address(self._host, self._port)

    @property
    def port(self) -> int:
        """The bound TCP port; needs :meth:`start`."""
        if self._port is None:
            raise RuntimeError(f"{type(self).__name__} is not started; await start() first")
        return self._port

    @property
    def stop_reason(self) -> str | None:
        """Why the server stopped or is stopping: ``"idle timeout"``, ``"remote shutdown: <reason>"``,
        ``"stopped"`` (:meth:`stop`); ``None`` while it serves."""
        return self._stop_reason

    @property
    def call_in_progress(self) -> bool:
        """Whether a call into the served object has not returned (a hung ``step`` or ``predict``)."""
        return self._calls.busy

    @property
    def exposure_warning(self) -> str | None:
        """The warning given when the server binds beyond loopback without a token, else ``None``."""
        return self._exposure_warning

    async def start(self) -> str:
        """Bind and start serving; return the bound ``HOST:PORT``. OSError when the port is taken."""
        if self._server is not None:
            raise RuntimeError(f"{type(self).__name__} is already started at {self.address}")
        interceptors = [] if self._token is None else [TokenInterceptor(self._token, self._role)]
        server = grpc.aio.server(interceptors=interceptors, options=server_options(self._max_message_bytes))
        self._register(server)
        target = format_address(self._host, self._requested_port)
        cause: BaseException | None = probe_bind(self._host, self._requested_port)
        port = 0
        if cause is None:
            try:
                port = server.add_insecure_port(target)
            except RuntimeError as error:
                cause = error
        if port == 0:
            await server.stop(None)
            reason = f": {cause.strerror.lower()}" if isinstance(cause, OSError) and cause.strerror else ""
            raise OSError(
                f"{self._role} server could not bind {target}{reason} (is the port already in use, or the "
                "host not an address of this machine?)"
            ) from cause
        self._exposure_warning = warn_if_exposed(self._host, self._token, self._role)
        await server.start()
        self._server = server
        self._port = port
        self._stopped = asyncio.Event()
        self._quiet_since = time.monotonic()
        if self._idle_shutdown is not None:
            self._idle_watch = asyncio.get_running_loop().create_task(self._watch_idle(self._idle_shutdown))
        logger.info("%s server listening on %s", self._role, self.address)
        return self.address

    async def stop(self, grace: float | None = 1.0) -> None:
        """Stop serving: end open sessions, then let in-flight RPCs finish for ``grace`` seconds."""
        if self._server is None:
            return
        self._begin_stop("stopped", grace)
        assert self._stop_task is not None
        await asyncio.shield(self._stop_task)

    def _begin_stop(self, reason: str, grace: float | None) -> None:
        """Start stopping (once; the first reason is kept), in a task of its own."""
        if self._stop_task is None:
            self._stop_reason = reason
            if reason != "stopped":
                logger.info("%s server on %s shutting down: %s", self._role, self.address, reason)
            self._stop_task = asyncio.get_running_loop().create_task(self._stop(grace))

    async def _stop(self, grace: float | None) -> None:
        server, stopped = self._server, self._stopped
        if server is None or stopped is None:
            return
        if self._idle_watch is not None and self._idle_watch is not asyncio.current_task():
            self._idle_watch.cancel()
        try:
            await self._on_stop()
        finally:
            await server.stop(grace)
            # Let the ended handlers finish their clean-up (it may still call into the env or model).
            deadline = time.monotonic() + _HANDLER_CLEANUP_SECONDS
            while self._in_flight and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
            if not await self._calls.close(timeout=1.0):
                logger.warning(
                    "%s server on %s: a call into the %s has not returned; it is left running in a "
                    "daemon thread",
                    self._role,
                    self.address,
                    self._noun,
                )
            stopped.set()
            logger.info("%s server on %s stopped", self._role, self.address)

    async def wait_closed(self) -> None:
        """Return once the server has stopped (:meth:`stop`, or an accepted remote Shutdown)."""
        if self._stopped is None:
            raise RuntimeError(f"{type(self).__name__} is not started; await start() first")
        await self._stopped.wait()
        if self._stop_task is not None:
            await self._stop_task

    @property
    def serving(self) -> bool:
        """Whether the server is started and not yet stopped."""
        return self._stopped is not None and not self._stopped.is_set()

    async def __aenter__(self) -> ServerLifecycle:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    # -- activity: what keeps the idle shutdown from firing -------------------------------------

    def _begin_activity(self) -> None:
        self._in_flight += 1

    def _end_activity(self) -> None:
        self._in_flight -= 1
        if not self._in_flight:
            self._quiet_since = time.monotonic()

    async def _watch_idle(self, idle_shutdown: float) -> None:
        """Stop the server (reason ``"idle timeout"``) after ``idle_shutdown`` s with no RPC in flight."""
        while True:
            quiet = 0.0 if self._in_flight else time.monotonic() - self._quiet_since
            if not self._in_flight and quiet >= idle_shutdown:
                self._begin_stop("idle timeout", 1.0)
                return
            await asyncio.sleep(idle_shutdown - quiet if not self._in_flight else min(idle_shutdown, 0.5))

    async def _join_rpc(self, requests: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        """The service's ``Join``: the stream counts as activity from its start to its very end."""
        self._begin_activity()
        stream = self._join(requests, context)
        try:
            async for response in stream:
                yield response
        finally:
            try:
                if isinstance(stream, AsyncGenerator):  # every _join is an async generator
                    await stream.aclose()
            finally:
                self._end_activity()

    def _join(self, requests: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        raise TypeError(f"{type(self).__name__} must implement Join")

    # -- Handshake and Shutdown RPCs --------------------------------------------------------------

    async def _handshake_rpc(self, data: bytes, context: grpc.aio.ServicerContext) -> Any:
        self._begin_activity()
        try:
            request = await _parse(self._messages.HandshakeRequest, data, context)
            return self._handshake(request)
        finally:
            self._end_activity()

    def _handshake(self, request: Any) -> Any:
        """Upstream's ``HandshakeResponse``: the verdict on ``request``, our editions and capabilities."""
        verdict = evaluate_handshake(request, self._edition_sha256, __version__)
        response = self._messages.HandshakeResponse(
            compatible=verdict.compatible,
            server_protocol_generation=PROTOCOL_GENERATION,
            min_supported_protocol_generation=PROTOCOL_GENERATION,
            error_message=verdict.error_message,
            capabilities=self._capabilities,
            supported_workflow_editions=list(SUPPORTED_WORKFLOW_EDITIONS),
            server_version=__version__,
        )
        if verdict.compatible:
            response.selected_workflow_edition = verdict.selected_edition
            response.selected_edition_spec_sha256 = self._edition_sha256
            response.selected_edition_status = EDITION_STATUS
        else:
            logger.warning(
                "%s server refused a handshake from %s %s: %s",
                self._role,
                request.client_name,
                request.client_version,
                verdict.error_message,
            )
        return response

    async def _shutdown_rpc(self, data: bytes, context: grpc.aio.ServicerContext) -> Any:
        self._begin_activity()
        try:
            request = await _parse(self._messages.ShutdownRequest, data, context)
            accepted, message = self._answer_shutdown(request.reason)
            return self._messages.ShutdownResponse(accepted=accepted, message=message)
        finally:
            self._end_activity()

    def _answer_shutdown(self, reason: str) -> tuple[bool, str]:
        """Upstream's Shutdown answer; when accepted the server stops right after replying."""
        if not self._allow_remote_shutdown:
            return False, f"remote shutdown is disabled for this {self._noun} endpoint"
        # A task, so the Shutdown reply goes out first: the grace period lets that RPC finish.
        self._begin_stop(f"remote shutdown: {reason}", 1.0)
        return True, f"shutdown accepted: {reason}"


async def _parse(message_type: Any, data: bytes, context: grpc.aio.ServicerContext) -> Any:
    """``data`` as a ``message_type``; bytes that do not parse abort the call with INVALID_ARGUMENT."""
    try:
        return message_type.FromString(data)
    except DecodeError as error:
        await context.abort(
            grpc.StatusCode.INVALID_ARGUMENT, f"malformed {message_type.DESCRIPTOR.name}: {error}"
        )
