"""Ctrl+C is never lost by the command line, wherever Python happens to be when it arrives."""

from __future__ import annotations

import subprocess
import sys

from rlmesh_gym.cli import _ctrl_c_never_dropped

# In a process of its own: the re-delivered SIGINT must meet only this code, not the test runner's.
_FINALIZER_CTRL_C = """
import time
from rlmesh_gym.cli import _ctrl_c_never_dropped

class Finalized:
    def __del__(self):
        raise KeyboardInterrupt  # Python drops it with "Exception ignored in ..."

try:
    with _ctrl_c_never_dropped():
        Finalized()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the SIGINT handler runs again in here
            # Not a bare `while ...: pass`: on CPython 3.13.0 a KeyboardInterrupt raised in such a
            # loop escaped the enclosing try (seen here; a loop that sleeps is not affected).
            time.sleep(0.01)
except KeyboardInterrupt:
    print("delivered")
else:
    print("lost")
"""


def test_a_ctrl_c_raised_inside_a_finalizer_is_delivered_again():
    done = subprocess.run(
        [sys.executable, "-c", _FINALIZER_CTRL_C], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, "delivered\n"), done.stderr


def test_other_unraisable_errors_still_reach_the_previous_hook(monkeypatch):
    seen = []
    monkeypatch.setattr("sys.unraisablehook", lambda unraisable: seen.append(unraisable.exc_type))

    class Finalized:
        def __del__(self) -> None:
            raise ValueError("a finalizer failed")

    with _ctrl_c_never_dropped():
        Finalized()
    assert seen == [ValueError]
