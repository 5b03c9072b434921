"""Run an evaluation coroutine to completion from synchronous code: in a script, or in Jupyter
where an event loop is already running on the calling thread."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["run_blocking"]

T = TypeVar("T")

_POLL_SECONDS = 0.05


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # no loop running on this thread
        return None


def run_blocking(
    make_coroutine: Callable[[], Coroutine[Any, Any, T]],
    request_cancel: Callable[[asyncio.AbstractEventLoop], None],
) -> T:
    """Run ``make_coroutine()`` on a fresh event loop and return its result.

    Without a running loop on this thread the coroutine runs right here; with one (Jupyter,
    or a call from inside a coroutine) it runs on its own loop in a worker thread while this
    thread waits. Exceptions propagate unchanged. On Ctrl+C (``KeyboardInterrupt`` in the
    waiting thread, or SIGINT on the main thread) ``request_cancel(loop)`` is called so the
    coroutine can shut down cleanly, and then ``KeyboardInterrupt`` is raised; a second
    Ctrl+C stops waiting for the clean shutdown.
    """
    if _running_loop() is None:
        return _run_here(make_coroutine, request_cancel)
    return _run_in_worker(make_coroutine, request_cancel)


def _run_here(
    make_coroutine: Callable[[], Coroutine[Any, Any, T]],
    request_cancel: Callable[[asyncio.AbstractEventLoop], None],
) -> T:
    loop = asyncio.new_event_loop()
    interrupted = False
    previous_handler: Any = None
    install = threading.current_thread() is threading.main_thread() and (
        signal.getsignal(signal.SIGINT) is signal.default_int_handler
    )

    def on_sigint(signum: int, frame: Any) -> None:
        nonlocal interrupted
        if interrupted:  # second Ctrl+C: stop waiting for the clean shutdown
            raise KeyboardInterrupt
        interrupted = True
        loop.call_soon_threadsafe(request_cancel, loop)

    try:
        if install:
            previous_handler = signal.signal(signal.SIGINT, on_sigint)
        try:
            result = loop.run_until_complete(make_coroutine())
        except BaseException:
            if interrupted:
                raise KeyboardInterrupt from None
            raise
        if interrupted:  # the run finished on its own before the cancel took effect
            raise KeyboardInterrupt
        return result
    finally:
        if install:
            signal.signal(signal.SIGINT, previous_handler)
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


def _run_in_worker(
    make_coroutine: Callable[[], Coroutine[Any, Any, T]],
    request_cancel: Callable[[asyncio.AbstractEventLoop], None],
) -> T:
    outcome: dict[str, Any] = {}
    loop_ready = threading.Event()
    loop_box: list[asyncio.AbstractEventLoop] = []

    async def main() -> T:
        loop_box.append(asyncio.get_running_loop())
        loop_ready.set()
        return await make_coroutine()

    def work() -> None:
        try:
            outcome["result"] = asyncio.run(main())
        except BaseException as exc:  # handed to the waiting thread
            outcome["error"] = exc
        finally:
            loop_ready.set()

    worker = threading.Thread(target=work, name="rlmesh-gym-evaluate", daemon=True)
    worker.start()
    try:
        _join(worker)
    except KeyboardInterrupt:
        loop_ready.wait()
        if loop_box and not loop_box[0].is_closed():
            try:
                loop_box[0].call_soon_threadsafe(request_cancel, loop_box[0])
            except RuntimeError:  # the loop closed in between: nothing left to cancel
                pass
        _join(worker)  # a second Ctrl+C interrupts this wait and propagates
        raise
    if "error" in outcome:
        error = outcome.pop("error")
        raise error
    return outcome["result"]


def _join(worker: threading.Thread) -> None:
    # Wake up regularly: a simulated or other-thread SIGINT (Jupyter's interrupt, interrupt_main)
    # only raises KeyboardInterrupt here once this thread runs Python code again.
    while worker.is_alive():
        worker.join(_POLL_SECONDS)
