"""The episode player's data and widget state (headless), the HTML page's content, video export."""

from __future__ import annotations

import json
import re
import warnings

import gymnasium as gym
import numpy as np
import pytest
import traitlets
from _recording_envs import SPACES, make_env, run_session

from rlmesh_gym.cli import main
from rlmesh_gym.recording import EpisodeRecorder, RecordedEpisode, RecordingWarning, load_recording, play
from rlmesh_gym.recording._player_data import episode_payload, leaf_value

pytestmark = pytest.mark.notebook  # (tests/conftest.py)


def _frames_episode(recording):
    return next(index for index, e in enumerate(recording.episodes) if e.frames is not None)


def _no_frames_episode(recording):
    return next(index for index, e in enumerate(recording.episodes) if e.frames is None)


def test_moving_the_slider_puts_that_steps_values_in_the_widget_state(cartpole_recording):
    recording = load_recording(cartpole_recording[0])
    index = _frames_episode(recording)
    episode = recording.episode(index)
    player = recording.play(index)
    state = player.get_state()
    (payload,) = state["episodes"]  # the episode's data, sent to the browser once
    assert payload["steps"] == episode.steps.tolist()
    assert payload["rewards"] == episode.rewards.tolist()
    assert len(payload["frames"]) == len(episode.frames)
    assert all(url.startswith("data:image/jpeg;base64,") for url in payload["frames"])
    assert payload["observation"][0]["data"] == episode.observations.astype(np.float64).reshape(-1).tolist()
    assert state["fps"] == 50.0  # CartPole's render_fps
    assert state["step"] == 0

    row = len(episode.steps) // 2
    player.set_state({"step": row})  # what the frontend sends when the slider moves
    assert player.get_state()["step"] == row
    (current,) = player.current
    assert current["step"] == int(episode.steps[row])
    assert current["reward"] == episode.rewards[row]
    assert current["return"] == pytest.approx(float(episode.rewards[: row + 1].sum()))
    assert current["action"] == int(episode.actions[row])
    assert current["observation"] == episode.observations[row].tolist()
    assert current["frame_step"] == int(episode.frame_steps[row])
    assert (current["terminated"], current["truncated"]) == (False, False)

    player.step = len(episode.steps) - 1
    (last,) = player.current
    assert last["terminated"] and last["return"] == pytest.approx(episode.episode_return)
    with pytest.raises(traitlets.TraitError, match=f"step {len(episode.steps)} is out of range"):
        player.step = len(episode.steps)


def test_two_episodes_side_by_side_share_one_slider(cartpole_recording):
    recording = load_recording(cartpole_recording[0])
    short = min(recording.episodes, key=lambda e: len(e.steps))
    long = max(recording.episodes, key=lambda e: len(e.steps))
    player = play(short, long, labels=("short", "long"))
    assert [p["label"] for p in player.episodes] == ["short", "long"]
    assert player.rows == len(long.steps)
    player.step = len(long.steps) - 1
    first, second = player.current
    assert second["step"] == int(long.steps[-1]) and not second["ended"]
    assert len(short.steps) < len(long.steps)  # seed 11: episode lengths differ
    assert first["ended"] and first["step"] == int(short.steps[-1])
    with pytest.raises(ValueError, match=r"3 label\(s\) for 2 episode"):
        play(short, long, labels=("one", "two", "three"))


def test_bad_inputs_to_the_player(cartpole_recording):
    recording = load_recording(cartpole_recording[0])
    with pytest.raises(
        IndexError, match=f"episode index 99 out of range.*{len(recording.episodes)} complete"
    ):
        recording.play(99)
    with pytest.raises(IndexError, match="out of range"):
        recording.to_html("unused.html", episodes=[99])
    with pytest.raises(ValueError, match="at least one episode"):
        play()
    with pytest.raises(TypeError, match="RecordedEpisode"):
        play(0)
    with pytest.raises(ValueError, match="fps must be a number > 0"):
        recording.play(0, fps=0)


def test_an_episode_without_frames_plays_without_a_frame_panel_and_has_no_video(cartpole_recording, tmp_path):
    recording = load_recording(cartpole_recording[0])
    episode = recording.episode(_no_frames_episode(recording))
    player = episode.play()
    (payload,) = player.episodes
    assert payload["frames"] is None and payload["observation"] is not None
    assert player.current[0]["frame_step"] is None
    with pytest.raises(ValueError, match=r"has no recorded frames.*frame_lanes"):
        episode.to_video(tmp_path / "none.mp4")
    assert not (tmp_path / "none.mp4").exists()


@pytest.mark.parametrize("suffix", [".mp4", ".gif"])
def test_video_export_has_every_frame_at_its_size(cartpole_recording, tmp_path, suffix):
    import imageio.v3 as iio

    recording = load_recording(cartpole_recording[0])
    episode = recording.episode(_frames_episode(recording))
    path = episode.to_video(tmp_path / f"episode{suffix}")
    frames = iio.imread(path, index=None)
    assert frames.shape[1:3] == episode.frames.shape[1:3] == (400, 600)
    if suffix == ".gif":
        from PIL import Image, ImageSequence

        # GIF merges identical consecutive frames into one longer frame: the time adds up to every frame's.
        with Image.open(path) as image:
            durations = [frame.info["duration"] for frame in ImageSequence.Iterator(image)]
        assert len(durations) == frames.shape[0] <= len(episode.frames)
        assert sum(durations) == pytest.approx(len(episode.frames) * 1000 / 50)
        # CartPole has a few colours, so the palette is exact: the first frame is the recorded one.
        np.testing.assert_array_equal(frames[0][..., :3], episode.frames[0])
    else:
        assert frames.shape[0] == len(episode.frames)
        assert iio.immeta(path, plugin="FFMPEG")["fps"] == pytest.approx(50.0)
        # Lossy, but the same picture: the mean error stays small.
        assert np.abs(frames[0].astype(int) - episode.frames[0].astype(int)).mean() < 4
    with pytest.raises(ValueError, match=r"\.mp4 or \.gif"):
        episode.to_video(tmp_path / "episode.avi")


