"""CancellationToken: one-shot, awaitable, callable from other tasks and threads."""

from __future__ import annotations

import asyncio
import threading

from rlmesh_gym.runtime import CancellationToken


def test_cancel_is_one_shot_and_idempotent() -> None:
    token = CancellationToken()
    assert not token.is_cancelled() and not token.cancelled
    token.cancel()
    token.cancel()
    assert token.is_cancelled() and token.cancelled
    assert repr(token) == "CancellationToken(cancelled=True)"


def test_wait_returns_once_cancelled_from_another_task() -> None:
    async def scenario() -> list[str]:
        token = CancellationToken()
        order: list[str] = []

        async def waiter() -> None:
            await token.wait()
            order.append("woke")

        task = asyncio.create_task(waiter())
        await asyncio.sleep(0)
        order.append("cancel")
        token.cancel()
        await task
        await token.wait()  # already cancelled: returns at once
        return order

    assert asyncio.run(scenario()) == ["cancel", "woke"]


def test_wait_wakes_when_cancelled_from_a_thread() -> None:
    async def scenario() -> bool:
        token = CancellationToken()
        thread = threading.Thread(target=token.cancel)
        thread.start()
        await asyncio.wait_for(token.wait(), 5)
        thread.join()
        return token.is_cancelled()

    assert asyncio.run(scenario())


def test_callbacks_run_on_their_loop_and_can_be_removed() -> None:
    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        token = CancellationToken()
        calls: list[str] = []
        kept = token.add_callback(lambda: calls.append("kept"), loop)
        removed = token.add_callback(lambda: calls.append("removed"), loop)
        token.remove_callback(removed)
        token.cancel()
        assert calls == []  # scheduled, not called inline
        await asyncio.sleep(0)
        token.add_callback(lambda: calls.append("late"), loop)  # after cancel: scheduled at once
        await asyncio.sleep(0)
        token.remove_callback(kept)  # already ran: no-op
        return calls

    assert asyncio.run(scenario()) == ["kept", "late"]


def test_a_cancelled_waiter_unregisters_itself() -> None:
    async def scenario() -> int:
        token = CancellationToken()
        task = asyncio.create_task(token.wait())
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return len(token._callbacks)

    assert asyncio.run(scenario()) == 0
