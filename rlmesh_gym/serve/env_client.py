"""``RemoteEnv``: a :class:`~rlmesh_gym.runtime.RuntimeEnv` over any rlmesh EnvService.

It lets the Python driver (and :func:`rlmesh_gym.evaluate`) drive an env served by
``rlmesh.EnvServer``, ``rlmesh-gym serve-env`` or any other rlmesh env endpoint::

    import asyncio
    from rlmesh_gym.serve import RemoteEnv

    async def main():
        env = await RemoteEnv.connect("127.0.0.1:50051", token=None, edition_pin="b3")
        print(env.contract.id, env.num_envs)
        ...                                   # RuntimeDriver(spec, env, model).run()
        await env.close(5.0)                  # sends Close, ends the stream, closes the channel

    asyncio.run(main())

``connect`` opens the channel, handshakes (the edition pin must match the server's) and opens
the one ``Join`` stream right away, so a server that already has a client fails the connect
with :class:`~rlmesh_gym.serve.errors.SessionBusyError`. Requests then go one at a time with
ids ``rlmesh-gym-req-1``, ``-2``, ...; failures raise
:class:`~rlmesh_gym.runtime.errors.EnvRpcError` (in-band server errors as its subclass
:class:`~rlmesh_gym.serve.errors.RemoteEnvError`, with the server's recoverability). After a
transport failure or a request timeout the session is broken and every later request fails
at once with the same cause.
"""

from __future__ import annotations

import asyncio

import grpc

from rlmesh_gym._deadline import wait_within
from rlmesh_gym.proto import env_pb2, env_pb2_grpc
from rlmesh_gym.runtime.errors import EnvRpcError
from rlmesh_gym.runtime.seams import RuntimeEnv, RuntimeEnvReset, RuntimeEnvStep
from rlmesh_gym.serve._grpc_errors import describe_rpc_error, error_code_name
from rlmesh_gym.serve._peer_session import JoinStream, PeerSession, PeerTarget, handshake, open_join_stream
from rlmesh_gym.serve.endpoint import DEFAULT_MAX_MESSAGE_BYTES, channel_options, check_timeout
from rlmesh_gym.serve.errors import RemoteConnectionError, RemoteEnvError
from rlmesh_gym.serve.handshake import DEFAULT_EDITION_PIN

__all__ = ["RemoteEnv", "fetch_contract"]

_EXPECTED_KIND = {"reset": "reset", "step": "step", "render": "render", "close": "close"}


