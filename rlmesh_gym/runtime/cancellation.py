"""A cancellation token for :meth:`RuntimeDriver.run_with_cancellation`.

The Python counterpart of ``tokio_util::sync::CancellationToken``: one-shot, shareable,
and safe to :meth:`~CancellationToken.cancel` from any thread or from inside a hook.

>>> token = CancellationToken()
>>> token.is_cancelled()
False
>>> token.cancel()
>>> token.is_cancelled()
True
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

__all__ = ["CancellationToken"]


class CancellationToken:
    """A flag that goes from "running" to "cancelled" once and never back."""

    __slots__ = ("_cancelled", "_callbacks", "_lock")

    def __init__(self) -> None:
        # Read on the driver's hot path without the lock: a bool store is atomic.
        self._cancelled = False
        self._callbacks: list[tuple[asyncio.AbstractEventLoop, Callable[[], None]]] = []
        self._lock = threading.Lock()

    def cancel(self) -> None:
        """Fire the token; every waiter wakes up on its own event loop. Idempotent."""
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            callbacks, self._callbacks = self._callbacks, []
        for loop, callback in callbacks:
            if not loop.is_closed():
                loop.call_soon_threadsafe(callback)

    def is_cancelled(self) -> bool:
        """Whether :meth:`cancel` has been called."""
        return self._cancelled

    @property
    def cancelled(self) -> bool:
        """Same as :meth:`is_cancelled`."""
        return self._cancelled

    async def wait(self) -> None:
        """Return once the token is cancelled (immediately if it already is)."""
        if self._cancelled:
            return
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()

        def wake() -> None:
            if not waiter.done():
                waiter.set_result(None)

        handle = self.add_callback(wake, loop)
        try:
            await waiter
        finally:
            self.remove_callback(handle)

    def add_callback(
        self, callback: Callable[[], None], loop: asyncio.AbstractEventLoop
    ) -> tuple[asyncio.AbstractEventLoop, Callable[[], None]]:
        """Run ``callback()`` on ``loop`` once the token fires (soon, if it already has).

        Returns a handle for :meth:`remove_callback`.
        """
        handle = (loop, callback)
        with self._lock:
            if not self._cancelled:
                self._callbacks.append(handle)
                return handle
        loop.call_soon_threadsafe(callback)
        return handle

    def remove_callback(self, handle: tuple[asyncio.AbstractEventLoop, Callable[[], None]]) -> None:
        """Forget a callback registered with :meth:`add_callback` (no-op if it already ran)."""
        with self._lock:
            try:
                self._callbacks.remove(handle)
            except ValueError:
                pass

    def __repr__(self) -> str:
        return f"CancellationToken(cancelled={self._cancelled})"
