"""Two runs recording to one file: the second is refused before it touches the file, and the
first run's recording stays whole. A FIFO as the recording to read is refused, not opened."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import pytest

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.policies import RandomPolicy
from rlmesh_gym.recording import EpisodeRecorder, load_recording
from rlmesh_gym.runtime import RuntimeDriver, RuntimeSessionSpec

CLI = [sys.executable, "-m", "rlmesh_gym"]


def _record_episodes(recorder: EpisodeRecorder, env: GymVectorEnv, episodes: int) -> int:
    spec = RuntimeSessionSpec(
        session_id="s", route_id="r", env_contract=env.contract, num_envs=env.num_envs, base_seed=0,
        max_episodes=episodes,
    )  # fmt: skip
    report = asyncio.run(RuntimeDriver(spec, env, RandomPolicy(0, env.contract), hooks=[recorder]).run())
    return report.total_episodes


def test_a_second_run_recording_to_the_same_file_is_refused_and_the_first_stays_whole(tmp_path):
    path = tmp_path / "same.rec"
    env = GymVectorEnv.make("CartPole-v1", num_envs=2)
    first = EpisodeRecorder(path, env.contract, base_seed=0)
    try:
        recorded = _record_episodes(first, env, 20)
        written = path.read_bytes()
        # The second run, a real process, while the first still holds the file open.
        done = subprocess.run(
            [*CLI, "eval", "CartPole-v1", "--policy", "random", "--episodes", "150", "--no-progress",
             "--record", str(path)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode != 0
        assert f"cannot write recording file '{path}': another run is writing it" in done.stderr
        assert "Traceback" not in done.stderr
        assert path.read_bytes() == written
        # In the same process too.
        with pytest.raises(OSError, match="another run is writing it") as caught:
            EpisodeRecorder(path, env.contract)
        assert caught.value.errno == __import__("errno").EBUSY
    finally:
        first.close()
        asyncio.run(env.close(5.0))
    recording = load_recording(path)
    assert not recording.partial and len(recording.episodes) == recorded
    # Once the first writer closed it, the path is free again.
    done = subprocess.run(
        [*CLI, "eval", "CartPole-v1", "--policy", "random", "--episodes", "3", "--no-progress",
         "--record", str(path)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(load_recording(path).episodes) >= 3


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
@pytest.mark.parametrize("command", ["episodes", "record"])
def test_a_fifo_as_a_recording_is_refused_without_opening_it(tmp_path, command):
    fifo = tmp_path / "p"
    os.mkfifo(fifo)
    argv = {
        "episodes": ["episodes", str(fifo)],
        "record": ["eval", "CartPole-v1", "--policy", "random", "--episodes", "2", "--no-progress",
                   "--record", str(fifo)],
    }[command]  # fmt: skip
    # The timeout is a hang guard only: opening the FIFO would block until it.
    done = subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert f"{fifo}" in done.stderr and "FIFO" in done.stderr and "not a regular file" in done.stderr
    assert "Traceback" not in done.stderr
