"""A server-side ``Join`` session: reading its requests, and ending it from outside its handler.

:meth:`SessionGuard.next_request` reads the client's next request (a malformed one aborts the
RPC). A grpc.aio stream handler runs in its own task. :class:`SessionGuard` remembers that task, and
:meth:`SessionGuard.interrupt` cancels it with a status code and a reason; the handler catches
the cancellation and aborts the RPC with that status, so the client sees why its session ended.
An optional watchdog interrupts a session whose client sent nothing (or left a reply unread) for
``idle_timeout`` seconds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import grpc

__all__ = ["SessionGuard"]

logger = logging.getLogger("rlmesh_gym.serve")

_RequestT = TypeVar("_RequestT")


class SessionGuard:
    """The task of one Join handler, its idle watchdog, and why it was interrupted (if it was)."""

    def __init__(self, role: str, idle_timeout: float | None) -> None:
        self._task = asyncio.current_task()
        self._role = role
        self._idle_timeout = idle_timeout
        self._waiting_since: float | None = None
        self.interruption: tuple[grpc.StatusCode, str] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        if idle_timeout is not None:
            self._watchdog = asyncio.get_running_loop().create_task(self._watch(idle_timeout))

    async def next_request(self, requests: AsyncIterator[_RequestT], context: Any) -> _RequestT | None:
        """The client's next request, or ``None`` when it ended the stream.

        Idle time counts while waiting. Bytes that do not parse as a JoinRequest abort the RPC
        with ``INVALID_ARGUMENT``: the stream cannot go on.
        """
        self.waiting()
        try:
            request = await anext(requests)
        except StopAsyncIteration:
            return None
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except Exception as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed JoinRequest: {error}")
        self.busy()
        return request

    async def abort_if_interrupted(self, context: Any, session: str) -> None:
        """After the handler was cancelled: abort the RPC with the interruption's status, if any.

        Returns (the caller re-raises the cancellation) when :meth:`interrupt` did not cause it.
        """
        if self.interruption is None:
            return
        code, reason = self.interruption
        logger.info("%s interrupted: %s", session, reason)
        await context.abort(code, reason)

    def waiting(self) -> None:
        """The handler starts waiting for the client's next request."""
        self._waiting_since = time.monotonic()

    def replying(self) -> None:
        """The handler hands a reply to gRPC; until the client reads it, the session counts as idle.

        A client that keeps sending but never reads stalls the send on HTTP/2 flow control; that
        time must count, or such a client would hold the session forever.
        """
        self._waiting_since = time.monotonic()

    def busy(self) -> None:
        """The handler got a request and works on it (idle time does not count)."""
        self._waiting_since = None

    def interrupt(self, code: grpc.StatusCode, reason: str) -> None:
        """End the session: the handler aborts the RPC with ``code`` and ``reason``."""
        if self.interruption is None and self._task is not None and not self._task.done():
            self.interruption = (code, reason)
            self._task.cancel()

    def close(self) -> None:
        """Stop the watchdog (the session is over)."""
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    async def _watch(self, idle_timeout: float) -> None:
        delay = idle_timeout
        while True:
            await asyncio.sleep(delay)
            since = self._waiting_since
            idle = 0.0 if since is None else time.monotonic() - since
            if since is not None and idle >= idle_timeout:
                self.interrupt(
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    f"{self._role} session closed by the server: no request for {idle_timeout:g}s "
                    "(idle timeout)",
                )
                return
            delay = idle_timeout - idle
