"""DaemonThreadExecutor: ordered calls in one daemon thread, awaitable results, a close that never hangs."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import threading
import warnings

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


def test_close_reports_a_call_still_running_and_later_calls_start_a_new_thread():
    async def scenario() -> tuple[bool, bool, str]:
        executor = DaemonThreadExecutor("test-close")
        release = threading.Event()
        running = executor.submit_async(release.wait, 5)
        await asyncio.sleep(0.05)
        assert executor.busy
        still_running = not await executor.close(timeout=0.1)  # release.wait holds the thread
        release.set()
        await running
        return still_running, executor.busy, await executor.call(threading.current_thread)

    still_running, busy, thread = asyncio.run(scenario())
    assert still_running and not busy
    assert thread.name == "test-close" and thread.daemon


def test_a_waiting_awaitable_call_lets_later_calls_run_and_close_abandons_it():
    async def scenario() -> tuple[int, bool, bool]:
        executor = DaemonThreadExecutor("test-hung")

        async def hang() -> None:
            await asyncio.sleep(60)

        hung = executor.submit_async(hang)
        later = await executor.call(lambda: 7, timeout=5)  # runs while hang() waits
        closed = await executor.close(timeout=5)
        return later, closed, hung.done()

    later, closed, hung_done = asyncio.run(scenario())
    assert later == 7
    assert closed  # the thread ended within the timeout, not after the 60 s sleep
    assert not hung_done


def test_calls_a_close_stops_before_they_start_end_cancelled_and_never_run():
    async def scenario() -> tuple[bool, bool, list[int]]:
        executor = DaemonThreadExecutor("test-unstarted")
        started, release, ran = threading.Event(), threading.Event(), []

        def hold() -> None:
            started.set()
            release.wait(5)

        blocking = executor.submit_async(hold)
        while not started.is_set():  # the thread is inside hold(): what follows queues behind it
            await asyncio.sleep(0.01)
        queued = executor.submit(ran.append, 1)  # behind it, then behind close()'s stop
        still_running = not await executor.close(timeout=0.05)
        release.set()
        await blocking
        with pytest.raises(concurrent.futures.CancelledError):
            queued.result(timeout=5)
        for _ in range(500):  # the future's done callback may still be running in the thread
            if not executor.busy:
                break
            await asyncio.sleep(0.01)
        return still_running, executor.busy, ran

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        still_running, busy, ran = asyncio.run(scenario())
        gc.collect()
    assert still_running and not busy and ran == []
    assert not [w for w in caught if "never awaited" in str(w.message)]
