"""RecordingOptions: lanes, step stride, observations off, frames only when asked; bad options."""

from __future__ import annotations

import gymnasium as gym
import msgpack
import numpy as np
import pytest
from _recording_envs import SPACES, assert_tree_equal, make_env, run_session, stack

from rlmesh_gym.recording import EpisodeRecorder, RecordingOptions, _recorder, load_recording


def _run(options, *, num_envs=3, autoreset="disabled", render_mode=None, space="box", max_episodes=8):
    gym_space = SPACES[space]
    env, lanes = make_env(gym_space, num_envs=num_envs, autoreset=autoreset, render_mode=render_mode)
    render = env.render_frames if render_mode else None
    with EpisodeRecorder(options, env.contract, base_seed=4, render_frames=render) as recorder:
        run_session(env, [recorder], max_episodes=max_episodes, base_seed=4, action_space=gym_space)
    return load_recording(options.path if isinstance(options, RecordingOptions) else options), lanes


def test_only_the_chosen_lanes_are_recorded(rec_path):
    recording, lanes = _run(RecordingOptions(rec_path, lanes=[2, 0]))
    assert recording.header.lanes == (0, 2)
    assert {e.lane for e in recording.episodes} == {0, 2}
    for lane in (0, 2):
        real = [e for e in lanes[lane].episodes if e.terminated and e.terminated[-1]]
        assert len([e for e in recording.episodes if e.lane == lane]) == len(real)


def test_step_stride_keeps_every_kth_step_of_each_episode(rec_path):
    recording, lanes = _run(RecordingOptions(rec_path, step_stride=2), autoreset="next_step")
    assert recording.episodes
    for lane in range(3):
        real = [e for e in lanes[lane].episodes if e.terminated and e.terminated[-1]]
        for episode, truth in zip([e for e in recording.episodes if e.lane == lane], real, strict=True):
            picked = list(range(0, len(truth.actions), 2))
            np.testing.assert_array_equal(episode.steps, picked)
            assert_tree_equal(episode.observations, stack([truth.observations[t] for t in picked]))
            assert_tree_equal(episode.actions, stack([truth.actions[t] for t in picked]))
            np.testing.assert_array_equal(episode.rewards, [truth.rewards[t] for t in picked])
            assert episode.length == len(truth.actions)  # the summary stays complete


def test_observations_off_keeps_actions_rewards_and_flags(rec_path):
    recording, lanes = _run(RecordingOptions(rec_path, observations=False), space="dict")
    assert recording.header.options["observations"] is False
    for episode in recording.episodes:
        assert episode.observations is None
        assert episode.actions is not None
        assert len(episode.rewards) == episode.length
        assert episode.terminated[-1]


def test_no_frames_and_no_rendering_unless_asked(rec_path):
    recording, lanes = _run(RecordingOptions(rec_path), render_mode="rgb_array")
    assert all(e.frames is None and e.frame_steps is None for e in recording.episodes)
    assert all(lane.render_calls == 0 for lane in lanes)


def test_frames_of_the_chosen_lanes_every_frame_stride_steps(rec_path):
    options = RecordingOptions(rec_path, frame_lanes=[1], frame_stride=2)
    recording, lanes = _run(options, render_mode="rgb_array", autoreset="next_step")
    with_frames = [e for e in recording.episodes if e.frames is not None]
    assert with_frames and all(e.lane == 1 for e in with_frames)
    for episode in recording.episodes:
        if episode.lane != 1:
            assert episode.frames is None
            continue
        expected_steps = np.arange(0, episode.length, 2)
        np.testing.assert_array_equal(episode.frame_steps, expected_steps)
        assert episode.frames.dtype == np.uint8 and episode.frames.shape == (len(expected_steps), 2, 3, 3)
        # Each frame was rendered when the model saw that step's observation (it is filled with t).
        np.testing.assert_array_equal(episode.frames[:, 0, 0, 0], expected_steps)


def test_frames_need_a_renderer(rec_path):
    env, _ = make_env(SPACES["box"], num_envs=2)
    with pytest.raises(ValueError, match="frame_lanes were asked for but no render_frames"):
        EpisodeRecorder(RecordingOptions(rec_path, frame_lanes=[0]), env.contract)


def test_an_env_that_cannot_render_switches_frames_off_once(rec_path):
    env, _ = make_env(SPACES["box"], num_envs=2)  # no render_mode: render_frames raises
    options = RecordingOptions(rec_path, frame_lanes=[0])
    with pytest.warns(RuntimeWarning, match="frame recording is switched off") as caught:
        with EpisodeRecorder(options, env.contract, render_frames=env.render_frames) as recorder:
            run_session(env, [recorder], max_episodes=4, action_space=SPACES["box"])
    assert len([w for w in caught if "frame recording" in str(w.message)]) == 1
    recording = load_recording(rec_path)
    assert recording.episodes and all(e.frames is None for e in recording.episodes)