def _page_data(html: str) -> dict:
    match = re.search(r'<script type="application/json" id="rlmesh-data">(.*?)</script>', html, re.S)
    return json.loads(match.group(1))


def test_the_html_page_is_self_contained_and_lists_every_episode(cartpole_recording, tmp_path):
    path, result = cartpole_recording
    recording = load_recording(path)
    page = open(recording.to_html(tmp_path / "run.html")).read()
    # Nothing is fetched: no external script, stylesheet or image.
    assert not re.search(r"""(src|href)\s*=\s*["'](https?:)?//""", page)
    assert "<script src" not in page and "<link" not in page
    data = _page_data(page)
    assert [e["episode_id"] for e in data["episodes"]] == [e.episode_id for e in recording.episodes]
    for episode in recording.episodes:
        assert f"<td>{episode.episode_id}</td>" in page
    counted = {r.episode_id for r in result.episodes}
    assert [e["counted"] for e in data["episodes"]] == [e.episode_id in counted for e in recording.episodes]
    assert page.count("<rect ") >= 1 and 'data-role="histogram"' in page
    small = open(recording.to_html(tmp_path / "small.html", frames=False)).read()
    assert all(e["frames"] is None for e in _page_data(small)["episodes"]) and len(small) < len(page)


def test_cli_episodes_html_writes_the_page(cartpole_recording, tmp_path, capsys):
    out = tmp_path / "cli.html"
    assert main(["episodes", str(cartpole_recording[0]), "--html", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert len(_page_data(out.read_text())["episodes"]) == len(load_recording(cartpole_recording[0]).episodes)
    assert main(["episodes", str(cartpole_recording[0]), "--html", str(tmp_path / "no" / "dir.html")]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_a_truncated_file_plays_what_is_readable_with_load_recordings_warning(
    cartpole_recording, tmp_path, capsys
):
    data = cartpole_recording[0].read_bytes()
    cut = tmp_path / "cut.rec"
    cut.write_bytes(data[: len(data) - 100])
    with pytest.warns(RecordingWarning) as caught:
        recording = load_recording(cut)
    message = str(caught[0].message)
    assert "read only in part" in message and recording.partial and recording.episodes
    last = len(recording.episodes) - 1
    player = recording.play(last)
    player.step = player.rows - 1
    assert player.current[0]["step"] == int(recording.episodes[last].steps[-1])
    page = open(recording.to_html(tmp_path / "cut.html")).read()
    assert 'data-role="partial"' in page
    assert len(_page_data(page)["episodes"]) == len(recording.episodes)
    # The command line prints the same warning and still writes the page.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["episodes", str(cut), "--html", str(tmp_path / "cli-cut.html")]) == 0
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("kind", [*SPACES, "image"])
def test_every_space_kind_plays_and_its_data_is_json(kind, rec_path):
    import base64
    import io

    from PIL import Image

    space = gym.spaces.Box(0, 255, (16, 12, 3), np.uint8) if kind == "image" else SPACES[kind]
    env, _ = make_env(space, num_envs=1, autoreset="disabled")
    with EpisodeRecorder(rec_path, env.contract) as recorder:
        run_session(env, [recorder], max_episodes=1, action_space=space)
    episode = load_recording(rec_path).episode(0)
    player = episode.play()
    (payload,) = player.episodes
    json.dumps(payload, allow_nan=False)  # what the widget sends must be plain JSON
    row = len(episode.steps) - 1
    player.step = row
    (current,) = player.current
    assert current["observation"] == leaf_value(episode.observations, row)
    assert current["action"] == leaf_value(episode.actions, row)
    leaves = {leaf["name"]: leaf for leaf in payload["observation"]}
    if kind == "image":
        (leaf,) = leaves.values()
        assert leaf["kind"] == "image"
        png = base64.b64decode(leaf["data"][row].split(",", 1)[1])
        with Image.open(io.BytesIO(png)) as image:  # lossless: exactly what the policy saw
            np.testing.assert_array_equal(np.asarray(image), episode.observations[row])
    elif kind == "dict":
        assert sorted(leaves) == ["id", "pos", "tag"] and leaves["tag"]["kind"] == "text"
    elif kind == "nested":
        assert sorted(leaves) == ["inner[0]", "inner[1]", "x"]


def test_non_finite_values_reach_the_player_as_strings():
    episode = RecordedEpisode(
        lane=0,
        episode_id="e",
        record=None,
        steps=np.arange(3),
        observations=np.array([[np.nan], [np.inf], [-np.inf]], dtype=np.float32),
        actions=np.array([0, 1, 0]),
        rewards=np.array([1.0, np.nan, 2.0]),
        terminated=np.zeros(3, bool),
        truncated=np.zeros(3, bool),
    )
    payload = episode_payload(episode)
    json.dumps(payload, allow_nan=False)
    assert payload["rewards"] == [1.0, "NaN", 2.0]
    assert payload["observation"][0]["data"] == ["NaN", "Infinity", "-Infinity"]
    assert payload["frames"] is None and "incomplete" in payload["title"]
