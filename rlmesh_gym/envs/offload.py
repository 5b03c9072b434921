"""The worker thread of ``GymVectorEnv(offload=True)``: env calls off the event loop.

Inline env calls are cheaper (a thread hop costs more than a CartPole step) but block the loop,
so a driver timeout or cancellation cannot interrupt them. Offloaded, each call runs in one
daemon thread (:class:`~rlmesh_gym._daemon_thread.DaemonThreadExecutor`, which exit never waits
for) while the loop only waits for its result: a timeout or cancellation takes effect while the
call still runs to completion in its thread. A cancelled call leaves the env in a state nobody
saw, which the owner is told through ``on_cancelled``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import Any

from rlmesh_gym._daemon_thread import DaemonThreadExecutor

__all__ = ["EnvCallThread"]


class EnvCallThread:
    """Runs an env's calls one at a time in a worker thread of their own."""

    __slots__ = ("_executor", "_on_cancelled")

    def __init__(self, on_cancelled: Callable[[], None]) -> None:
        self._executor = DaemonThreadExecutor("rlmesh-gym-env")
        self._on_cancelled = on_cancelled

    async def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """``function(*args)`` in the thread; a cancelled wait calls ``on_cancelled`` and re-raises."""
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)
        except asyncio.CancelledError:
            self._on_cancelled()  # the call goes on in the thread; its result is lost
            raise

    def call_sync(self, function: Callable[[], Any]) -> Any:
        """``function()`` in the thread, waited for (after any call still running there)."""
        return self._executor.submit(function).result()

    def close(self, function: Callable[[], None]) -> concurrent.futures.Future[None]:
        """Run ``function`` (the env's close) as the thread's last call; its future."""
        future = self._executor.submit(function)
        self._executor.shutdown(wait=False)
        return future
