"""Fixtures of the gRPC transport tests."""

from __future__ import annotations

import threading

import pytest


@pytest.fixture
def no_leaked_threads():
    """Fail if the test leaves threads behind (grpc's one process-wide poller thread is allowed)."""
    before = set(threading.enumerate())
    yield
    extra = [
        thread
        for thread in threading.enumerate()
        if thread not in before and thread.is_alive() and "_poll_wrapper" not in thread.name
    ]
    assert not extra, f"threads left running: {extra}"
