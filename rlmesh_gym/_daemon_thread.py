"""``DaemonThreadExecutor``: one daemon thread running blocking calls in order, that exit never waits for.

``GymVectorEnv(offload=True)`` runs its env calls here, and the env and model servers their
env's or model's calls (docs/design/serving.md). ``concurrent.futures.ThreadPoolExecutor``
would not do: its threads are joined when the interpreter exits, so a call that never returns
(a hung ``step`` the caller already gave up on after its timeout) would keep the process alive
forever. A daemon thread is abandoned at exit instead, and a caller's event loop only waits for
the result, so a blocking call never freezes it.
"""

from __future__ import annotations

import asyncio
import inspect
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

__all__ = ["DaemonThreadExecutor", "wait_for_call"]


class DaemonThreadExecutor(Executor):
    """An ``Executor`` with a single daemon worker thread, started on the first call.

    Calls run one at a time in submission order. A call that returns an awaitable (a coroutine
    function, an async env) is awaited on an event loop private to the worker thread.
    """

    def __init__(self, thread_name: str) -> None:
        self._thread_name = thread_name
        self._calls: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple, dict] | None] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._shut_down = False
        self._pending: set[Future[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None  # the worker's, once a call was awaitable

    @property
    def busy(self) -> bool:
        """Whether a call submitted earlier has not returned yet (it may be hung)."""
        with self._lock:
            return bool(self._pending)

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Queue ``fn(*args, **kwargs)`` behind the calls already submitted."""
        with self._lock:
            if self._shut_down:
                raise RuntimeError(f"{self._thread_name}: cannot run new calls after shutdown")
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self._thread_name, daemon=True)
                self._thread.start()
            future: Future[Any] = Future()
            self._pending.add(future)
            self._calls.put((future, fn, args, kwargs))
        future.add_done_callback(self._finished)
        return future

    def submit_async(self, fn: Callable[..., Any], /, *args: Any) -> asyncio.Future[Any]:
        """:meth:`submit` for a caller on an event loop: the result as an asyncio future.

        Cancelling that future does not stop a call that has started: it runs to its end in the
        thread, so the object it works on is never left half-way through a call.
        """
        return asyncio.wrap_future(self.submit(fn, *args))

    async def call(self, fn: Callable[..., Any], /, *args: Any, timeout: float | None = None) -> Any:
        """The result of ``fn(*args)`` run in the thread (``TimeoutError`` after ``timeout`` s)."""
        return await wait_for_call(self.submit_async(fn, *args), timeout)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop after the queued calls (``cancel_futures``: drop those not started yet)."""
        dropped: list[Future[Any]] = []
        with self._lock:
            if not self._shut_down:
                self._shut_down = True
                while cancel_futures:
                    try:
                        item = self._calls.get_nowait()
                    except queue.Empty:
                        break
                    if item is not None:
                        dropped.append(item[0])
                self._calls.put(None)
            thread = self._thread
        for future in dropped:  # outside the lock: cancelling runs _finished, which takes it
            future.cancel()
        if wait and thread is not None:
            thread.join()

    async def close(self, timeout: float = 1.0) -> bool:
        """Shut down, dropping queued calls; ``False`` if a call is still running after ``timeout`` s.

        An awaitable call still pending is abandoned (its loop stops; the caller's future gets a
        ``RuntimeError``). A thread left running (a blocking call that never returns) is a daemon
        thread: it ends with the process and never delays its exit.
        """
        self.shutdown(wait=False, cancel_futures=True)
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(loop.stop)
            except RuntimeError:  # the worker closed it meanwhile
                pass
        thread = self._thread
        if thread is None:
            return True
        deadline = time.monotonic() + timeout
        while thread.is_alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        return not thread.is_alive()

    def _finished(self, future: Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)

    def _work(self) -> None:
        loop: asyncio.AbstractEventLoop | None = None
        try:
            while True:
                item = self._calls.get()
                if item is None:
                    return
                future, fn, args, kwargs = item
                if not future.set_running_or_notify_cancel():
                    continue
                result: Any = None
                try:
                    result = fn(*args, **kwargs)
                    if inspect.isawaitable(result):
                        if loop is None:
                            loop = self._loop = asyncio.new_event_loop()
                            asyncio.set_event_loop(loop)
                        result = loop.run_until_complete(_awaited(result))
                except BaseException as error:  # as ThreadPoolExecutor: the caller sees whatever it raised
                    future.set_exception(error)
                else:
                    future.set_result(result)
                del future, fn, args, kwargs, item, result  # drop references while waiting for the next call
        finally:
            if loop is not None:
                loop.close()


async def wait_for_call(future: asyncio.Future[Any], timeout: float | None) -> Any:
    """The result of a :meth:`DaemonThreadExecutor.submit_async` future.

    Cancelling the waiter or timing out leaves the call running (and its future pending).
    """
    waiter = asyncio.shield(future)
    return await (waiter if timeout is None else asyncio.wait_for(waiter, timeout))


async def _awaited(awaitable: Any) -> Any:
    return await awaitable
