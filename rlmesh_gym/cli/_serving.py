"""What ``serve-env`` and ``serve-policy`` share: the endpoint flags, and serving until stopped.

Both run their server until Ctrl+C or SIGTERM (or an allowed remote Shutdown), then stop
cleanly: open sessions are told the server is going away and the port is released.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Coroutine
from typing import Any

from rlmesh_gym.cli._report import report_error, report_warning
from rlmesh_gym.spaces.limits import (
    DEFAULT_MAX_SPACE_ELEMENTS,
    MAX_SPACE_ELEMENTS_ENV,
    set_max_space_elements,
)

__all__ = [
    "TOKEN_VARIABLE",
    "add_endpoint_arguments",
    "endpoint_options",
    "run_server",
    "serve_until_stopped",
]

TOKEN_VARIABLE = "RLMESH_GYM_TOKEN"
"""The environment variable servers take their token from, and ``eval``'s clients theirs."""


def add_endpoint_arguments(parser: argparse.ArgumentParser, default_address: str) -> None:
    """``--address``, ``--token``, ``--edition-pin`` and the server's limits."""
    parser.add_argument(
        "--address",
        default=default_address,
        metavar="HOST:PORT",
        help=f"where to listen (default: {default_address}; port 0 picks a free port). Binding anything "
        "but 127.0.0.1 without --token prints a warning",
    )
    parser.add_argument(
        "--token",
        default=None,
        help=f"require this token ('authorization' metadata) on every call (default: ${TOKEN_VARIABLE}, "
        "else none)",
    )
    parser.add_argument(
        "--edition-pin",
        default="b3",
        metavar="PIN",
        help="edition pin peers must match: b3 (rlmesh 0.1.0b3, default), rc1, or a 64-hex SHA-256",
    )
    parser.add_argument(
        "--allow-remote-shutdown", action="store_true", help="let a Shutdown call stop the server"
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="end a session whose client sends nothing for this long; the server goes on (default: never)",
    )
    parser.add_argument(
        "--idle-shutdown",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop the whole server once no call or session has been open for this long, as rlmesh's "
        "idle timeout (default: never)",
    )
    parser.add_argument(
        "--max-message-mb",
        type=float,
        default=256.0,
        metavar="MB",
        help="largest gRPC message sent or received, in MiB (default: 256, as rlmesh)",
    )
    parser.add_argument(
        "--max-space-elements",
        type=int,
        default=None,
        metavar="N",
        help="refuse a declared space one value of which holds more than N elements, before allocating "
        f"anything for it (default: ${MAX_SPACE_ELEMENTS_ENV}, else {DEFAULT_MAX_SPACE_ELEMENTS})",
    )


def endpoint_options(args: argparse.Namespace) -> dict[str, Any]:
    """The server keyword arguments common to both commands; ValueError names a bad flag."""
    for flag, value in (("--idle-timeout", args.idle_timeout), ("--idle-shutdown", args.idle_shutdown)):
        if value is not None and not value > 0:
            raise ValueError(f"{flag} must be > 0 seconds, got {value}")
    if not 0.001 <= args.max_message_mb <= 2047:
        raise ValueError(f"--max-message-mb must be between 0.001 and 2047, got {args.max_message_mb}")
    if args.max_space_elements is not None:
        if args.max_space_elements < 1:
            raise ValueError(f"--max-space-elements must be >= 1, got {args.max_space_elements}")
        set_max_space_elements(args.max_space_elements)
    token = args.token if args.token is not None else os.environ.get(TOKEN_VARIABLE) or None
    return {
        "address": args.address,
        "token": token,
        "edition_pin": args.edition_pin,
        "allow_remote_shutdown": args.allow_remote_shutdown,
        "idle_timeout": args.idle_timeout,
        "idle_shutdown": args.idle_shutdown,
        "max_message_bytes": int(args.max_message_mb * 1024 * 1024),
    }


async def serve_until_stopped(server: Any, banner: str) -> None:
    """Start ``server``, print where it listens, and stop it on Ctrl+C, SIGTERM or remote Shutdown."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    installed = []
    # asyncio signal handlers need the main thread of a POSIX process; elsewhere (Windows, or a
    # caller's worker thread) Ctrl+C arrives as KeyboardInterrupt instead.
    if sys.platform != "win32" and threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
            installed.append(signum)
    try:
        from rlmesh_gym.serve.endpoint import InsecureBindWarning

        with warnings.catch_warnings():
            # Printed below as one plain line instead of a Python warning with a source location.
            warnings.simplefilter("ignore", InsecureBindWarning)
            await server.start()
        if server.exposure_warning:
            report_warning(server.exposure_warning)
        try:
            print(f"rlmesh-gym: {banner} on {server.address}", flush=True)
        except BrokenPipeError:  # nobody reads the banner (`| head -0`): stop serving, quietly
            await server.stop(grace=0)
            raise
        stopped = asyncio.ensure_future(server.wait_closed())
        signalled = asyncio.ensure_future(stop.wait())
        await asyncio.wait({stopped, signalled}, return_when=asyncio.FIRST_COMPLETED)
        signalled.cancel()
        await server.stop(grace=2.0)
        await stopped
        reason = server.stop_reason
        suffix = f" ({reason})" if reason not in (None, "stopped") else ""
        print(f"rlmesh-gym: stopped serving on {server.address}{suffix}", flush=True)
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


def run_server(serve: Callable[[], Coroutine[Any, Any, None]]) -> int:
    """Run ``serve()`` to its end; the exit code (130 on Ctrl+C, 2 for bad input, 1 for a server error)."""
    from rlmesh_gym.serve import RemoteConnectionError

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:  # before the signal handlers are installed (e.g. --env-id's check)
        return report_error("interrupted", 130)
    except BrokenPipeError:  # the reader of the output went away; cli.main ends quietly
        raise
    except OSError as error:  # includes RemoteConnectionError (--contract-from) and a taken port
        code = 2 if isinstance(error, RemoteConnectionError) else 1
        return report_error(str(error), code)
    except (ValueError, TypeError) as error:
        return report_error(str(error), 2)
    return 0
