"""The event loop a gymnasium-facing adapter owns, so its synchronous calls can drive an async env.

Gymnasium's API is synchronous and the seams are ``async``. The adapter runs every env call on
an event loop of its own in one daemon thread (:mod:`rlmesh_gym._daemon_thread`) and blocks the
caller until it returns. A thread rather than a private loop run in the caller's thread, because
the caller may already be running a loop (Jupyter, an ``async def`` that trains): a second loop
cannot run there. Every call of one env happens on that one thread and loop, which an env bound
to its loop (a gRPC client) needs, and a renderer bound to its thread too.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from collections.abc import Callable
from typing import Any

from rlmesh_gym._daemon_thread import DaemonThreadExecutor

__all__ = ["EnvLoop"]


class EnvLoop:
    """One daemon thread running an event loop; :meth:`call` runs a function there and waits.

    A function that returns an awaitable (an ``async def`` method) is awaited on the loop.
    Calls run one at a time, in order, awaitable or not. A Ctrl+C while the caller waits
    interrupts the wait, not the call: it runs to its end and the next call starts after it.
    """

    def __init__(self, thread_name: str) -> None:
        self._name = thread_name
        self._executor = DaemonThreadExecutor(thread_name)
        self._thread_id: int = self._executor.submit(threading.get_ident).result()
        self._one_at_a_time = asyncio.Lock()  # the executor would interleave awaiting calls
        self._closed = False

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._closed

    def call(self, function: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
        """``function(*args)`` on the loop (awaited if it returns an awaitable); its result or error.

        Raises:
            RuntimeError: the loop is closed, or the call comes from the loop's own thread
                (an env calling back into its adapter), which would wait for itself forever.
            TimeoutError: ``timeout`` seconds passed first (the call goes on in the thread).
        """
        if self._closed:
            raise RuntimeError(f"{self._name}: the adapter is closed")
        if threading.get_ident() == self._thread_id:
            raise RuntimeError(
                f"{self._name}: called from the adapter's own event loop thread (from inside an env "
                "call); call the adapter from another thread"
            )
        future = self._executor.submit(self._in_turn, function, args)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"{self._name}: no result within {timeout:g}s") from None

    async def _in_turn(self, function: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        async with self._one_at_a_time:
            result = function(*args)
            if inspect.isawaitable(result):
                result = await result
            return result

    def close(self) -> None:
        """Stop the loop and end its thread (idempotent).

        The thread is joined unless a call is still running in it (one the caller stopped
        waiting for): a daemon thread, it is then left to end with the call or the process.
        """
        if self._closed:
            return
        self._closed = True
        executor = self._executor
        executor.shutdown(wait=not executor.busy)
