"""Where a server runs its env's or model's calls: one daemon thread with its own event loop.

An env's ``step`` or a model's ``predict`` may block (plain Python, native code) for as long as
it likes. Run on the server's event loop, such a call would freeze every other handshake and
stream and the server's own stop. :class:`CallThread` runs each call (a coroutine function or a
plain function) on a private loop in a daemon thread, one call at a time in submission order,
while the server's loop only waits for the result. A call that never returns then holds only
that thread: the server keeps answering, stops on request, and the process can still exit,
because a daemon thread is never joined at interpreter shutdown.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["CallThread", "wait_for_call"]

T = TypeVar("T")


class CallThread:
    """A lazily started daemon thread running an event loop for a server's env or model calls."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pending: set[concurrent.futures.Future[Any]] = set()
        self._lock = threading.Lock()

    @property
    def busy(self) -> bool:
        """Whether a call submitted earlier has not returned yet (it may be hung)."""
        with self._lock:
            return bool(self._pending)

    def submit(self, function: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Queue ``function(*args)`` (awaited when it returns an awaitable) in the thread now.

        Calls run in the order they were submitted. Cancelling the returned future does not
        stop the call: it runs to its end in the thread, so the object it works on is never
        left half-way through a call; its result is then dropped. Later calls wait for it.
        """
        future = asyncio.run_coroutine_threadsafe(_invoke(function, args), self._started_loop())
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._finished)
        return asyncio.wrap_future(future)

    async def call(self, function: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
        """:meth:`submit` ``function(*args)``; its result (``TimeoutError`` after ``timeout`` s)."""
        return await wait_for_call(self.submit(function, *args), timeout)

    async def close(self, timeout: float = 1.0) -> bool:
        """Stop the thread once its calls are done; return ``False`` if a call is still running.

        Waits at most ``timeout`` seconds. A thread left running (a hung call) is a daemon
        thread: it ends with the process and never delays its exit.
        """
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return True
        self._loop = self._thread = None
        loop.call_soon_threadsafe(loop.stop)
        deadline = time.monotonic() + timeout
        while thread.is_alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        return not thread.is_alive()

    def _finished(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    def _started_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=_serve_forever, args=(loop,), name=self._name, daemon=True)
            thread.start()
            self._loop, self._thread = loop, thread
        return self._loop


async def wait_for_call(future: asyncio.Future[Any], timeout: float | None) -> Any:
    """The result of a :meth:`CallThread.submit` future; cancelling or timing out leaves the call running."""
    waiter = asyncio.shield(future)
    return await (waiter if timeout is None else asyncio.wait_for(waiter, timeout))


async def _invoke(function: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    result = function(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


def _serve_forever(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.close()