def test_frames_no_player_can_show_switch_frames_off_once_and_the_recording_reads_whole(rec_path):
    env, _ = make_env(SPACES["box"], num_envs=2)

    def two_channel_frames():
        return [np.zeros((8, 8, 2), np.uint8), np.zeros((8, 8, 2), np.uint8)]

    options = RecordingOptions(rec_path, frame_lanes=[0])
    with pytest.warns(RuntimeWarning, match=r"lane 0 rendered a uint8 array of shape \(8, 8, 2\)") as caught:
        with EpisodeRecorder(options, env.contract, render_frames=two_channel_frames) as recorder:
            run_session(env, [recorder], max_episodes=4, action_space=SPACES["box"])
    assert len([w for w in caught if "frame recording" in str(w.message)]) == 1
    recording = load_recording(rec_path)
    assert not recording.partial and len(recording.episodes) >= 4
    assert all(e.frames is None for e in recording.episodes)


def test_long_episodes_are_written_in_chunks_that_load_as_one(rec_path, tmp_path, monkeypatch):
    def run(path):
        options = RecordingOptions(path, step_stride=2, frame_lanes=[0, 1])
        return _run(options, num_envs=2, render_mode="rgb_array", max_episodes=6)[0]

    reference = run(tmp_path / "ref.rec")
    monkeypatch.setattr(_recorder, "_MAX_BUFFERED_STEPS", 2)  # a chunk every 2 steps: mid-episode
    chunked = run(rec_path)
    chunks = {}
    with open(rec_path, "rb") as stream:
        for record in msgpack.Unpacker(stream, raw=False, strict_map_key=False):
            if record["kind"] == "steps":
                chunks[record["episode_id"]] = record["chunk"] + 1
    assert max(chunks.values()) >= 3
    pairs = [*zip(chunked.episodes, reference.episodes, strict=True)]
    pairs += [*zip(chunked.incomplete_episodes, reference.incomplete_episodes, strict=True)]
    for left, right in pairs:
        assert (left.lane, left.seed, left.length, left.episode_return, left.complete) == (
            right.lane,
            right.seed,
            right.length,
            right.episode_return,
            right.complete,
        )
        for name in ("steps", "observations", "actions", "rewards", "terminated", "frame_steps", "frames"):
            np.testing.assert_array_equal(getattr(left, name), getattr(right, name), err_msg=name)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"lanes": []}, ValueError, "lanes is empty"),
        ({"lanes": [0, 0]}, ValueError, "lists lane 0 twice"),
        ({"lanes": [-1]}, ValueError, "non-negative int lane indices"),
        ({"lanes": "0"}, TypeError, "sequence of lane indices"),
        ({"step_stride": 0}, ValueError, "step_stride must be an int >= 1"),
        ({"frame_stride": 1.5}, ValueError, "frame_stride must be an int >= 1"),
        ({"observations": 1}, TypeError, "observations must be a bool"),
        ({"lanes": [1], "frame_lanes": [0]}, ValueError, r"frame_lanes \[0\] are not recorded lanes \[1\]"),
    ],
)
def test_bad_options_are_refused_with_what_was_expected(kwargs, error, match, rec_path):
    with pytest.raises(error, match=match):
        RecordingOptions(rec_path, **kwargs)


def test_bad_recorder_arguments(rec_path, tmp_path):
    env, _ = make_env(SPACES["box"], num_envs=2)
    with pytest.raises(ValueError, match=r"lanes \[5\] do not exist: the env has 2 lane\(s\)"):
        EpisodeRecorder(RecordingOptions(rec_path, lanes=[0, 5]), env.contract)
    with pytest.raises(TypeError, match="contract must be an EnvContract"):
        EpisodeRecorder(rec_path, {"num_envs": 2})
    with pytest.raises(TypeError, match="path must be a non-empty str"):
        EpisodeRecorder(None, env.contract)
    with pytest.raises(OSError, match="cannot create recording file"):
        EpisodeRecorder(tmp_path / "no-such-dir" / "run.rec", env.contract)


def test_render_frames_renders_only_the_chosen_lanes():
    env, lanes = make_env(gym.spaces.Box(-1, 1, (2,), np.float32), num_envs=3, render_mode="rgb_array")
    for lane in lanes:
        lane.reset(seed=lane.lane)
    frames = env.render_frames(lanes=[1])
    assert frames[0] is None and frames[2] is None and frames[1].shape == (2, 3, 3)
    assert [lane.render_calls for lane in lanes] == [0, 1, 0]
    with pytest.raises(ValueError, match=r"lanes \[3\] do not exist"):
        env.render_frames(lanes=[3])
