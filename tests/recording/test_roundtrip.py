"""Every space kind and every autoreset mode: what is recorded is exactly what happened."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
from _recording_envs import SPACES, assert_tree_equal, make_env, run_session, stack

from rlmesh_gym.proto import env_pb2
from rlmesh_gym.recording import EpisodeRecorder, load_recording
from rlmesh_gym.recording._format import NDARRAY_EXT


def _check_against_history(recording, lanes) -> int:
    """Every complete recorded episode equals its lane's real episode, in order; returns the count."""
    checked = 0
    for lane_env in lanes:
        recorded = [e for e in recording.episodes if e.lane == lane_env.lane]
        real = [e for e in lane_env.episodes if e.terminated and e.terminated[-1]]
        assert len(recorded) == len(real) > 0
        for episode, truth in zip(recorded, real, strict=True):
            length = len(truth.actions)
            assert episode.length == length
            np.testing.assert_array_equal(episode.steps, np.arange(length))
            assert_tree_equal(episode.observations, stack(truth.observations), "observations")
            assert_tree_equal(episode.actions, stack(truth.actions), "actions")
            np.testing.assert_array_equal(episode.rewards, truth.rewards)
            assert episode.rewards.dtype == np.float64
            np.testing.assert_array_equal(episode.terminated, truth.terminated)
            assert not episode.truncated.any()
            assert episode.record.episode_return == pytest.approx(sum(truth.rewards))
            assert episode.seed == truth.seed
            checked += 1
    return checked


@pytest.mark.parametrize("kind", sorted(SPACES))
def test_every_space_kind_round_trips(kind, rec_path):
    space = SPACES[kind]
    env, lanes = make_env(space, num_envs=2, autoreset="disabled")
    recorder = EpisodeRecorder(rec_path, env.contract, base_seed=7)
    run_session(env, [recorder], max_episodes=5, action_space=space)
    recorder.close()

    recording = load_recording(rec_path)
    assert recording.header.contract == env.contract
    assert recording.header.observation_space == env.contract.observation_space
    assert _check_against_history(recording, lanes) == len(recording.episodes) >= 5


@pytest.mark.parametrize("autoreset", ["next_step", "same_step", "disabled"])
def test_episode_alignment_in_every_autoreset_mode(autoreset, rec_path):
    # Lanes of different lengths, several episodes each: under NEXT_STEP the autoreset step
    # (terminal observation shown, action ignored, reward 0) must belong to no episode.
    space = SPACES["box"]
    env, lanes = make_env(space, num_envs=3, autoreset=autoreset)
    recorder = EpisodeRecorder(rec_path, env.contract, base_seed=3)
    report = run_session(env, [recorder], max_episodes=9, action_space=space)
    recorder.close()

    recording = load_recording(rec_path)
    assert recording.header.autoreset_mode == autoreset
    assert _check_against_history(recording, lanes) == len(recording.episodes)
    assert len(recording.episodes) == report.total_episodes
    # Per lane, the recorded steps are exactly the steps the lane's env really took: nothing
    # extra (no NEXT_STEP autoreset step), nothing missing (running episodes are kept).
    for lane_env in lanes:
        episodes = [
            e for e in (*recording.episodes, *recording.incomplete_episodes) if e.lane == lane_env.lane
        ]
        assert sum(len(e.steps) for e in episodes) == lane_env.total_steps
    if autoreset == "next_step":
        assert sum(lane_env.total_steps for lane_env in lanes) < report.total_steps * 3
    for episode in recording.incomplete_episodes:
        truth = lanes[episode.lane].episodes[-1]
        assert_tree_equal(episode.observations, stack(truth.observations[: len(episode.steps)]))
        assert not episode.complete and episode.record is None


