"""``DaemonThreadExecutor``: blocking calls run in one daemon thread, which exit never waits for.

``GymVectorEnv(offload=True)`` runs its env calls here, and the env and model servers their
env's or model's calls (docs/design/serving.md). ``concurrent.futures.ThreadPoolExecutor``
would not do: its threads are joined when the interpreter exits, so a call that never returns
(a hung ``step`` the caller already gave up on after its timeout) would keep the process alive
forever. A daemon thread is abandoned at exit instead, and a caller's event loop only waits for
the result, so a blocking call never freezes it.

The thread runs an event loop of its own. A plain call runs to its end before the next one
starts, in submission order; a call that returns an awaitable (a coroutine function, an async
env) is awaited there as a task, so while it waits the calls submitted after it can run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any

from rlmesh_gym._deadline import wait_within

__all__ = ["DaemonThreadExecutor", "wait_for_call"]


class DaemonThreadExecutor(Executor):
    """An ``Executor`` whose calls run in one daemon thread with its own event loop, started on first use."""

    def __init__(self, thread_name: str) -> None:
        self._thread_name = thread_name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pending: set[concurrent.futures.Future[Any]] = set()
        self._lock = threading.Lock()
        self._shut_down = False

    @property
    def busy(self) -> bool:
        """Whether a call submitted earlier has not returned yet (it may be hung)."""
        with self._lock:
            return bool(self._pending)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        """Queue ``fn(*args, **kwargs)`` behind the earlier calls (awaited if it returns an awaitable)."""
        with self._lock:
            if self._shut_down:
                raise RuntimeError(f"{self._thread_name}: cannot run new calls after shutdown")
            future = asyncio.run_coroutine_threadsafe(_invoke(fn, args, kwargs), self._started_loop())
            self._pending.add(future)
        future.add_done_callback(self._finished)
        return future

    def submit_async(self, fn: Callable[..., Any], /, *args: Any) -> asyncio.Future[Any]:
        """:meth:`submit` for a caller on an event loop: the result as an asyncio future.

        Wait for it with :func:`wait_for_call`: cancelling a waiter must not cancel the call,
        which runs to its end in the thread so the object it works on is never left half-way.
        """
        return asyncio.wrap_future(self.submit(fn, *args))

    async def call(self, fn: Callable[..., Any], /, *args: Any, timeout: float | None = None) -> Any:
        """The result of ``fn(*args)`` run in the thread (``TimeoutError`` after ``timeout`` s)."""
        return await wait_for_call(self.submit_async(fn, *args), timeout)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop the thread after the calls queued so far (``cancel_futures``: drop those not done)."""
        with self._lock:
            first = not self._shut_down
            self._shut_down = True
            loop, thread = self._loop, self._thread
            dropped = list(self._pending) if cancel_futures else []
        for future in dropped:  # outside the lock: cancelling runs _finished, which takes it
            future.cancel()
        if first and loop is not None:
            with self._lock:
                queued = list(self._pending)
            asyncio.run_coroutine_threadsafe(_stop_when_done(queued), loop)
        if wait and thread is not None:
            thread.join()

    async def close(self, timeout: float = 1.0) -> bool:
        """Stop the thread's loop now; ``False`` if a call is still running after ``timeout`` s.

        Calls not started yet never run (their futures end cancelled), and an awaitable call
        still waiting is abandoned. A thread left running (a plain call that never returns) is
        a daemon thread: it ends with the process and never delays its exit. A later call
        starts a new thread.
        """
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return True
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
            thread = threading.Thread(
                target=_serve_forever, args=(loop,), name=self._thread_name, daemon=True
            )
            thread.start()
            self._loop, self._thread = loop, thread
        return self._loop


async def wait_for_call(future: asyncio.Future[Any], timeout: float | None) -> Any:
    """The result of a :meth:`DaemonThreadExecutor.submit_async` future.

    Cancelling the waiter or timing out leaves the call running.
    """
    return await wait_within(asyncio.shield(future), timeout)


async def _invoke(function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    result = function(*args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


async def _stop_when_done(futures: list[concurrent.futures.Future[Any]]) -> None:
    # Stopping at once would drop the callbacks that hand the last results to their futures.
    await asyncio.gather(*(asyncio.wrap_future(future) for future in futures), return_exceptions=True)
    asyncio.get_running_loop().stop()


def _serve_forever(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
        # Calls a close() stopped before they started are cancelled: their futures end (busy
        # turns False) and their coroutines are closed, not collected "never awaited". A call
        # already waiting stays abandoned, as close() says.
        loop.run_until_complete(_finish_cancelled(_cancel_unstarted(loop)))
    finally:
        loop.close()


def _cancel_unstarted(loop: asyncio.AbstractEventLoop) -> list[asyncio.Task[Any]]:
    """Cancel the loop's tasks whose coroutine has not begun; those tasks."""
    unstarted = [
        task
        for task in asyncio.all_tasks(loop)
        if inspect.iscoroutine(coroutine := task.get_coro())
        and inspect.getcoroutinestate(coroutine) == inspect.CORO_CREATED
    ]
    for task in unstarted:
        task.cancel()
    return unstarted


async def _finish_cancelled(cancelled: list[asyncio.Task[Any]]) -> None:
    # The callbacks still queued ran just before this (each made its call's task): cancel those too.
    later = _cancel_unstarted(asyncio.get_running_loop())
    await asyncio.gather(*cancelled, *later, return_exceptions=True)
