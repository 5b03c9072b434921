"""A live ``rlmesh==0.1.0b3`` env server, driven through our own generated gRPC stubs.

Shared by the test packages that need the upstream peer (spaces now, gRPC transport later)::

    with B3EnvPeer(env) as peer:
        contract = peer.handshake().env_contract
        with peer.join() as session:
            reset = session.reset(seeds=[3])          # env_pb2.ResetResponse
            step = session.step(action_bytes)         # env_pb2.StepResponse

Every network wait is bounded (``timeout`` seconds per RPC and per stream response); leaving
the ``with`` block closes the stream, the channel and the server, and frees the port.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from types import TracebackType
from typing import Any

import grpc
import rlmesh

from rlmesh_gym.proto import env_pb2, env_pb2_grpc, spaces_pb2

B3_EDITION_SHA256 = "c03b0c916521485492aa02507cacb7888a0752fc72860e53231296de4a27007f"
PROTOCOL_GENERATION = "rlmesh.protocol.v1"
WORKFLOW_EDITION = "2026.06"
EDITION_STATUS = "provisional"
_MAX_MESSAGE = 256 * 1024 * 1024
_END = object()


def handshake_request() -> env_pb2.HandshakeRequest:
    """The HandshakeRequest a b3 peer accepts (docs/design/wire.md#handshake)."""
    return env_pb2.HandshakeRequest(
        protocol_generation=PROTOCOL_GENERATION,
        client_name="rlmesh-gym-tests",
        client_version="0.1.0",
        capabilities={"rlmesh.env.service.v1": "true", "rlmesh.spaces.core.v1": "true"},
        supported_workflow_editions=[WORKFLOW_EDITION],
        offered_edition_spec_sha256=B3_EDITION_SHA256,
        offered_edition_status=EDITION_STATUS,
    )


class JoinError(AssertionError):
    """The peer answered a Join request with an EnvError or an unexpected response kind."""


class JoinSession:
    """One open ``Join`` stream: send a request, wait (bounded) for its one response."""

    def __init__(self, stub: env_pb2_grpc.EnvServiceStub, timeout: float) -> None:
        self._requests: queue.Queue[Any] = queue.Queue()
        self._timeout = timeout
        self._counter = 0
        self._call = stub.Join(self._request_stream(), timeout=timeout * 10)
        self._closed = False

    def _request_stream(self) -> Iterator[env_pb2.JoinRequest]:
        while True:
            item = self._requests.get()
            if item is _END:
                return
            yield item

    def request(self, request: env_pb2.JoinRequest) -> env_pb2.JoinResponse:
        """Send one JoinRequest (a fresh request_id is set when empty) and return its response."""
        if not request.request_id:
            self._counter += 1
            request.request_id = f"test-req-{self._counter}"
        self._requests.put(request)
        response = _next_with_timeout(self._call, self._timeout)
        if response.request_id != request.request_id:
            raise JoinError(f"response request_id {response.request_id!r} != {request.request_id!r}")
        return response

    def _expect(self, request: env_pb2.JoinRequest, kind: str) -> Any:
        response = self.request(request)
        got = response.WhichOneof("kind")
        if got != kind:
            raise JoinError(f"expected a {kind} response, got {got}: {response}")
        return getattr(response, kind)

    def reset(self, seeds: list[int] | None = None) -> env_pb2.ResetResponse:
        return self._expect(env_pb2.JoinRequest(reset=env_pb2.ResetRequest(seeds=seeds or [])), "reset")

    def step(self, action: bytes) -> env_pb2.StepResponse:
        value = spaces_pb2.SpaceValue()
        value.bytes.data = action
        return self._expect(env_pb2.JoinRequest(step=env_pb2.StepRequest(action=value)), "step")

    def close(self) -> env_pb2.CloseResponse | None:
        """Send Close and end the stream; returns the CloseResponse (None if already closed)."""
        if self._closed:
            return None
        self._closed = True
        try:
            return self._expect(env_pb2.JoinRequest(close=env_pb2.CloseRequest(reason="test done")), "close")
        finally:
            self._requests.put(_END)
            self._call.cancel()

    def abort(self) -> None:
        if not self._closed:
            self._closed = True
            self._requests.put(_END)
            self._call.cancel()

    def __enter__(self) -> JoinSession:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def _next_with_timeout(call: Any, timeout: float) -> Any:
    """``next(call)`` bounded by ``timeout`` seconds (the stream deadline bounds it as well)."""
    box: list[Any] = []

    def pull() -> None:
        try:
            box.append(("ok", next(call)))
        except BaseException as exc:  # re-raised in the caller's thread
            box.append(("err", exc))

    worker = threading.Thread(target=pull, daemon=True)
    worker.start()
    worker.join(timeout)
    if not box:
        call.cancel()
        worker.join(timeout)
        raise TimeoutError(f"no Join response within {timeout} s")
    status, value = box[0]
    if status == "err":
        raise value
    return value


class B3EnvPeer:
    """Serve ``env`` with ``rlmesh.EnvServer`` on 127.0.0.1 (a free port) and connect to it."""

    def __init__(self, env: Any, *, timeout: float = 10.0) -> None:
        self.env = env
        self.timeout = timeout
        self._server: rlmesh.EnvServer | None = None
        self._channel: grpc.Channel | None = None
        self.stub: env_pb2_grpc.EnvServiceStub | None = None
        self.address = ""
        self.port = 0

    def __enter__(self) -> B3EnvPeer:
        self._server = rlmesh.EnvServer(self.env, "127.0.0.1:0")
        try:
            self._server.start()
            self.address = self._server.address.removeprefix("tcp://")
            self.port = int(self.address.rsplit(":", 1)[1])
            self._channel = grpc.insecure_channel(
                self.address,
                options=[
                    ("grpc.max_send_message_length", _MAX_MESSAGE),
                    ("grpc.max_receive_message_length", _MAX_MESSAGE),
                ],
            )
            self.stub = env_pb2_grpc.EnvServiceStub(self._channel)
        except BaseException:
            self.close()
            raise
        return self

    def handshake(self, request: env_pb2.HandshakeRequest | None = None) -> env_pb2.HandshakeResponse:
        assert self.stub is not None, "use B3EnvPeer as a context manager"
        return self.stub.Handshake(request or handshake_request(), timeout=self.timeout)

    def contract(self) -> env_pb2.EnvContract:
        """Handshake and return the env contract; fails when the peer says incompatible."""
        response = self.handshake()
        if not response.compatible:
            raise AssertionError(f"b3 handshake refused: {response.error_message}")
        return response.env_contract

    def join(self) -> JoinSession:
        assert self.stub is not None, "use B3EnvPeer as a context manager"
        return JoinSession(self.stub, self.timeout)

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self._server is not None:
            self._server.shutdown()
            stopped = self._server.wait(self.timeout)
            self._server = None
            if not stopped:
                raise TimeoutError(f"b3 EnvServer on {self.address} did not stop within {self.timeout} s")

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
