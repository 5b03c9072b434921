"""``eval``/``compare --record`` with ``--frame-lanes`` and ``--frame-stride``: frames in the recording."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlmesh_gym.cli import main
from rlmesh_gym.recording import load_recording

pytest.importorskip("pygame")  # CartPole renders with pygame

EVAL = ["eval", "CartPole-v1", "--policy", "random", "--episodes", "2", "--num-envs", "2",
        "--autoreset", "disabled", "--no-progress"]  # fmt: skip


def test_eval_records_the_frames_of_the_chosen_lanes_every_kth_step(tmp_path: Path) -> None:
    path = tmp_path / "run.rec"
    assert main([*EVAL, "--record", str(path), "--frame-lanes", "1", "--frame-stride", "3"]) == 0
    recording = load_recording(path)
    for episode in recording.episodes:
        if episode.lane == 1:
            assert episode.frames is not None and episode.frames.shape[1:] == (400, 600, 3)
            assert episode.frame_steps.tolist() == list(range(0, episode.length, 3))
        else:
            assert episode.frames is None


def test_compare_records_frames_for_every_policy(tmp_path: Path) -> None:
    argv = ["compare", "CartPole-v1", "--policy", "a=random", "--policy", "b=random", "--episodes", "2",
            "--num-envs", "2", "--record", str(tmp_path / "runs"), "--frame-lanes", "0",
            "--no-progress"]  # fmt: skip
    assert main(argv) == 0
    for name in ("a", "b"):
        episodes = load_recording(tmp_path / "runs" / f"{name}.rec").episodes
        assert [episode.frames is not None for episode in episodes] == [e.lane == 0 for e in episodes]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--frame-lanes", "0"], "--frame-lanes needs --record FILE"),
        (["--record", "x.rec", "--frame-stride", "2"], "--frame-stride needs --frame-lanes"),
        (["--record", "x.rec", "--frame-lanes", "0,a"], "--frame-lanes must be distinct lane numbers >= 0"),
        (["--record", "x.rec", "--frame-lanes", "0,0"], "--frame-lanes must be distinct lane numbers >= 0"),
        (["--record", "x.rec", "--frame-lanes", "2"], "--frame-lanes [2] do not exist: lanes are 0..1"),
        (
            ["--record", "x.rec", "--frame-lanes", "0", "--frame-stride", "0"],
            "--frame-stride must be at least 1",
        ),
    ],
)
def test_bad_frame_options_exit_2_saying_what_is_expected(
    extra, message, tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([*EVAL, *extra]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "x.rec").exists()
