"""``DaemonThreadExecutor``: one daemon thread running submitted calls in order.

``GymVectorEnv(offload=True)`` runs env calls here. ``concurrent.futures.ThreadPoolExecutor``
would not do: its threads are joined when the interpreter exits, so an env call that never
returns (a hung ``step`` the driver already gave up on after its timeout) would keep the process
alive forever. A daemon thread is abandoned at exit instead.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

__all__ = ["DaemonThreadExecutor"]


class DaemonThreadExecutor(Executor):
    """An ``Executor`` with a single daemon worker thread, started on the first call."""

    def __init__(self, thread_name: str) -> None:
        self._thread_name = thread_name
        self._calls: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple, dict] | None] = (
            queue.SimpleQueue()
        )
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._shut_down = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Queue ``fn(*args, **kwargs)`` behind the calls already submitted."""
        with self._lock:
            if self._shut_down:
                raise RuntimeError(f"{self._thread_name}: cannot run new calls after shutdown")
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self._thread_name, daemon=True)
                self._thread.start()
            future: Future[Any] = Future()
            self._calls.put((future, fn, args, kwargs))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Stop after the queued calls (``cancel_futures``: drop those not started yet)."""
        with self._lock:
            if not self._shut_down:
                self._shut_down = True
                while cancel_futures:
                    try:
                        item = self._calls.get_nowait()
                    except queue.Empty:
                        break
                    if item is not None:
                        item[0].cancel()
                self._calls.put(None)
            thread = self._thread
        if wait and thread is not None:
            thread.join()

    def _work(self) -> None:
        while True:
            item = self._calls.get()
            if item is None:
                return
            future, fn, args, kwargs = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as error:  # as ThreadPoolExecutor: the caller sees whatever it raised
                future.set_exception(error)
            else:
                future.set_result(result)
            del future, fn, args, kwargs, item  # drop references while waiting for the next call
