"""Fixtures of the recording tests (the scripted envs live in ``_recording_envs``)."""

from __future__ import annotations

import pytest


@pytest.fixture
def rec_path(tmp_path):
    return tmp_path / "run.rec"
