"""Turning gRPC call failures into messages and connect errors that say what happened."""

from __future__ import annotations

from typing import Any

import grpc

from rlmesh_gym._audience import fix
from rlmesh_gym.serve.errors import (
    AuthenticationError,
    PeerUnavailableError,
    RemoteConnectionError,
    SessionBusyError,
)

__all__ = ["connect_error", "describe_finished_call", "describe_rpc_error", "error_code_name"]

_CORE_SEND_FAILURE = "Internal error from Core"


def describe_rpc_error(error: grpc.aio.AioRpcError, max_message_bytes: int) -> str:
    """A one-line account of a failed call, with a hint for the usual causes."""
    return _describe(error.code(), error.details() or "", max_message_bytes)


async def describe_finished_call(call: grpc.aio.Call, fallback: BaseException, max_message_bytes: int) -> str:
    """Why a call we tried to use had already ended (its status), else ``fallback``'s text."""
    if call.done():
        code = await call.code()
        if code != grpc.StatusCode.OK:
            return _describe(code, await call.details() or "", max_message_bytes)
        return "transport error: connection closed (the peer ended the stream)"
    return f"transport error: connection closed ({fallback})"


def _describe(code: grpc.StatusCode | None, details: str, max_message_bytes: int) -> str:
    if code == grpc.StatusCode.UNAVAILABLE:
        return f"transport error: connection closed ({details or 'the peer went away'})"
    if code == grpc.StatusCode.INTERNAL and details == _CORE_SEND_FAILURE:
        # grpc.aio's report of a write on a connection the peer already dropped.
        return f"transport error: connection closed (the write failed: {details})"
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        # gRPC core prefixes the side whose limit was hit: "SERVER: Sent message larger than max ...".
        side = (
            "the server's max_message_bytes"
            if details.startswith("SERVER:")
            else f"max_message_bytes={max_message_bytes} on this side"
        )
        return (
            f"message too large: {details} (the limit hit is {side}; "
            "both peers must allow the largest observation or action batch)"
        )
    if code == grpc.StatusCode.CANCELLED:
        return f"the call was cancelled ({details or 'by the peer or locally'})"
    return f"{code.name}: {details}" if code is not None else details


def error_code_name(codes: Any, code: int) -> str:
    """The short name of an in-band error ``code`` of the ``codes`` enum (``"INVALID_ACTION"``)."""
    try:
        name: str = codes.Name(code)
    except ValueError:
        return f"code {code}"
    return name.split("_ERROR_CODE_", 1)[-1]


def connect_error(address: str, error: grpc.aio.AioRpcError, role: str) -> RemoteConnectionError:
    """The :class:`RemoteConnectionError` for a call that failed while connecting to a ``role`` server."""
    code = error.code()
    details = error.details() or ""
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return AuthenticationError(
            address,
            f"{details or 'unauthenticated'}: the {role} server needs its token "
            f"({fix('pass token=...', 'set $RLMESH_GYM_TOKEN')})",
        )
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        return SessionBusyError(address, details or f"the {role} server refused a new session")
    if code == grpc.StatusCode.UNAVAILABLE:
        return PeerUnavailableError(address, f"no {role} server reachable: {details}")
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return RemoteConnectionError(
            address, f"the server does not implement the rlmesh {role} service ({details})"
        )
    return RemoteConnectionError(
        address, f"{role} server call failed with {code.name if code else '?'}: {details}"
    )
