"""Ctrl+C is never lost by the command line, wherever Python happens to be when it arrives."""

from __future__ import annotations

import time

import pytest

from rlmesh_gym.cli import _ctrl_c_never_dropped


def test_a_ctrl_c_raised_inside_a_finalizer_is_delivered_again():
    class Finalized:
        def __del__(self) -> None:
            raise KeyboardInterrupt  # Python drops it with "Exception ignored in ..."

    with pytest.raises(KeyboardInterrupt):
        with _ctrl_c_never_dropped():
            Finalized()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # the SIGINT handler runs again in here
                pass


def test_other_unraisable_errors_still_reach_the_previous_hook(monkeypatch):
    seen = []
    monkeypatch.setattr("sys.unraisablehook", lambda unraisable: seen.append(unraisable.exc_type))

    class Finalized:
        def __del__(self) -> None:
            raise ValueError("a finalizer failed")

    with _ctrl_c_never_dropped():
        Finalized()
    assert seen == [ValueError]
