"""A client's session with an rlmesh peer: connecting to it, and the state both clients share.

Connecting checks the address, token and edition pin, opens the channel, waits for the server,
handshakes (the answer must match our pin) and opens the one ``Join`` stream; any failure
closes what was opened and raises the matching
:class:`~rlmesh_gym.serve.errors.RemoteConnectionError`.
:class:`~rlmesh_gym.serve.env_client.RemoteEnv` and
:class:`~rlmesh_gym.serve.model_client.RemoteModel` build on :class:`PeerSession`;
``fetch_contract`` stops after the handshake.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass
from types import ModuleType, TracebackType
from typing import Any, TypeVar

import grpc

from rlmesh_gym._deadline import wait_within
from rlmesh_gym.serve._grpc_errors import connect_error, describe_finished_call, describe_rpc_error
from rlmesh_gym.serve.auth import call_metadata, validate_token
from rlmesh_gym.serve.endpoint import channel_options, check_timeout, format_address, parse_address
from rlmesh_gym.serve.errors import HandshakeRejectedError, PeerUnavailableError
from rlmesh_gym.serve.handshake import (
    Role,
    check_handshake_response,
    handshake_request,
    resolve_edition_pin,
)

__all__ = ["JoinStream", "PeerSession", "PeerTarget", "handshake", "open_join_stream"]

Metadata = tuple[tuple[str, str], ...] | None

_SessionT = TypeVar("_SessionT", bound="PeerSession")


@dataclass(frozen=True, slots=True)
class PeerTarget:
    """Where a peer is (``HOST:PORT``), the metadata every call carries, and the edition pin's SHA-256."""

    address: str
    metadata: Metadata
    edition_sha256: str

    @classmethod
    def check(cls, address: str, token: str | None, edition_pin: str) -> PeerTarget:
        """The target for these arguments; ValueError/TypeError names the one that is unusable."""
        host, port = parse_address(address)
        return cls(
            format_address(host, port), call_metadata(validate_token(token)), resolve_edition_pin(edition_pin)
        )


async def handshake(
    channel: grpc.aio.Channel, peer: PeerTarget, role: Role, stub_type: Any, timeout: float
) -> tuple[Any, Any]:
    """Wait for the server, handshake, and check the answer; the stub and the ``HandshakeResponse``."""
    try:
        await wait_within(channel.channel_ready(), timeout)
    except asyncio.TimeoutError:
        raise PeerUnavailableError(
            peer.address, f"no server answered within {timeout:g}s (is the {role} server running?)"
        ) from None
    stub = stub_type(channel)
    try:
        response = await stub.Handshake(
            handshake_request(role, peer.edition_sha256), timeout=timeout, metadata=peer.metadata
        )
    except grpc.aio.AioRpcError as error:
        raise connect_error(peer.address, error, role) from error
    problem = check_handshake_response(response, peer.edition_sha256)
    if problem is not None:
        raise HandshakeRejectedError(peer.address, problem)
    return stub, response


@dataclass(slots=True)
class JoinStream:
    """A connected peer: its channel, stub, handshake answer and open ``Join`` call."""

    address: str
    metadata: Metadata
    channel: grpc.aio.Channel
    stub: Any
    handshake: Any
    call: grpc.aio.StreamStreamCall
    request_timeout: float | None

    async def abandon(self) -> None:
        """Cancel the call and close the channel (the session will not be used)."""
        self.call.cancel()
        await self.channel.close()


