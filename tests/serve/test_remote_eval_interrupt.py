"""Ctrl+C during ``rlmesh-gym eval --env-address`` ends it like the local path: exit 130, one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from test_cli_serve import Served

EVAL = [sys.executable, "-m", "rlmesh_gym", "eval", "--env-address"]


@pytest.mark.torch  # the shipped policy / every public module, torch included
def test_ctrl_c_during_a_remote_eval_exits_130_quietly_and_the_server_keeps_serving(
    tmp_path, no_leaked_threads
):
    served = Served("serve-env", "CartPole-v1", "--num-envs", "2", "--address", "127.0.0.1:0")
    record = tmp_path / "run.rec"
    try:
        address = served.address()
        evaluation = subprocess.Popen(
            [
                *EVAL,
                address,
                "--policy",
                "random",
                "--episodes",
                "1000000",
                "--no-progress",
                "--record",
                str(record),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            # The recording's header is written when evaluation starts; let it step a while.
            deadline = time.monotonic() + 60
            while not record.exists() and evaluation.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(1.5)
            assert evaluation.poll() is None, evaluation.communicate()
            evaluation.send_signal(signal.SIGINT)
            out, err = evaluation.communicate(timeout=60)
        finally:
            if evaluation.poll() is None:
                evaluation.kill()
                evaluation.wait()
        # The server outlives the interrupted client and serves the next one.
        again = subprocess.run(
            [*EVAL, address, "--episodes", "2", "--json"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        code, _, server_err = served.finish(signal.SIGTERM)
    assert evaluation.returncode == 130, err
    assert err.splitlines() == ["rlmesh-gym: error: interrupted"], err
    assert again.returncode == 0, again.stderr
    assert code == 0, server_err
