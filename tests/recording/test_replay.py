"""replay_episode: recorded episodes re-run from their seeds in a plain single gymnasium env."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from _recording_envs import SPACES, HistoryEnv, make_env, run_session

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.proto import model_pb2
from rlmesh_gym.recording import EpisodeRecorder, RecordingOptions, load_recording, replay_episode
from rlmesh_gym.runtime import RuntimeModelPrediction
from rlmesh_gym.spaces.codec import SpaceCodec


def _lean(obs: np.ndarray) -> int:
    """A deterministic CartPole rule: push the way the pole leans."""
    return int(obs[2] + 0.3 * obs[3] > 0)


class _LeanModel:
    """The `_lean` rule as a RuntimeModel."""

    def __init__(self, contract) -> None:
        self.obs = SpaceCodec(contract.observation_space)
        self.act = SpaceCodec(contract.action_space)

    async def predict(self, request: model_pb2.PredictRequest) -> RuntimeModelPrediction:
        n = len(request.context.slots)
        obs = self.obs.decode_batch(request.observation.bytes.data, n)
        actions = np.array([_lean(row) for row in obs], dtype=np.int64)
        response = model_pb2.PredictResponse(context=request.context)
        response.action.bytes.data = self.act.encode_batch(actions, n)
        return RuntimeModelPrediction(response)

    async def close_route(self, request, timeout) -> None:
        return None


def _cartpole(path, *, autoreset="disabled", model="random", max_episodes=4, options=None):
    env = GymVectorEnv.make("CartPole-v1", num_envs=2, autoreset=autoreset)
    model_obj = _LeanModel(env.contract) if model == "lean" else None
    record = options or path
    with EpisodeRecorder(record, env.contract, base_seed=3) as recorder:
        run_session(
            env,
            [recorder],
            max_episodes=max_episodes,
            base_seed=3,
            model=model_obj,
            action_space=gym.spaces.Discrete(2),
        )
    return load_recording(path)


def test_every_disabled_episode_replays_exactly(rec_path):
    recording = _cartpole(rec_path)
    assert len(recording.episodes) >= 4
    for index, episode in enumerate(recording.episodes):
        result = replay_episode(recording, index)
        assert result.match, str(result)
        assert result.divergence is None
        assert result.seed == episode.seed
        assert result.replayed_length == result.recorded_length == episode.length
        assert result.replayed_return == episode.episode_return
        assert result.steps_compared == episode.length
    # The path, an episode id and the episode object all name the same episode.
    first = recording.episodes[0]
    assert replay_episode(rec_path, first.episode_id).match
    assert replay_episode(recording, first).match


def test_a_tampered_action_diverges_at_the_next_observation(rec_path):
    recording = _cartpole(rec_path)
    episode = max(recording.episodes, key=lambda e: e.length)
    episode.actions[2] = 1 - episode.actions[2]
    result = replay_episode(recording, episode)
    assert not result.match
    assert (result.divergence.step, result.divergence.field) == (3, "observation")
    assert "diverges at step 3: observation" in str(result)


def test_a_tampered_reward_and_flag_are_found(rec_path):
    recording = _cartpole(rec_path)
    episode = recording.episodes[0]
    episode.rewards[1] = 0.5
    divergence = replay_episode(recording, episode).divergence
    assert (divergence.step, divergence.field, divergence.recorded, divergence.replayed) == (
        1,
        "reward",
        0.5,
        1.0,
    )
    episode.rewards[1] = 1.0
    episode.terminated[-1] = False
    result = replay_episode(recording, episode)
    assert (result.divergence.step, result.divergence.field) == (episode.length - 1, "terminated")
    # The mismatching step was taken: the replay is as long as the recording.
    assert result.replayed_length == result.recorded_length == episode.length
    assert f"length {episode.length} vs {episode.length}" in str(result)


def test_a_reward_mismatch_counts_the_step_it_was_found_on(rec_path):
    recording = _cartpole(rec_path)
    episode = recording.episodes[0]
    episode.rewards[2] = 7.0
    result = replay_episode(recording, episode)
    assert (result.divergence.step, result.divergence.field) == (2, "reward")
    assert result.replayed_length == 3 and result.steps_compared == 3


class _NanEnv(gym.Env):
    """Observations ``[t, nan]``; every episode terminates after 4 steps."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0, np.nan], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t, np.nan], np.float32), 1.0, self.t == 4, False, {}


def test_nan_observations_replay_as_a_match(rec_path):
    env = GymVectorEnv(gym.vector.SyncVectorEnv([_NanEnv], autoreset_mode=gym.vector.AutoresetMode.DISABLED))
    with EpisodeRecorder(rec_path, env.contract, base_seed=2) as recorder:
        run_session(env, [recorder], max_episodes=1, base_seed=2, action_space=_NanEnv.action_space)
    recording = load_recording(rec_path)
    episode = recording.episodes[0]
    assert np.isnan(episode.observations[:, 1]).all()
    for atol in (0.0, 1e-6):
        result = replay_episode(recording, episode, env=_NanEnv(), atol=atol)
        assert result.match, str(result)
        assert result.steps_compared == 4
    # A NaN where the env gives a number is still a difference.
    episode.observations[2, 1] = 5.0
    result = replay_episode(recording, episode, env=_NanEnv())
    assert (result.divergence.step, result.divergence.field) == (2, "observation")


