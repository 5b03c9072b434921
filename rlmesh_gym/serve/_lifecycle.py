"""The life of one gRPC server: bind, serve, answer Handshake and Shutdown, and stop cleanly.

Shared by :class:`~rlmesh_gym.serve.env_server.EnvServer` and
:class:`~rlmesh_gym.serve.model_server.ModelServer`; each adds its servicer and its ``Join``.
"""

from __future__ import annotations

import asyncio
import logging
from types import ModuleType, TracebackType
from typing import Any

import grpc

from rlmesh_gym import __version__
from rlmesh_gym.serve.auth import TokenInterceptor, validate_token
from rlmesh_gym.serve.endpoint import (
    DEFAULT_BIND_HOST,
    check_max_message_bytes,
    format_address,
    parse_address,
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
    ) -> None:
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

    # -- overridden by the concrete servers ----------------------------------------------------

    def _register(self, server: grpc.aio.Server) -> None:
        raise TypeError(f"{type(self).__name__} must register its servicer")

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
        try:
            port = server.add_insecure_port(target)
        except RuntimeError as error:
            port = 0
            cause: BaseException | None = error
        else:
            cause = None
        if port == 0:
            await server.stop(None)
            raise OSError(
                f"{self._role} server could not bind {target} (is the port already in use, or the host not "
                "an address of this machine?)"
            ) from cause
        self._exposure_warning = warn_if_exposed(self._host, self._token, self._role)
        await server.start()
        self._server = server
        self._port = port
        self._stopped = asyncio.Event()
        logger.info("%s server listening on %s", self._role, self.address)
        return self.address

    async def stop(self, grace: float | None = 1.0) -> None:
        """Stop serving: end open sessions, then let in-flight RPCs finish for ``grace`` seconds."""
        if self._server is None:
            return
        if self._stop_task is None:
            self._stop_task = asyncio.get_running_loop().create_task(self._stop(grace))
        await asyncio.shield(self._stop_task)

    async def _stop(self, grace: float | None) -> None:
        server, stopped = self._server, self._stopped
        if server is None or stopped is None:
            return
        try:
            await self._on_stop()
        finally:
            await server.stop(grace)
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

    # -- Handshake and Shutdown RPCs --------------------------------------------------------------

    async def _handshake_rpc(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return self._handshake(request)

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

    async def _shutdown_rpc(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        accepted, message = self._answer_shutdown(request.reason)
        return self._messages.ShutdownResponse(accepted=accepted, message=message)

    def _answer_shutdown(self, reason: str) -> tuple[bool, str]:
        """Upstream's Shutdown answer; when accepted the server stops right after replying."""
        if not self._allow_remote_shutdown:
            return False, f"remote shutdown is disabled for this {self._noun} endpoint"
        logger.info("%s server on %s: remote shutdown accepted (%s)", self._role, self.address, reason)
        if self._stop_task is None:
            # A task, so the Shutdown reply goes out first: the grace period lets that RPC finish.
            self._stop_task = asyncio.get_running_loop().create_task(self._stop(1.0))
        return True, f"shutdown accepted: {reason}"
