"""Fixtures of the recording tests (the scripted envs live in ``_recording_envs``)."""

from __future__ import annotations

import pytest


@pytest.fixture
def rec_path(tmp_path):
    return tmp_path / "run.rec"


@pytest.fixture(scope="session")
def cartpole_recording(tmp_path_factory):
    """A small CartPole recording with frames on lane 0 only (lane 1 has none), and its result."""
    from rlmesh_gym.evaluation import evaluate
    from rlmesh_gym.recording import RecordingOptions

    path = tmp_path_factory.mktemp("player") / "cartpole.rec"
    result = evaluate(
        "CartPole-v1",
        "random",
        episodes=3,
        num_envs=2,
        seed=11,
        autoreset="disabled",
        record=RecordingOptions(path, frame_lanes=[0]),
        progress=False,
    )
    return path, result
