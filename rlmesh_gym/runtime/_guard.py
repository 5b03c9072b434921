"""Awaiting one env/model operation under a deadline and a cancellation token.

The rules: docs/design/runtime.md#operations-and-their-limits.

Upstream wraps each operation in ``select!(cancelled, timeout(limit, op))``. This port keeps
its outcomes and makes the race deterministic:

* The operation starts **eagerly, in the caller's task**: its first segment runs
  synchronously. If it finishes there (an in-process env or model usually does), that is the
  result, whatever the limit, exactly as Tokio's ``timeout`` polls the operation once before
  looking at the clock (so a zero limit does not fail an operation that is already done), and
  no task, timer or future is created.
* If it suspends, it keeps running **in the caller's task** (so ``asyncio.current_task()``,
  ``asyncio.timeout()`` and context variables inside it behave as with a plain ``await``),
  while the caller also waits for the deadline and the token. Every time the operation is
  pending again the deadline is checked, as Tokio does.
* **Ties:** when the token has fired, cancellation wins, even if the operation has also
  finished. A finished operation wins over an expired deadline.
* If the caller's task is cancelled while the operation waits, the cancellation is raised
  inside the operation, as with a plain ``await`` (so an ``asyncio.timeout()`` or, from
  Python 3.12, ``asyncio.wait_for`` inside it, which cancel the task, work): only if the
  operation lets it out does it propagate, as the task's cancellation. A ``CancelledError``
  the operation raises by itself, with no cancellation delivered, is reported as
  :class:`OperationCancelled`, an ``Exception``: the caller can tell the two apart on every
  Python version (3.10 has no ``Task.cancelling()``).
* On timeout or token cancellation the operation is cancelled (its awaited future is cancelled and
  ``CancelledError`` is thrown into it) **without waiting for it**: if it does not stop at
  once, it is abandoned to a background task that lets it finish and drops its outcome, the
  way upstream drops the future. Work running in a thread cannot be interrupted; an
  abandoned env must be treated as poisoned.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import types
from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeGuard

from rlmesh_gym.runtime.cancellation import CancellationToken
from rlmesh_gym.runtime.errors import ProtocolError

__all__ = [
    "CANCELLED",
    "DONE",
    "TIMED_OUT",
    "OperationCancelled",
    "abandon",
    "call_bounded",
    "drive",
    "require_awaitable",
    "start",
]

DONE = 0
TIMED_OUT = 1
CANCELLED = 2

_log = logging.getLogger("rlmesh_gym.runtime")
_ABANDONED: set[asyncio.Task] = set()  # asyncio keeps only weak references to tasks


def start(awaitable: object, what: str) -> Generator[Any, Any, Any]:
    """The iterator that runs ``awaitable`` step by step (``ProtocolError`` if it is not awaitable)."""
    if isinstance(awaitable, types.CoroutineType | types.GeneratorType):
        return awaitable  # type: ignore[return-value]
    return require_awaitable(awaitable, what).__await__()


def require_awaitable(awaitable: Any, what: str) -> Awaitable[Any]:
    """``awaitable`` itself, or ``ProtocolError`` if it cannot be awaited."""
    if type(awaitable) is not types.CoroutineType and not inspect.isawaitable(awaitable):
        raise ProtocolError(
            f"{what} must be a coroutine function (async def) or return an awaitable; "
            f"it returned {type(awaitable).__name__}"
        )
    return awaitable


class _Waker:
    __slots__ = ("waiter", "timed_out")

    def __init__(self) -> None:
        self.waiter: asyncio.Future | None = None
        self.timed_out = False

    def wake(self, _future: object = None) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def on_deadline(self) -> None:
        self.timed_out = True
        self.wake()


class OperationCancelled(Exception):
    """An operation raised ``CancelledError`` by itself (its task was not being cancelled).

    An ``Exception``, so that the caller reports it as the operation's failure instead of
    letting it end the task. ``error`` is the operation's ``CancelledError``.
    """

    def __init__(self, error: asyncio.CancelledError) -> None:
        detail = str(error)
        super().__init__(f"raised CancelledError: {detail}" if detail else "raised CancelledError")
        self.error = error


def _is_future(value: object) -> TypeGuard[asyncio.Future[Any]]:
    return getattr(value, "_asyncio_future_blocking", None) is not None


@types.coroutine
def drive(
    operation: Generator[Any, Any, Any],
    yielded: object,
    deadline: float,
    token: CancellationToken | None,
    loop: asyncio.AbstractEventLoop,
) -> Generator[Any, Any, tuple[int, Any]]:
    """Continue a suspended ``operation`` (which last yielded ``yielded``) in the current task.

    Returns ``(DONE, result)``, ``(TIMED_OUT, None)`` once ``loop.time()`` passes
    ``deadline`` with the operation still pending, or ``(CANCELLED, None)`` once ``token``
    fires. The operation's own exceptions propagate, except a ``CancelledError`` it raises
    by itself, which becomes :class:`OperationCancelled`. If the current task is cancelled,
    the cancellation goes into the operation as with a plain ``await``; a ``CancelledError``
    that escapes ``drive`` is therefore always the task's own cancellation.
    """
    waker = _Waker()
    timer = loop.call_at(deadline, waker.on_deadline) if deadline != math.inf else None
    handle = token.add_callback(waker.wake, loop) if token is not None else None
    delivered: BaseException | None = None  # the task's cancellation, once raised inside the operation
    try:
        while True:
            # The operation is pending on `yielded`.
            if token is not None and token.cancelled:
                abandon(operation, yielded, loop)
                if delivered is not None and _cancel_outstanding():
                    raise delivered  # the task's cancellation, not yet let out by the operation
                return CANCELLED, None
            if waker.timed_out or loop.time() >= deadline:
                abandon(operation, yielded, loop)
                if delivered is not None and _cancel_outstanding():
                    raise delivered
                return TIMED_OUT, None
            sent = None
            thrown: BaseException | None = None
            if _is_future(yielded):
                if not yielded.done():
                    waiter = waker.waiter = loop.create_future()
                    yielded.add_done_callback(waker.wake)
                    try:
                        yield from waiter
                    except BaseException as err:
                        thrown = err
                    finally:
                        waker.waiter = None
                        yielded.remove_done_callback(waker.wake)
                    if thrown is None and not yielded.done():
                        continue  # woken by the token or the deadline
            else:
                # A bare yield (asyncio.sleep(0)) or a foreign object: the task handles it.
                try:
                    sent = yield yielded
                except BaseException as err:
                    thrown = err
            try:
                if thrown is None:
                    if token is not None and token.cancelled:
                        abandon(operation, yielded, loop)
                        return CANCELLED, None
                    yielded = operation.send(sent)
                else:
                    if isinstance(thrown, GeneratorExit):  # this coroutine is being closed
                        abandon(operation, yielded, loop)
                        raise thrown
                    # The task was cancelled while the operation waited. Do what a plain
                    # await does: cancel what it waits on and raise the cancellation inside
                    # it, so that an asyncio.timeout()/wait_for() of its own becomes its
                    # TimeoutError. It ends the task only if the operation lets it out.
                    delivered = thrown
                    if _is_future(yielded) and not yielded.done():
                        yielded.cancel()
                    yielded = operation.throw(thrown)
            except StopIteration as stop:
                if thrown is not None and token is not None and token.cancelled:
                    return CANCELLED, None
                return DONE, stop.value
            except asyncio.CancelledError as err:
                if delivered is not None and _cancel_outstanding():
                    raise  # the task's cancellation, let out by the operation (maybe after cleanup)
                raise OperationCancelled(err) from err
    finally:
        if timer is not None:
            timer.cancel()
        if handle is not None:
            token.remove_callback(handle)  # type: ignore[union-attr]


def _cancel_outstanding() -> bool:
    """Whether the current task still has a cancellation request nobody has absorbed.

    Python 3.11+ counts them (``asyncio.timeout`` takes its own back when it turns it into
    ``TimeoutError``). Python 3.10 does not; there nothing inside an operation cancels the
    operation's task (3.10's ``wait_for`` runs its awaitable in a task of its own), so a
    cancellation the task delivered is taken as the task's.
    """
    cancelling = getattr(asyncio.current_task(), "cancelling", None)
    return cancelling is None or cancelling() > 0


def abandon(operation: Generator[Any, Any, Any], yielded: object, loop: asyncio.AbstractEventLoop) -> None:
    """Cancel a pending ``operation`` without waiting for it to stop."""
    if _is_future(yielded) and not yielded.done():
        yielded.cancel()
    try:
        still_pending = operation.throw(asyncio.CancelledError())
    except (Exception, asyncio.CancelledError):
        return  # it stopped (StopIteration is an Exception too)
    task = loop.create_task(_finish_abandoned(operation, still_pending))
    _ABANDONED.add(task)
    task.add_done_callback(_ABANDONED.discard)


async def _finish_abandoned(operation: Generator[Any, Any, Any], yielded: object) -> None:
    try:
        await _delegate(operation, yielded)
    except (Exception, asyncio.CancelledError) as err:
        _log.debug("abandoned runtime operation ended with %r", err)


@types.coroutine
def _delegate(operation: Generator[Any, Any, Any], yielded: object) -> Generator[Any, Any, Any]:
    """``yield from`` an operation that already yielded ``yielded``."""
    while True:
        try:
            sent = yield yielded
        except BaseException as err:
            try:
                yielded = operation.throw(err)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                yielded = operation.send(sent)
            except StopIteration as stop:
                return stop.value


async def call_bounded(function: Callable[..., Awaitable[Any] | Any], *args: object, timeout: float) -> int:
    """Run ``function(*args)`` for at most ``timeout`` seconds: ``DONE`` or ``TIMED_OUT``.

    A result that is not awaitable counts as done. The function's exceptions propagate (a
    ``CancelledError`` it raises by itself as :class:`OperationCancelled`).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    result = function(*args)
    if not isinstance(result, types.CoroutineType) and not hasattr(result, "__await__"):
        return DONE
    operation = start(result, getattr(function, "__qualname__", "close"))
    try:
        yielded = operation.send(None)
    except StopIteration:
        return DONE
    except asyncio.CancelledError as own:  # nothing suspended yet, so not the task's cancellation
        raise OperationCancelled(own) from own
    outcome, _ = await drive(operation, yielded, deadline, None, loop)
    return outcome
