"""Awaiting a peer's answer under a deadline without ever losing the caller's cancellation.

``asyncio.wait_for`` before Python 3.12 drops a cancellation that lands in the loop iteration
the answer arrives in; why that matters: docs/design/serving.md#client-deadlines.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["wait_within"]

T = TypeVar("T")


async def _within_task(awaitable: Awaitable[T], timeout: float | None) -> T:
    """``wait_within`` for Python 3.10 (no ``asyncio.timeout``): the awaitable runs in a task of
    its own, as with ``wait_for``, but a cancellation of the caller is always raised."""
    if timeout is None:
        return await awaitable
    inner = asyncio.ensure_future(awaitable)
    try:
        done, _ = await asyncio.wait((inner,), timeout=timeout)
    except asyncio.CancelledError:
        inner.cancel()
        await asyncio.wait((inner,))  # let it unwind (release its locks) before the caller does
        raise
    if not done:
        inner.cancel()
        await asyncio.wait((inner,))
        raise asyncio.TimeoutError
    return inner.result()


if sys.version_info >= (3, 11):

    async def wait_within(awaitable: Awaitable[T], timeout: float | None) -> T:
        """``await awaitable``, raising ``TimeoutError`` after ``timeout`` seconds (``None``: no limit).

        Unlike ``asyncio.wait_for`` before Python 3.12, a cancellation of the calling task is
        always raised, even when the awaitable finished in the same loop iteration.
        """
        async with asyncio.timeout(timeout):
            return await awaitable

else:
    wait_within = _within_task