def test_first_episode_of_each_lane_has_its_seed_and_later_ones_only_under_disabled(rec_path, tmp_path):
    space = SPACES["discrete"]
    for autoreset in ("next_step", "disabled"):
        path = tmp_path / f"{autoreset}.rec"
        env, lanes = make_env(space, num_envs=2, autoreset=autoreset)
        recorder = EpisodeRecorder(path, env.contract, base_seed=11)
        run_session(env, [recorder], max_episodes=6, base_seed=11, action_space=space)
        recorder.close()
        episodes = load_recording(path).episodes
        for lane in (0, 1):
            seeds = [e.seed for e in episodes if e.lane == lane]
            assert seeds[0] == lanes[lane].episodes[0].seed is not None
            if autoreset == "disabled":
                assert all(seed is not None for seed in seeds)
            else:
                assert all(seed is None for seed in seeds[1:])


def test_arrays_are_stored_as_numpy_ext_never_python_lists(rec_path):
    space = SPACES["dict"]
    env, _ = make_env(space, num_envs=2, autoreset="disabled")
    with EpisodeRecorder(rec_path, env.contract) as recorder:
        run_session(env, [recorder], max_episodes=2, action_space=space)

    def leaves(value):
        if isinstance(value, dict):
            for item in value.values():
                yield from leaves(item)
        elif isinstance(value, list):
            for item in value:
                yield from leaves(item)
        else:
            yield value

    with open(rec_path, "rb") as stream:
        records = list(msgpack.Unpacker(stream, raw=False))
    steps = [r for r in records if r["kind"] == "steps"]
    assert steps
    for record in steps:
        for name in ("observations", "actions", "rewards", "terminated", "truncated", "steps"):
            for leaf in leaves(record[name]):
                assert isinstance(leaf, msgpack.ExtType) and leaf.code == NDARRAY_EXT, (name, leaf)


def test_header_holds_env_contract_seed_and_options(rec_path):
    space = SPACES["multi_discrete"]
    env, _ = make_env(space, num_envs=2, autoreset="same_step")
    recorder = EpisodeRecorder(rec_path, env.contract, env_id="Custom-v0", base_seed=5)
    recorder.close()
    header = load_recording(rec_path).header
    assert header.env_id == "Custom-v0"
    assert header.num_envs == 2
    assert header.base_seed == 5
    assert header.autoreset_mode == "same_step"
    assert header.contract.autoreset_mode == env_pb2.AUTORESET_MODE_SAME_STEP
    assert header.action_space == env.contract.action_space
    assert header.options == {
        "lanes": None,
        "step_stride": 1,
        "observations": True,
        "frame_lanes": [],
        "frame_stride": 1,
    }
    assert header.version == 2
    assert header.lanes == (0, 1)


@pytest.mark.notebook
def test_counted_is_stored_per_episode_and_version_1_files_still_read(rec_path, tmp_path):
    space = SPACES["box"]
    env, _ = make_env(space, num_envs=2, autoreset="disabled")
    with EpisodeRecorder(
        rec_path, env.contract, counted=lambda episode_id: episode_id.endswith("0")
    ) as recorder:
        run_session(env, [recorder], max_episodes=4, action_space=space)
    recording = load_recording(rec_path)
    assert [e.counted for e in recording.episodes] == [e.episode_id.endswith("0") for e in recording.episodes]
    assert all(type(e.counted) is bool for e in recording.episodes)
    # A version-1 file (written before `counted` existed) reads with counted=None.
    with open(rec_path, "rb") as stream:
        records = list(msgpack.Unpacker(stream, raw=False, strict_map_key=False))
    records[0]["version"] = 1
    for record in records:
        record.pop("counted", None)
    old = tmp_path / "v1.rec"
    old.write_bytes(b"".join(msgpack.packb(record, use_bin_type=True) for record in records))
    old_recording = load_recording(old)
    assert old_recording.header.version == 1
    assert [e.episode_id for e in old_recording.episodes] == [e.episode_id for e in recording.episodes]
    assert all(e.counted is None for e in old_recording.episodes)
    assert old_recording.to_pandas()["counted"].isna().all()
    # Without a `counted` callable the recorder stores nil.
    env, _ = make_env(space, num_envs=2, autoreset="disabled")
    with EpisodeRecorder(rec_path, env.contract) as recorder:
        run_session(env, [recorder], max_episodes=2, action_space=space)
    assert all(e.counted is None for e in load_recording(rec_path).episodes)
