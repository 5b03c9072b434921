"""Every subcommand that prints ends quietly when the reader of its output goes away.

Each command runs as a real process whose stdout is a pipe; the pipe's only read end is closed
before the command writes, so its first write fails with EPIPE, as in ``... | head -0``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlmesh_gym.cli import EXIT_BROKEN_PIPE

pytestmark = pytest.mark.slow  # a real CLI process per test

CLI = [sys.executable, "-m", "rlmesh_gym"]


def _run_without_reader(*argv: str) -> tuple[int, str]:
    process = subprocess.Popen([*CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    process.stdout.close()  # the reader is gone before the command prints anything
    _, err = process.communicate(timeout=100)
    return process.returncode, err


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("pipe") / "run.rec"
    argv = ["eval", "CartPole-v1", "--policy", "random", "--episodes", "2", "--num-envs", "1"]
    subprocess.run([*CLI, *argv, "--no-progress", "--record", str(path)], check=True, capture_output=True)
    return str(path)


@pytest.mark.parametrize(
    "argv",
    [
        ["eval", "CartPole-v1", "--policy", "random", "--episodes", "2", "--num-envs", "1", "--json"],
        ["eval", "CartPole-v1", "--policy", "random", "--episodes", "2", "--num-envs", "1", "--no-progress"],
        ["inspect", "CartPole-v1", "--json"],
        ["inspect", "CartPole-v1"],
        ["serve-env", "CartPole-v1", "--address", "127.0.0.1:0"],
        ["serve-policy", "random", "--env-id", "CartPole-v1", "--address", "127.0.0.1:0"],
    ],
    ids=["eval-json", "eval-table", "inspect-json", "inspect-table", "serve-env", "serve-policy"],
)
def test_a_closed_pipe_ends_the_command_quietly(argv):
    code, err = _run_without_reader(*argv)
    assert (code, err) == (EXIT_BROKEN_PIPE, "")


def test_help_without_a_reader_is_quiet():
    # From Python 3.11 argparse drops the help text itself when stdout is gone (exit 0); before,
    # the write fails and the command ends as on any closed pipe. Quiet either way.
    code, err = _run_without_reader()
    assert code in (0, EXIT_BROKEN_PIPE) and err == ""


def test_episodes_ends_quietly_on_a_closed_pipe(recording):
    assert _run_without_reader("episodes", recording) == (EXIT_BROKEN_PIPE, "")


def test_head_reads_the_first_line_and_the_command_stays_quiet():
    # The user's own pipeline; whether our write races head's exit or not, nothing is reported.
    command = f"{sys.executable} -m rlmesh_gym inspect CartPole-v1 --json | head -1"
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=100, check=True)
    assert result.stdout == "{\n" and result.stderr == ""
