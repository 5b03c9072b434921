"""Ctrl+C during ``rlmesh-gym eval --env-address`` ends it like the local path: exit 130, one line.

SIGINT is sent at several moments of real processes: while connecting to a server that never
answers, and at different points of a running evaluation. Each must end within a bound far below
the 300 s request timeout a lost interrupt would wait for (a dropped cancellation once left the
evaluation running on for good).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from _served import Served

from rlmesh_gym._deadline import _within_task, wait_within

EVAL = [sys.executable, "-m", "rlmesh_gym", "eval", "--env-address"]
# Far above a clean shutdown (a bounded Close of 5 s at most), far below a lost interrupt.
STOPS_WITHIN = 25.0


def _interrupted(evaluation: subprocess.Popen) -> tuple[int, str]:
    """Send SIGINT; the exit code and stderr (a timeout here is the bug this file guards)."""
    evaluation.send_signal(signal.SIGINT)
    try:
        _, err = evaluation.communicate(timeout=STOPS_WITHIN)
    finally:
        if evaluation.poll() is None:
            evaluation.kill()
            evaluation.wait()
    return evaluation.returncode, err


def _start(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [*EVAL, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_ctrl_c_while_connecting_to_a_server_that_never_answers_exits_130_at_once():
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never speaks HTTP/2
        silent.settimeout(60)
        evaluation = _start(
            f"127.0.0.1:{silent.getsockname()[1]}", "--policy", "random", "--connect-timeout", "120"
        )
        try:
            connection, _ = silent.accept()  # the client is inside connect now
        except BaseException:
            evaluation.kill()
            evaluation.wait()
            raise
        with connection:
            time.sleep(0.3)
            code, err = _interrupted(evaluation)
    assert code == 130, err
    assert err.splitlines() == ["rlmesh-gym: error: interrupted"], err


@pytest.mark.slow
@pytest.mark.torch  # the shipped policy / every public module, torch included
def test_ctrl_c_during_a_remote_eval_exits_130_quietly_and_the_server_keeps_serving(
    tmp_path, no_leaked_threads
):
    served = Served("serve-env", "CartPole-v1", "--num-envs", "2", "--address", "127.0.0.1:0")
    outcomes = []
    try:
        address = served.address()
        # Right as stepping starts, and after a while of stepping.
        for delay in (0.0, 0.2, 1.0):
            record = tmp_path / f"run-{delay}.rec"
            evaluation = _start(
                address,
                "--policy",
                "random",
                "--episodes",
                "1000000",
                "--no-progress",
                "--record",
                str(record),
            )
            # The recording's header is written when evaluation starts.
            deadline = time.monotonic() + 60
            while not record.exists() and evaluation.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            time.sleep(delay)
            assert evaluation.poll() is None, evaluation.communicate()
            outcomes.append(_interrupted(evaluation))
        # The server outlives the interrupted clients and serves the next one.
        again = subprocess.run(
            [*EVAL, address, "--episodes", "2", "--json"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        code, _, server_err = served.finish(signal.SIGTERM)
    for returncode, err in outcomes:
        assert returncode == 130, err
        assert err.splitlines() == ["rlmesh-gym: error: interrupted"], err
    assert again.returncode == 0, again.stderr
    assert code == 0, server_err


@pytest.mark.parametrize("wait", [wait_within, _within_task], ids=["this-python", "python-3.10-form"])
def test_a_cancellation_next_to_the_answer_is_never_dropped(wait):
    """The waiting task is cancelled in the very iteration its answer arrives: asyncio.wait_for
    before Python 3.12 returns the answer and drops the cancellation; wait_within raises it."""

    async def scenario() -> None:
        answer = asyncio.get_running_loop().create_future()
        waiting = asyncio.ensure_future(wait(answer, 300.0))
        await asyncio.sleep(0)  # the task now waits for the answer
        answer.set_result("reply")
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(scenario())


@pytest.mark.parametrize("wait", [wait_within, _within_task], ids=["this-python", "python-3.10-form"])
def test_wait_within_returns_the_answer_and_times_out_like_wait_for(wait):
    async def scenario() -> None:
        async def answer_after(seconds: float) -> str:
            await asyncio.sleep(seconds)
            return "reply"

        assert await wait(answer_after(0), 5.0) == "reply"
        assert await wait(answer_after(0), None) == "reply"
        with pytest.raises(asyncio.TimeoutError):
            await wait(answer_after(30), 0.05)

    asyncio.run(scenario())
