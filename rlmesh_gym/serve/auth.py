"""Who may connect: rlmesh's optional shared token (docs/design/wire.md#env-session).

With a token configured, every RPC must carry the gRPC metadata ``authorization: <token>``,
the raw token compared exactly (no ``Bearer`` prefix). Anything else fails with
``UNAUTHENTICATED`` and upstream's message (``invalid env token`` / ``invalid model token``).
An empty or ``None`` token switches authentication off.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

__all__ = ["AUTHORIZATION_KEY", "TokenInterceptor", "call_metadata", "validate_token"]

AUTHORIZATION_KEY = "authorization"


def validate_token(token: str | None) -> str | None:
    """``token`` if it can travel as a gRPC metadata value, ``None`` for no token; else ValueError."""
    if token is None or token == "":
        return None
    if not isinstance(token, str):
        raise TypeError(f"token must be a str or None, got {type(token).__name__}")
    if not all(0x20 <= ord(char) < 0x7F for char in token) or token != token.strip():
        raise ValueError(
            "token must be printable ASCII without leading or trailing spaces (it is sent as the gRPC "
            "'authorization' metadata value)"
        )
    return token


def call_metadata(token: str | None) -> tuple[tuple[str, str], ...] | None:
    """The metadata a client attaches to every RPC for ``token`` (``None`` when there is none)."""
    return None if token is None else ((AUTHORIZATION_KEY, token),)


class TokenInterceptor(grpc.aio.ServerInterceptor):
    """Refuse every RPC whose ``authorization`` metadata is not exactly the server's token."""

    def __init__(self, token: str, role: str) -> None:
        self._token = token.encode()
        self._message = f"invalid {role} token"

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        metadata = handler_call_details.invocation_metadata or ()
        offered = [value for key, value in metadata if key == AUTHORIZATION_KEY]
        if len(offered) == 1 and isinstance(offered[0], str):
            if hmac.compare_digest(offered[0].encode(), self._token):
                return handler
        if handler is None:
            return handler
        return self._refusal(handler)

    def _refusal(self, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        message = self._message

        async def refuse(_request: Any, context: grpc.aio.ServicerContext) -> None:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

        options = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.request_streaming and handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(refuse, **options)
        if handler.request_streaming:
            return grpc.stream_unary_rpc_method_handler(refuse, **options)
        if handler.response_streaming:
            return grpc.unary_stream_rpc_method_handler(refuse, **options)
        return grpc.unary_unary_rpc_method_handler(refuse, **options)
