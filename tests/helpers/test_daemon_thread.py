"""DaemonThreadExecutor: ordered calls in one daemon thread, awaitable results, a close that never hangs."""

from __future__ import annotations

import asyncio
import threading

import pytest

from rlmesh_gym._daemon_thread import DaemonThreadExecutor


def test_calls_run_in_order_in_one_daemon_thread_and_awaitables_are_awaited():
    executor = DaemonThreadExecutor("test-calls")
    seen: list[tuple[int, str]] = []

    def record(i: int) -> int:
        seen.append((i, threading.current_thread().name))
        return i * 10

    async def doubled(i: int) -> int:
        await asyncio.sleep(0)
        return i * 2

    futures = [executor.submit(record, i) for i in range(5)]
    assert [f.result(timeout=5) for f in futures] == [0, 10, 20, 30, 40]
    assert executor.submit(doubled, 21).result(timeout=5) == 42
    assert seen == [(i, "test-calls") for i in range(5)]
    assert executor._thread is not None and executor._thread.daemon
    with pytest.raises(ZeroDivisionError):
        executor.submit(lambda: 1 / 0).result(timeout=5)
    executor.shutdown()
    assert not executor._thread.is_alive()
    with pytest.raises(RuntimeError, match="after shutdown"):
        executor.submit(record, 9)


def test_close_cancels_queued_calls_and_reports_a_call_still_running():
    async def scenario() -> tuple[bool, bool, bool, bool]:
        executor = DaemonThreadExecutor("test-close")
        release = threading.Event()
        running = executor.submit_async(release.wait, 5)
        queued = executor.submit_async(lambda: "never")
        await asyncio.sleep(0.05)
        assert executor.busy
        still_running = not await executor.close(timeout=0.1)  # release.wait holds the thread
        release.set()
        await running
        return still_running, queued.cancelled(), await executor.close(timeout=5), executor.busy

    still_running, cancelled, closed, busy = asyncio.run(scenario())
    assert still_running and cancelled and closed and not busy


def test_close_abandons_a_hung_awaitable_call():
    async def scenario() -> tuple[bool, list[object]]:
        executor = DaemonThreadExecutor("test-hung")

        async def hang() -> None:
            await asyncio.sleep(60)

        pending = executor.submit_async(hang)
        await asyncio.sleep(0.05)
        closed = await executor.close(timeout=5)
        return closed, await asyncio.gather(pending, return_exceptions=True)

    closed, (outcome,) = asyncio.run(scenario())
    assert closed  # the thread ended within the timeout, not after the 60 s sleep
    assert isinstance(outcome, RuntimeError)
