"""Env packages as users have them: module:EnvId, --import, --env-kwargs, and minigrid end to end."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("minigrid")

from rlmesh_gym.cli import main  # noqa: E402
from rlmesh_gym.envs import GymVectorEnv  # noqa: E402
from rlmesh_gym.evaluation import evaluate  # noqa: E402
from rlmesh_gym.recording import load_recording, replay_episode  # noqa: E402

MINIGRID = "minigrid:MiniGrid-Empty-5x5-v0"


def cli_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    code = main([*argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_minigrid_evaluates_from_the_cli_with_its_mission_as_text(capsys: pytest.CaptureFixture[str]) -> None:
    result = cli_json(["eval", MINIGRID, "--policy", "random", "--episodes", "4", "--no-progress"], capsys)
    assert len(result["episodes"]) == 4 and result["env_id"] == MINIGRID
    contract = cli_json(["inspect", MINIGRID], capsys)
    assert "'mission': UnrestrictedText(1, 28)" in contract["observation_space"]  # any characters


def test_import_option_and_env_kwargs_reach_the_env(capsys: pytest.CaptureFixture[str]) -> None:
    # minigrid's max_steps caps every episode: the random policy cannot reach the goal in 3 steps.
    argv = ["eval", "MiniGrid-Empty-5x5-v0", "--import", "minigrid", "--policy", "random", "--episodes", "3",
            "--num-envs", "3", "--env-kwargs", "max_steps=3"]  # fmt: skip
    result = cli_json(argv, capsys)
    assert [episode["length"] for episode in result["episodes"]] == [3, 3, 3]
    result = cli_json([*argv[:-2], "--env-kwargs", '{"max_steps": 2}'], capsys)
    assert [episode["length"] for episode in result["episodes"]] == [2, 2, 2]


def test_a_minigrid_recording_stores_the_env_kwargs_and_replays(tmp_path: Path) -> None:
    path = tmp_path / "minigrid.rec"
    argv = ["eval", MINIGRID, "--policy", "random", "--episodes", "3", "--num-envs", "3", "--autoreset",
            "disabled", "--env-kwargs", "max_steps=6", "--record", str(path), "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    recording = load_recording(path)
    assert recording.header.env_id == MINIGRID
    assert recording.header.env_kwargs == {"max_steps": 6}
    assert len(recording.episodes) == 3
    missions = recording.episodes[0].observations["mission"]
    assert set(missions) == {"get to the green goal square"}
    assert replay_episode(recording, 0).match


def test_serve_env_serves_minigrid_with_env_kwargs() -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rlmesh_gym",
            "serve-env",
            MINIGRID,
            "--num-envs",
            "2",
            "--autoreset",
            "disabled",
            "--env-kwargs",
            "max_steps=4",
            "--address",
            "127.0.0.1:0",
        ],  # fmt: skip
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()
        match = re.search(r"serving MiniGrid-Empty-5x5-v0 \(2 lane\(s\).* on (\S+)$", banner)
        assert match, banner + (process.stderr.read() if process.poll() is not None else "")
        code = main(["eval", "--env-address", match.group(1), "--policy", "random", "--episodes", "2",
                     "--no-progress"])  # fmt: skip
        assert code == 0
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)
        process.stdout.close()
        process.stderr.close()
    assert process.returncode == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["inspect", "ALE/Pong-v5"], r"Namespace ALE not found.*ale_py:ALE/Pong-v5.*--import ale_py"),
        (["eval", "highway-fast-v0"], r"unknown env id 'highway-fast-v0'.*PACKAGE:highway-fast-v0.*--import"),
        (["inspect", "minigrid:NoSuch-v0"], r"importing 'minigrid' did not register 'NoSuch-v0'"),
        (
            ["inspect", "CartPole-v1", "--import", "no_such_package"],
            r"cannot import env package 'no_such_package'",
        ),
        (["inspect", "CartPole-v1", "--env-kwargs", "[1, 2]"], r"is a JSON array, not a JSON object"),
        (["eval", "CartPole-v1", "--env-kwargs", "steps"], r"neither a JSON object nor KEY=VALUE"),
        (["serve-env", "CartPole-v1", "--env-kwargs", "3"], r"is a JSON number, not a JSON object"),
        (
            ["inspect", "CartPole-v1", "--env-kwargs", "a=1", "--env-kwargs", '{"a": 2}'],
            r"'a' is given twice",
        ),
    ],
)
def test_bad_env_ids_and_env_kwargs_are_named(argv: list[str], message: str, capsys) -> None:
    assert main(argv) == 2
    assert re.search(message, capsys.readouterr().err)


def test_unknown_ids_from_python_name_both_ways() -> None:
    import gymnasium

    with pytest.raises(ValueError, match=r"ale_py:ALE/Pong-v5.*import ale_py") as caught:
        evaluate("ALE/Pong-v5", "random", episodes=1, progress=False)
    assert isinstance(caught.value, gymnasium.error.UnregisteredEnv)  # still gymnasium's type too
    with pytest.raises(gymnasium.error.UnregisteredEnv, match="PACKAGE:NoSuch-v0"):
        GymVectorEnv.make("NoSuch-v0")
