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
    make_coroutine: Callable[[], Coroutine[Any, Any, T]], request_cancel: Callable[[], None]
) -> T:
    """Run ``make_coroutine()`` on a fresh event loop and return its result.

    Without a running loop on this thread the coroutine runs right here; with one (Jupyter,
    or a call from inside a coroutine) it runs on its own loop in a worker thread while this
    thread waits. Exceptions propagate unchanged.

    On Ctrl+C (SIGINT on the main thread, or ``KeyboardInterrupt`` in the waiting thread)
    ``request_cancel()`` is called from another thread than the loop's (it must be
    thread-safe, like ``CancellationToken.cancel``) so the coroutine can shut down cleanly;
    then ``KeyboardInterrupt`` is raised. A second Ctrl+C stops waiting for the clean shutdown.
    The loop is not asked to run the cancel as a callback because an in-process session
    may never yield to it between steps.
    """
    if _running_loop() is None:
        return _run_here(make_coroutine, request_cancel)
    return _run_in_worker(make_coroutine, request_cancel)


def _run_here(make_coroutine: Callable[[], Coroutine[Any, Any, T]], request_cancel: Callable[[], None]) -> T:
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
        # A helper thread, because this handler may run while this thread holds the lock
        # request_cancel needs.
        threading.Thread(target=request_cancel, name="rlmesh-gym-cancel", daemon=True).start()

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
    make_coroutine: Callable[[], Coroutine[Any, Any, T]], request_cancel: Callable[[], None]
) -> T:
    outcome: dict[str, Any] = {}
    finished = threading.Event()

    def work() -> None:
        try:
            outcome["result"] = asyncio.run(make_coroutine())
        except BaseException as exc:  # handed to the waiting thread
            outcome["error"] = exc
        finally:
            finished.set()

    worker = threading.Thread(target=work, name="rlmesh-gym-evaluate", daemon=True)
    try:
        worker.start()  # inside the try: the run may be interrupted before start() returns
        _wait(finished)
    except KeyboardInterrupt:
        request_cancel()
        _wait(finished)  # a second Ctrl+C interrupts this wait and propagates
        raise
    if "error" in outcome:
        raise outcome.pop("error")
    return outcome["result"]


def _wait(finished: threading.Event) -> None:
    # An Event, not Thread.join: on Python 3.11 a KeyboardInterrupt inside join() can mark a
    # still-running thread as stopped. Wake up regularly: a simulated or other-thread SIGINT
    # (Jupyter's interrupt, interrupt_main) only raises here once this thread runs Python code.
    while not finished.wait(_POLL_SECONDS):
        pass