class RemoteEnv(PeerSession, RuntimeEnv):
    """An rlmesh env endpoint as a RuntimeEnv; create it with :meth:`connect`.

    Attributes:
        address: The ``HOST:PORT`` connected to.
        contract: The server's ``EnvContract`` (``num_envs`` at least 1).
        handshake: The server's full ``HandshakeResponse``.
        final_episodes: After :meth:`close`, the episodes the server ended (``CloseResponse``).
    """

    _role = "env"
    _messages = env_pb2

    def __init__(self, stream: JoinStream, max_message_bytes: int) -> None:
        super().__init__(stream, max_message_bytes)
        self.contract = env_pb2.EnvContract()
        self.contract.CopyFrom(stream.handshake.env_contract)
        self.contract.num_envs = max(1, self.contract.num_envs)
        self.final_episodes: list[env_pb2.EpisodeMetadata] = []
        self._lock = asyncio.Lock()
        self._counter = 0
        self._steps = 0

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
    ) -> RemoteEnv:
        """Connect to the env server at ``address`` (``HOST:PORT``), handshake and open the session.

        Args:
            token: Sent as ``authorization`` metadata on every RPC when the server needs one.
            edition_pin: ``"b3"`` (default), ``"rc1"`` or a 64-hex SHA; must match the server's.
            connect_timeout: Seconds to wait for the server, the handshake and the stream.
            request_timeout: Seconds to wait for each reply (``None``: as long as it takes; the
                driver's own limits still apply).
            max_message_bytes: gRPC send and receive limit (256 MiB by default).

        Raises:
            PeerUnavailableError: nothing answered within ``connect_timeout``.
            AuthenticationError: the server refused the token.
            HandshakeRejectedError: protocol generation, edition or edition pin mismatch.
            SessionBusyError: the server already has a client.
        """
        stream = await open_join_stream(
            address,
            role="env",
            stub_type=env_pb2_grpc.EnvServiceStub,
            token=token,
            edition_pin=edition_pin,
            connect_timeout=connect_timeout,
            request_timeout=request_timeout,
            max_message_bytes=max_message_bytes,
        )
        if stream.call.done():
            await stream.abandon()
            raise RemoteConnectionError(stream.address, "the env server ended the Join stream at once")
        return cls(stream, max_message_bytes)

    @property
    def num_envs(self) -> int:
        """The number of lanes the server steps together."""
        return self.contract.num_envs

    def __repr__(self) -> str:
        return f"RemoteEnv({self.address}, {self.contract.id}, num_envs={self.num_envs}, {self._state()})"

    # -- RuntimeEnv ------------------------------------------------------------------------------

    async def reset(self, request: env_pb2.ResetRequest) -> RuntimeEnvReset:
        """Send ``request`` as a Join ``reset`` and return the server's ``ResetResponse``."""
        response = await self._request("env.reset", self._steps, env_pb2.JoinRequest(reset=request))
        return RuntimeEnvReset(response.reset, self._telemetry(response))

    async def step(self, request: env_pb2.StepRequest) -> RuntimeEnvStep:
        """Send ``request`` as a Join ``step`` and return the server's ``StepResponse``."""
        response = await self._request("env.step", self._steps + 1, env_pb2.JoinRequest(step=request))
        self._steps += 1
        return RuntimeEnvStep(response.step, self._telemetry(response))

    async def render(self, lane: int = 0, *, timeout_ms: int = 0) -> bytes | None:
        """The PNG frame of ``lane``, or ``None`` when the env gave none."""
        if isinstance(lane, bool) or not isinstance(lane, int) or not 0 <= lane < self.num_envs:
            raise ValueError(f"lane must be an int in 0..{self.num_envs - 1}, got {lane!r}")
        mask = bytes(1 if i == lane else 0 for i in range(self.num_envs))
        request = env_pb2.JoinRequest(render=env_pb2.RenderRequest(mask=mask, timeout_ms=timeout_ms))
        response = await self._request("env.render", self._steps, request)
        return response.render.png_frame if response.render.HasField("png_frame") else None

    async def close(self, timeout: float = 5.0, reason: str = "client closed the session") -> None:
        """Send ``Close``, keep the server's ``final_episodes``, end the stream and close the channel.

        Idempotent. Raises :class:`EnvRpcError` when the server could not be told (the channel is
        closed either way).
        """
        if self._closed:
            return
        self._closed = True
        try:
            if self._broken is None:
                request = env_pb2.JoinRequest(close=env_pb2.CloseRequest(reason=reason))
                response = await wait_within(self._exchange("env.close", self._steps, request), timeout)
                self.final_episodes = list(response.close.final_episodes)
                await wait_within(self._finish_stream(), timeout)
        except asyncio.TimeoutError:
            raise EnvRpcError(
                "env.close", self._steps, f"the env server did not answer Close within {timeout:g}s"
            ) from None
        finally:
            self._call.cancel()
            await self._channel.close()

    def _session_error(self, operation: str, message: str) -> EnvRpcError:
        return EnvRpcError(operation, self._steps, message)

    # -- the Join stream ---------------------------------------------------------------------------

    async def _request(self, operation: str, step: int, request: env_pb2.JoinRequest) -> env_pb2.JoinResponse:
        if self._closed:
            raise EnvRpcError(operation, step, f"the session with {self.address} is closed")
        if self._request_timeout is None:
            response = await self._exchange(operation, step, request)
        else:
            try:
                response = await wait_within(self._exchange(operation, step, request), self._request_timeout)
            except asyncio.TimeoutError:
                # Cancelling the read cancelled the stream: the session cannot be resumed.
                self._broken = (
                    f"no reply from {self.address} within request_timeout={self._request_timeout:g}s"
                )
                raise EnvRpcError(operation, step, self._broken) from None
        if response.WhichOneof("kind") == "error":
            error = response.error
            raise RemoteEnvError(
                operation,
                step,
                error.code,
                error_code_name(env_pb2.EnvErrorCode, error.code),
                error.message,
                error.is_recoverable,
            )
        return response

    async def _exchange(
        self, operation: str, step: int, request: env_pb2.JoinRequest
    ) -> env_pb2.JoinResponse:
        if self._broken is not None:
            raise EnvRpcError(operation, step, f"session unusable after an earlier failure: {self._broken}")
        kind = request.WhichOneof("kind")
        oversize = self._oversize(kind, request)
        if oversize is not None:
            # gRPC would fail the whole stream with an opaque error; refuse this one request instead.
            raise EnvRpcError(operation, step, oversize, recoverable=True)
        async with self._lock:
            self._counter += 1
            request_id = f"rlmesh-gym-req-{self._counter}"
            request.request_id = request_id
            try:
                await self._call.write(request)
                while True:
                    response = await self._call.read()
                    if response is grpc.aio.EOF:
                        self._broken = "transport error: connection closed (the env server ended the stream)"
                        raise EnvRpcError(operation, step, self._broken)
                    if response.request_id == request_id:
                        break
                    # A reply to some earlier request: upstream clients skip those too.
            except (grpc.aio.AioRpcError, grpc.aio.UsageError, asyncio.InvalidStateError) as error:
                self._broken = await self._transport_failure(error)
                raise EnvRpcError(operation, step, self._broken) from error
        answered = response.WhichOneof("kind")
        if answered not in (_EXPECTED_KIND[kind], "error"):
            raise EnvRpcError(
                operation, step, f"protocol error: the env server answered a {kind} request with {answered!r}"
            )
        return response

    async def _finish_stream(self) -> None:
        try:
            await self._call.done_writing()
            while await self._call.read() is not grpc.aio.EOF:
                pass
        except grpc.aio.AioRpcError as error:
            if error.code() != grpc.StatusCode.OK:
                raise EnvRpcError(
                    "env.close", self._steps, describe_rpc_error(error, self._max_message_bytes)
                ) from error


async def fetch_contract(
    address: str,
    *,
    token: str | None = None,
    edition_pin: str = DEFAULT_EDITION_PIN,
    timeout: float = 10.0,
) -> env_pb2.EnvContract:
    """The ``EnvContract`` of the env server at ``address``, from a handshake alone.

    No ``Join`` stream is opened, so this works while another client holds the session.
    Raises the same connect errors as :meth:`RemoteEnv.connect`.
    """
    peer = PeerTarget.check(address, token, edition_pin)
    timeout = check_timeout("timeout", timeout, optional=False)
    async with grpc.aio.insecure_channel(peer.address, options=channel_options()) as channel:
        _, response = await handshake(channel, peer, "env", env_pb2_grpc.EnvServiceStub, timeout)
    contract = env_pb2.EnvContract()
    contract.CopyFrom(response.env_contract)
    contract.num_envs = max(1, contract.num_envs)
    return contract
