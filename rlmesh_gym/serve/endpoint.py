"""Endpoint addresses and the gRPC channel and server options both sides use.

Addresses are ``HOST:PORT`` (``tcp://HOST:PORT`` and ``[v6]:PORT`` are accepted too). Servers
bind ``127.0.0.1`` unless told otherwise; binding any other host without a token is allowed
but warned about, because anyone who can reach the port can then drive the env or model.

Message sizes are capped deliberately, like upstream, at 256 MiB each way by default: large
image batches pass, and an absurd message is refused by gRPC before it is buffered.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Literal, overload

from rlmesh_gym._audience import fix, warn_at_caller

__all__ = [
    "CLIENT_KEEPALIVE_TIMEOUT_MS",
    "CLIENT_KEEPALIVE_TIME_MS",
    "DEFAULT_BIND_HOST",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "InsecureBindWarning",
    "channel_options",
    "check_max_message_bytes",
    "check_timeout",
    "format_address",
    "is_loopback",
    "parse_address",
    "probe_bind",
    "SERVER_MIN_PING_INTERVAL_MS",
    "server_options",
    "warn_if_exposed",
]

DEFAULT_BIND_HOST = "127.0.0.1"
DEFAULT_MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""256 MiB, upstream's send and receive limit."""

# gRPC stores the limits in a C int.
_MAX_GRPC_LIMIT = 2**31 - 1


class InsecureBindWarning(UserWarning):
    """A server listens beyond the loopback interface without a token."""


def parse_address(address: str, *, default_host: str | None = None) -> tuple[str, int]:
    """Split ``HOST:PORT`` (or ``tcp://HOST:PORT``, ``[::1]:PORT``, or ``PORT`` with a default host).

    >>> parse_address("127.0.0.1:5555"), parse_address("tcp://[::1]:0"), parse_address("7", default_host="h")
    (('127.0.0.1', 5555), ('::1', 0), ('h', 7))
    """
    if not isinstance(address, str) or not address.strip():
        raise ValueError(f"address must be a non-empty 'HOST:PORT' string, got {address!r}")
    text = address.strip()
    if text.startswith("tcp://"):
        text = text[len("tcp://") :]
    elif "://" in text:
        raise ValueError(f"address {address!r}: only tcp addresses ('HOST:PORT') are supported")
    if text.isdigit() and default_host is not None:
        host, port_text = default_host, text
    elif text.startswith("["):
        host, sep, port_text = text[1:].partition("]:")
        if not sep:
            raise ValueError(f"address {address!r}: expected '[IPV6]:PORT'")
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep or not host or ":" in host:
            raise ValueError(f"address {address!r}: expected 'HOST:PORT', for example '127.0.0.1:50051'")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"address {address!r}: port must be an integer in 0..65535, got {port_text!r}")
    return host, int(port_text)


def format_address(host: str, port: int) -> str:
    """``HOST:PORT``, bracketing IPv6 hosts."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def warn_if_exposed(host: str, token: str | None, role: str) -> str | None:
    """Warn (and return the text) when a ``role`` server binds a non-loopback host with no token."""
    if token is not None or is_loopback(host):
        return None
    message = (
        f"{role} server binds {host}, which other machines can reach, and has no token: anyone who "
        f"can connect can drive it. Pass a token ({fix('token=...', '--token')}) or bind 127.0.0.1."
    )
    warn_at_caller(message, InsecureBindWarning)
    return message


def check_max_message_bytes(value: int) -> int:
    """``value`` if it is a usable gRPC message size limit, else ValueError."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1024 <= value <= _MAX_GRPC_LIMIT:
        raise ValueError(
            f"max_message_bytes must be an int between 1024 and {_MAX_GRPC_LIMIT} (2 GiB - 1), got {value!r}"
        )
    return value


@overload
def check_timeout(name: str, value: float | None, *, optional: Literal[False]) -> float: ...
@overload
def check_timeout(name: str, value: float | None, *, optional: bool) -> float | None: ...
def check_timeout(name: str, value: float | None, *, optional: bool) -> float | None:
    """``value`` as float seconds (> 0), or ``None`` when ``optional``; ValueError names ``name``."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        allowed = "a number of seconds > 0 or None" if optional else "a number of seconds > 0"
        raise ValueError(f"{name} must be {allowed}, got {value!r}")
    return float(value)


CLIENT_KEEPALIVE_TIME_MS = 300_000
"""How often a client pings a server while a call is open and the line is quiet (5 minutes).

gRPC servers, by default, refuse pings more frequent than every 5 minutes on a connection with no
data (``grpc.http2.min_recv_ping_interval_without_data_ms``; a client that pings faster gets
GOAWAY ``too_many_pings``), so 5 minutes is the fastest rate every server accepts. Our servers
accept pings every minute; the margin keeps scheduling jitter from ever counting as a strike.
"""

CLIENT_KEEPALIVE_TIMEOUT_MS = 20_000
"""How long a client waits for a ping's answer before declaring the connection dead."""

SERVER_MIN_PING_INTERVAL_MS = 60_000
"""The most frequent client keepalive ping our servers accept on a quiet connection."""


def channel_options(max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> list[tuple[str, int]]:
    """Options of a client channel: the message size limits each way, and keepalive pings.

    The pings (only while a call is open) notice a server that vanished without closing the
    connection (a dead host, a dropped network), which a wait without a timeout would not.
    """
    limit = check_max_message_bytes(max_message_bytes)
    return [
        ("grpc.max_send_message_length", limit),
        ("grpc.max_receive_message_length", limit),
        ("grpc.keepalive_time_ms", CLIENT_KEEPALIVE_TIME_MS),
        ("grpc.keepalive_timeout_ms", CLIENT_KEEPALIVE_TIMEOUT_MS),
        ("grpc.keepalive_permit_without_calls", 0),
        # A fresh subchannel per client, so one client's broken connection never affects another's.
        ("grpc.use_local_subchannel_pool", 1),
    ]


def server_options(max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> list[tuple[str, int]]:
    """Options of a server: message size limits, and keepalive pings that notice vanished peers."""
    limit = check_max_message_bytes(max_message_bytes)
    return [
        ("grpc.max_send_message_length", limit),
        ("grpc.max_receive_message_length", limit),
        ("grpc.keepalive_time_ms", 60_000),
        ("grpc.keepalive_timeout_ms", 20_000),
        ("grpc.http2.max_pings_without_data", 0),
        # Accept client keepalive pings down to once a minute (ours send one every 5 minutes).
        ("grpc.http2.min_recv_ping_interval_without_data_ms", SERVER_MIN_PING_INTERVAL_MS),
        # Refuse a second server on the same port instead of silently sharing it.
        ("grpc.so_reuseport", 0),
    ]


def probe_bind(host: str, port: int) -> OSError | None:
    """Why a server could not listen on ``host:port`` (checked with a throw-away socket), else ``None``.

    Servers check this before asking gRPC to bind, because gRPC's own failure prints a core log
    line to stderr before the error can be reported. Port 0 always binds. Like gRPC, the probe
    sets ``SO_REUSEADDR``, and a host with several addresses is usable when any of them binds.
    """
    if port == 0:
        return None
    try:
        candidates = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as error:
        return error
    failure: OSError | None = None
    for family, kind, protocol, _, address in candidates:
        try:
            with socket.socket(family, kind, protocol) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind(address)
        except OSError as error:
            failure = error
        else:
            return None
    return failure