def test_a_different_env_diverges(rec_path):
    recording = _cartpole(rec_path)
    heavy = gym.make("CartPole-v1")
    heavy.unwrapped.gravity = 30.0
    result = replay_episode(recording, 0, env=heavy)
    assert not result.match and result.divergence.field == "observation" and result.divergence.step == 1
    heavy.close()


def test_a_policy_regenerates_actions_of_a_strided_recording(rec_path):
    options = RecordingOptions(rec_path, step_stride=3)
    recording = _cartpole(rec_path, model="lean", options=options)
    episode = recording.episodes[0]
    with pytest.raises(ValueError, match="step_stride=3.*pass policy= to regenerate them"):
        replay_episode(recording, episode)
    result = replay_episode(recording, episode, policy=_lean)
    assert result.match, str(result)
    assert result.steps_compared == len(episode.steps) < episode.length
    wrong = replay_episode(recording, episode, policy=lambda obs: 1 - _lean(obs))
    assert not wrong.match and (wrong.divergence.step, wrong.divergence.field) == (0, "action")


def test_an_episode_without_a_seed_is_refused(rec_path):
    recording = _cartpole(rec_path, autoreset="next_step", max_episodes=6)
    unseeded = [e for e in recording.episodes if e.seed is None]
    assert unseeded
    with pytest.raises(ValueError, match="has no recorded seed.*autoreset='disabled'"):
        replay_episode(recording, unseeded[0])
    incomplete = recording.incomplete_episodes[0]
    with pytest.raises(ValueError, match="is incomplete"):
        replay_episode(recording, incomplete.episode_id)


def test_composite_spaces_replay_in_a_given_env(rec_path):
    space = SPACES["nested"]
    env, _ = make_env(space, num_envs=2, autoreset="disabled")
    with EpisodeRecorder(rec_path, env.contract, base_seed=9) as recorder:
        run_session(env, [recorder], max_episodes=3, base_seed=9, action_space=space)
    recording = load_recording(rec_path)
    for episode in recording.episodes:
        result = replay_episode(recording, episode, env=HistoryEnv(space, space, lane=episode.lane))
        assert result.match, str(result)


def test_bad_episode_keys_and_envs(rec_path):
    recording = _cartpole(rec_path)
    with pytest.raises(IndexError, match="out of range: the recording has"):
        replay_episode(recording, 99)
    with pytest.raises(KeyError, match="no episode with id 'nope'"):
        replay_episode(recording, "nope")
    with pytest.raises(TypeError, match="env must be a gymnasium.Env, an env id or None"):
        replay_episode(recording, 0, env=3)
    with pytest.raises(ValueError, match="unknown env id 'NoSuchEnv-v0'"):  # envs.resolve's error
        replay_episode(recording, 0, env="NoSuchEnv-v0")
    with pytest.raises(ValueError, match="atol must be a float >= 0"):
        replay_episode(recording, 0, atol=-1)


def test_env_kwargs_msgpack_cannot_encode_are_noted_and_replay_needs_env(rec_path):
    env = GymVectorEnv.make("CartPole-v1", num_envs=1, autoreset="disabled")
    kwargs = {"max_episode_steps": 500, "callback": lambda: None}
    with pytest.warns(
        RuntimeWarning, match=r"env_kwargs \['callback', 'max_episode_steps'\] were not stored"
    ):
        recorder = EpisodeRecorder(rec_path, env.contract, base_seed=3, env_kwargs=kwargs)
    with recorder:
        run_session(env, [recorder], max_episodes=1, base_seed=3, action_space=gym.spaces.Discrete(2))
    recording = load_recording(rec_path)
    assert recording.header.env_kwargs is None
    assert "msgpack cannot encode them" in recording.header.env_kwargs_note
    with pytest.raises(ValueError, match="the recording's env cannot be remade: env_kwargs .* needs env="):
        replay_episode(recording, 0)
    assert replay_episode(recording, 0, env="CartPole-v1").match


def test_env_kwargs_are_optional_in_the_header_and_checked(rec_path):
    recording = _cartpole(rec_path)  # written without env_kwargs: no header key, as older files
    assert recording.header.env_kwargs is None and recording.header.env_kwargs_note is None
    env = GymVectorEnv.make("CartPole-v1", num_envs=1)
    with pytest.raises(TypeError, match="env_kwargs must be a mapping of str keys or None"):
        EpisodeRecorder(rec_path, env.contract, env_kwargs={1: 2})
