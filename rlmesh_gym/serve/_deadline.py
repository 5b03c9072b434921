"""Awaiting a peer's answer under a deadline without ever losing the caller's cancellation.

``asyncio.wait_for`` on Python 3.10 and 3.11 returns the awaited result when the waiting task is
cancelled in the same loop iteration as the awaitable finishes, and the cancellation is gone
(CPython gh-86296, fixed in 3.12). A client waits for thousands of replies a second, so a Ctrl+C
landing next to one was dropped often enough that an interrupted ``rlmesh-gym eval
--env-address`` went on evaluating. :func:`wait_within` raises the cancellation in that case, on
every version.
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