async def open_join_stream(
    address: str,
    *,
    role: Role,
    stub_type: Any,
    token: str | None,
    edition_pin: str,
    connect_timeout: float,
    request_timeout: float | None,
    max_message_bytes: int,
) -> JoinStream:
    """Connect to the ``role`` server at ``address``, handshake and open the ``Join`` stream.

    Raises the :class:`~rlmesh_gym.serve.errors.RemoteConnectionError` that says what failed;
    nothing stays open then. A server that ended the stream without an error status returns a
    call that is already done.
    """
    peer = PeerTarget.check(address, token, edition_pin)
    connect_timeout = check_timeout("connect_timeout", connect_timeout, optional=False)
    request_timeout = check_timeout("request_timeout", request_timeout, optional=True)
    channel = grpc.aio.insecure_channel(peer.address, options=channel_options(max_message_bytes))
    call: grpc.aio.StreamStreamCall | None = None
    try:
        stub, response = await handshake(channel, peer, role, stub_type, connect_timeout)
        call = stub.Join(metadata=peer.metadata)
        try:
            await wait_within(call.initial_metadata(), connect_timeout)
        except asyncio.TimeoutError:
            raise PeerUnavailableError(
                peer.address, f"the {role} server did not open the Join stream within {connect_timeout:g}s"
            ) from None
        if call.done():
            # The server refused the stream outright (another client holds the session, ...).
            try:
                await call.read()
            except grpc.aio.AioRpcError as error:
                raise connect_error(peer.address, error, role) from error
    except BaseException:
        if call is not None:
            call.cancel()
        await channel.close()
        raise
    return JoinStream(peer.address, peer.metadata, channel, stub, response, call, request_timeout)


class PeerSession(ABC):
    """The state a client keeps for its ``Join`` session, and what both clients do the same way.

    Subclasses set ``_role`` and ``_messages`` and give :meth:`_session_error`.

    Attributes:
        address: The server's ``HOST:PORT``.
        handshake: The server's ``HandshakeResponse``.
    """

    _role: Role
    _messages: ModuleType  # env_pb2 or model_pb2

    def __init__(self, stream: JoinStream, max_message_bytes: int) -> None:
        self.address = stream.address
        self.handshake = stream.handshake
        self._channel = stream.channel
        self._call = stream.call
        self._stub = stream.stub
        self._metadata = stream.metadata
        self._request_timeout = stream.request_timeout
        self._max_message_bytes = max_message_bytes
        self._broken: str | None = None  # why the session is unusable
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def _state(self) -> str:
        return "closed" if self._closed else "broken" if self._broken else "open"

    @abstractmethod
    def _session_error(self, operation: str, message: str) -> Exception:
        """The runtime error for a failed ``operation`` (EnvRpcError or ModelRpcError)."""

    @abstractmethod
    async def close(self, timeout: float = 5.0, reason: str = "client closed the session") -> None:
        """End the session and close the channel (idempotent)."""

    async def _transport_failure(self, error: Exception) -> str:
        """Why the stream broke, from what a write or read on it raised."""
        if isinstance(error, grpc.aio.AioRpcError):
            return describe_rpc_error(error, self._max_message_bytes)
        return await describe_finished_call(self._call, error, self._max_message_bytes)

    @staticmethod
    def _telemetry(response: Any) -> Any:
        """The reply's ``telemetry``, or ``None`` when the server sent none."""
        return response.telemetry if response.HasField("telemetry") else None

    def _oversize(self, kind: str | None, request: Any) -> str | None:
        """Why gRPC would refuse ``request`` as too large, else ``None``."""
        size = request.ByteSize()
        if size <= self._max_message_bytes:
            return None
        return (
            f"{kind} request of {size} bytes exceeds max_message_bytes={self._max_message_bytes} of this "
            "client; nothing was sent (raise the limit on both peers for larger batches)"
        )

    async def shutdown(self, reason: str = "owner shutdown", timeout: float = 5.0) -> bool:
        """Ask the server to stop (it must allow remote shutdown); return whether it accepted."""
        try:
            response = await self._stub.Shutdown(
                self._messages.ShutdownRequest(reason=reason), timeout=timeout, metadata=self._metadata
            )
        except grpc.aio.AioRpcError as error:
            raise self._session_error(
                f"{self._role}.shutdown", describe_rpc_error(error, self._max_message_bytes)
            ) from error
        return response.accepted

    async def __aenter__(self: _SessionT) -> _SessionT:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()
