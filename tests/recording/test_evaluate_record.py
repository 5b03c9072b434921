"""``evaluate(record=...)`` and ``rlmesh-gym eval --record FILE`` write replayable recordings."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from rlmesh_gym.cli import main
from rlmesh_gym.evaluation import EvaluationOptions, evaluate
from rlmesh_gym.recording import RecordingOptions, load_recording, replay_episode


@pytest.mark.parametrize("autoreset", ["next_step", "disabled"])
def test_evaluate_records_every_counted_episode(autoreset, rec_path):
    result = evaluate(
        "CartPole-v1",
        "random",
        episodes=6,
        num_envs=2,
        seed=0,
        autoreset=autoreset,
        record=rec_path,
        progress=False,
    )
    recording = load_recording(rec_path)
    header = recording.header
    assert (header.env_id, header.num_envs, header.base_seed, header.autoreset_mode) == (
        "CartPole-v1",
        2,
        0,
        autoreset,
    )
    assert recording.ends[-1]["status"] == "ended"
    by_id = {episode.episode_id: episode for episode in recording.episodes}
    # Lanes that met their quota early keep running until the others do: the recording holds
    # those episodes too, so it is a superset of the result's episodes.
    assert len(recording.episodes) >= len(result.episodes) == 6
    for record in result.episodes:
        episode = by_id[record.episode_id]
        assert episode.record == record
        assert len(episode.steps) == episode.length == record.length
        assert episode.observations.shape == (record.length, 4)
        assert float(episode.rewards.sum()) == record.episode_return
    if autoreset == "disabled":
        for record in result.episodes:
            assert replay_episode(recording, record.episode_id).match


def test_evaluate_records_frames_of_chosen_lanes(rec_path):
    options = RecordingOptions(rec_path, frame_lanes=[1], frame_stride=4, observations=False)
    # No env_kwargs: asking for frames makes evaluate create the env with render_mode="rgb_array".
    evaluate(
        "CartPole-v1",
        "random",
        episodes=2,
        num_envs=2,
        seed=1,
        autoreset="disabled",
        record=options,
        progress=False,
    )
    recording = load_recording(rec_path)
    for episode in recording.episodes:
        assert episode.observations is None
        if episode.lane == 1:
            np.testing.assert_array_equal(episode.frame_steps, np.arange(0, episode.length, 4))
            assert episode.frames.dtype == np.uint8 and episode.frames.shape[1:] == (400, 600, 3)
        else:
            assert episode.frames is None
    assert any(episode.lane == 1 for episode in recording.episodes)
    assert recording.header.env_kwargs == {}  # render_mode is not part of the episode


def test_replay_makes_the_env_with_the_evaluation_env_kwargs(rec_path):
    evaluate(
        "CartPole-v1",
        "random",
        episodes=4,
        num_envs=2,
        seed=0,
        autoreset="disabled",
        record=rec_path,
        progress=False,
        options=EvaluationOptions(env_kwargs={"max_episode_steps": 8}),
    )
    recording = load_recording(rec_path)
    assert recording.header.env_kwargs == {"max_episode_steps": 8}
    assert recording.episodes and all(e.length == 8 and e.record.truncated for e in recording.episodes)
    for index in range(len(recording.episodes)):
        result = replay_episode(recording, index)
        assert result.match, str(result)
        assert result.replayed_length == 8
    # An explicit env id overrides the stored env (made without kwargs: CartPole runs past step 8).
    result = replay_episode(recording, 0, env="CartPole-v1")
    assert (result.divergence.step, result.divergence.field, result.divergence.replayed) == (
        7,
        "truncated",
        False,
    )


def test_cli_eval_record_writes_a_recording_episodes_can_read(rec_path, capsys):
    code = main(
        [
            "eval",
            "CartPole-v1",
            "--policy",
            "random",
            "--episodes",
            "4",
            "--num-envs",
            "2",
            "--seed",
            "3",
            "--autoreset",
            "disabled",
            "--record",
            str(rec_path),
            "--no-progress",
        ]
    )
    assert code == 0
    capsys.readouterr()
    recording = load_recording(rec_path)
    assert recording.header.base_seed == 3 and len(recording.episodes) >= 4
    assert all(replay_episode(recording, i).match for i in range(len(recording.episodes)))
    assert main(["episodes", str(rec_path)]) == 0
    assert "autoreset   disabled" in capsys.readouterr().out


def test_evaluate_refuses_bad_recording_options_before_running(rec_path, tmp_path):
    with pytest.raises(ValueError, match=r"lanes \[3\] do not exist: the env has 2 lane\(s\)"):
        evaluate(
            "CartPole-v1", "random", episodes=2, num_envs=2, record=RecordingOptions(rec_path, lanes=[3])
        )
    with pytest.raises(OSError, match="cannot create recording file"):
        evaluate("CartPole-v1", "random", episodes=2, num_envs=2, record=tmp_path / "missing-dir" / "run.rec")


@pytest.mark.notebook
def test_each_recorded_episode_says_whether_the_evaluation_counted_it(rec_path):
    # Quotas (1, 2): lane 0 meets its quota first and keeps running, so it records uncounted episodes.
    result = evaluate(
        "CartPole-v1",
        "random",
        episodes=3,
        num_envs=2,
        seed=3,
        autoreset="disabled",
        record=rec_path,
        progress=False,
    )
    recording = load_recording(rec_path)
    counted_ids = {episode.episode_id for episode in recording.episodes if episode.counted}
    assert counted_ids == {record.episode_id for record in result.episodes}
    assert all(episode.counted is not None for episode in recording.episodes)
    frame = recording.to_pandas()
    assert frame["counted"].tolist() == [episode.counted for episode in recording.episodes]
    assert set(frame.loc[frame["counted"], "episode_id"]) == counted_ids
    assert not any(episode.counted for episode in recording.incomplete_episodes)


def test_an_incompatible_render_mode_with_frames_is_refused(rec_path):
    options = RecordingOptions(rec_path, frame_lanes=[0])
    with pytest.raises(ValueError, match=r"frame_lanes=\[0\].*render_mode='human'.*leave render_mode out"):
        evaluate(
            "CartPole-v1",
            "random",
            episodes=1,
            record=options,
            options=EvaluationOptions(env_kwargs={"render_mode": "human"}),
        )
    import gymnasium as gym

    env = gym.make("CartPole-v1")  # built without a render mode
    try:
        with pytest.raises(ValueError, match=r"env passed in has render_mode=None.*rgb_array"):
            evaluate(env, "random", episodes=1, record=options)
    finally:
        env.close()


class _FixedLengthEnv(gymnasium.Env):
    """Episodes of ``length`` steps with reward 1 per step (so the return is the length)."""

    length = 1

    def __init__(self) -> None:
        self.observation_space = gymnasium.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action):
        self.steps += 1
        return np.zeros(1, dtype=np.float32), 1.0, self.steps >= self.length, False, {}


class _LongEnv(_FixedLengthEnv):
    length = 6


@pytest.mark.parametrize("autoreset", ["next_step", "disabled"])
def test_overflow_episodes_are_recorded_as_not_counted(rec_path, autoreset):
    # Lane 0's episodes take 1 step, lane 1's take 6: lane 0 meets its quota of 2 long before
    # lane 1 and keeps finishing episodes beyond it until the session stops.
    mode = {
        "next_step": gymnasium.vector.AutoresetMode.NEXT_STEP,
        "disabled": gymnasium.vector.AutoresetMode.DISABLED,
    }
    env = gymnasium.vector.SyncVectorEnv([_FixedLengthEnv, _LongEnv], autoreset_mode=mode[autoreset])
    result = evaluate(env, "random", episodes=4, seed=0, record=rec_path, progress=False)
    assert result.episodes_per_lane == (2, 2) and sorted(result.returns) == [1.0, 1.0, 6.0, 6.0]
    recording = load_recording(rec_path)
    lane0 = [episode for episode in recording.episodes if episode.lane == 0]
    assert len(lane0) > 2  # the overflow
    # Exactly each lane's first two are counted, the same ones as in the result.
    assert [episode.counted for episode in lane0] == [True, True] + [False] * (len(lane0) - 2)
    counted = {episode.episode_id for episode in recording.episodes if episode.counted}
    assert counted == {record.episode_id for record in result.episodes}
    assert [e.counted for e in recording.episodes if e.lane == 1] == [True, True]
