"""Awaiting a peer operation that may suspend, under its limit and a cancellation token.

The driver awaits in-process peers that run inline plainly (nothing can interrupt a call that
never suspends; its limit is checked when it returns). Everything else (message-form peers
behind their ports, offloaded envs, remote clients, every ``close``) goes through
:func:`await_guarded`, built on the standard library's timeout. The rules
(docs/design/runtime.md#operations-and-their-limits):

* On Python 3.11+ the operation runs in the caller's task, inside ``asyncio.timeout`` (the
  standard library's timeout, as :func:`rlmesh_gym._deadline.wait_within`); the token cancels
  the task. Python 3.10 has neither ``asyncio.timeout`` nor ``Task.uncancel``: there the
  operation runs in a task of its own, raced with ``asyncio.wait``.
* A **zero limit** means "never wait", as upstream's: an operation that finishes without
  suspending passes, one that has to wait times out.
* A fired token wins, even over a finished operation.
* On timeout or token the operation is cancelled as ``asyncio.timeout`` cancels: a
  ``CancelledError`` is raised inside it and it unwinds (its cleanup runs) before the error is
  reported. Upstream drops the future at once; an operation that refuses to stop delays the
  report here.
* If the **caller's task is cancelled**, the cancellation goes into the operation as with a
  plain ``await`` and propagates once the operation let it out.
* A ``CancelledError`` the operation raises by itself is :class:`OperationCancelled`; a
  ``TimeoutError`` of the operation's own (its own ``asyncio.timeout``) is its failure.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import sys
from collections.abc import Awaitable
from functools import partial
from typing import Any, TypeVar

from rlmesh_gym.runtime.cancellation import CancellationToken
from rlmesh_gym.runtime.errors import ProtocolError

__all__ = ["OperationCancelled", "OperationTimedOut", "TokenFired", "await_guarded", "require_awaitable"]

T = TypeVar("T")


class OperationTimedOut(Exception):
    """The operation's limit passed before it finished (it was cancelled)."""


class TokenFired(Exception):
    """The cancellation token fired before or as the operation finished (it was cancelled)."""


class OperationCancelled(Exception):
    """The operation raised ``CancelledError`` by itself; ``error`` is that exception.

    An ``Exception``, so that the caller reports it as the operation's failure instead of
    letting it end the task.
    """

    def __init__(self, error: asyncio.CancelledError) -> None:
        detail = str(error)
        super().__init__(f"raised CancelledError: {detail}" if detail else "raised CancelledError")
        self.error = error


def require_awaitable(awaitable: Any, what: str) -> Awaitable[Any]:
    """``awaitable`` itself, or ``ProtocolError`` if it cannot be awaited."""
    if not inspect.isawaitable(awaitable):
        raise ProtocolError(
            f"{what} must be a coroutine function (async def) or return an awaitable; "
            f"it returned {type(awaitable).__name__}"
        )
    return awaitable


if sys.version_info >= (3, 11):

    async def await_guarded(
        awaitable: Awaitable[T], timeout: float, token: CancellationToken | None, what: str
    ) -> T:
        """The result of ``awaitable`` (what ``what`` returned) within ``timeout`` seconds
        (``math.inf``: no limit), unless ``token`` fires first.

        Raises :class:`OperationTimedOut`, :class:`TokenFired`, :class:`OperationCancelled`, or
        ``ProtocolError`` if ``awaitable`` is not awaitable; the operation's other exceptions
        propagate as they are, and so does a cancellation of the calling task (after the operation
        unwound).
        """
        # Python 3.11+: asyncio.timeout around a plain await, in the caller's task.
        require_awaitable(awaitable, what)
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        waiting = True
        fired = False

        def on_token() -> None:
            nonlocal fired
            if waiting and not fired:
                fired = True
                task.cancel()

        handle = token.add_callback(on_token, loop) if token is not None else None
        limit = None if timeout == math.inf else timeout
        scope = asyncio.timeout(limit)
        try:
            async with scope:
                result = await awaitable
        except asyncio.CancelledError as error:
            if fired:
                task.uncancel()
                raise TokenFired from None
            if task.cancelling():
                raise  # the task's own cancellation
            raise OperationCancelled(error) from error
        except TimeoutError:
            if scope.expired():
                raise OperationTimedOut from None
            raise  # the operation's own, unhandled
        finally:
            waiting = False
            if handle is not None:
                token.remove_callback(handle)  # type: ignore[union-attr]
        if fired:  # the operation swallowed the token's cancellation
            task.uncancel()
            raise TokenFired
        if token is not None and token.cancelled:
            raise TokenFired
        return result

else:

    async def await_guarded(
        awaitable: Awaitable[T], timeout: float, token: CancellationToken | None, what: str
    ) -> T:
        """The result of ``awaitable`` (what ``what`` returned) within ``timeout`` seconds
        (``math.inf``: no limit), unless ``token`` fires first.

        Raises :class:`OperationTimedOut`, :class:`TokenFired`, :class:`OperationCancelled`, or
        ``ProtocolError`` if ``awaitable`` is not awaitable; the operation's other exceptions
        propagate as they are, and so does a cancellation of the calling task (after the operation
        unwound).
        """
        # Python 3.10 (no asyncio.timeout, no Task.uncancel): the operation runs in a task of its
        # own, raced with asyncio.wait.
        loop = asyncio.get_running_loop()
        operation = asyncio.ensure_future(require_awaitable(awaitable, what))
        waiters: set[asyncio.Future[Any]] = {operation}
        fired: asyncio.Future[None] | None = None
        if token is not None:
            fired = loop.create_future()
            handle = token.add_callback(partial(_resolve, fired), loop)
            waiters.add(fired)
        try:
            if timeout > 0:
                limit = None if timeout == math.inf else timeout
                await asyncio.wait(waiters, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
            else:
                await asyncio.sleep(0)  # one loop iteration: the operation's first step, no more
        except asyncio.CancelledError:
            await _stop(operation)
            raise
        finally:
            if fired is not None:
                token.remove_callback(handle)  # type: ignore[union-attr]
                fired.cancel()
        if token is not None and token.cancelled:
            await _stop(operation)
            raise TokenFired
        if not operation.done():
            await _stop(operation)
            raise OperationTimedOut
        if operation.cancelled():
            try:
                operation.result()
            except asyncio.CancelledError as error:  # nobody cancelled it: the operation's own
                # 3.10's Task.result() raises a fresh CancelledError, the operation's as context.
                own = error.__context__ if isinstance(error.__context__, asyncio.CancelledError) else error
                raise OperationCancelled(own) from own
        return operation.result()


async def _stop(operation: asyncio.Future[Any]) -> None:
    """Cancel ``operation`` and let it unwind, as a cancelled plain ``await`` would."""
    if not operation.done():
        operation.cancel()
        await asyncio.wait((operation,))
    if not operation.cancelled():
        operation.exception()  # retrieved: its outcome is dropped, not logged as never retrieved


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
