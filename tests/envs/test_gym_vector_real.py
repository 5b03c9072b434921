"""Real gymnasium envs through the adapter, checked step by step against the bare env."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from _message_form import messages
from gym_scripted import action_request, run
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.proto import env_pb2
from rlmesh_gym.spaces.codec import decode, decode_batch, encode_batch
from rlmesh_gym.spaces.meta import from_meta_map


def test_cartpole_vector_next_step_matches_the_bare_env():
    async def body():
        n, seeds = 3, [1, 2, 3]
        bare = gym.make_vec("CartPole-v1", n, vectorization_mode="sync")
        env = GymVectorEnv.make("CartPole-v1", num_envs=n)
        contract = env.contract
        assert (contract.id, contract.num_envs, contract.render_mode) == ("CartPole-v1", n, "")
        assert from_meta_map(contract.metadata) == {
            "render_fps": 50,
            "render_modes": ["human", "rgb_array"],
            "autoreset_mode": "NextStep",
        }
        bare_obs, _ = bare.reset(seed=seeds)
        reset = (await messages(env).reset(env_pb2.ResetRequest(seeds=seeds))).response
        assert reset.observation.bytes.data == bare_obs.tobytes()

        rng = np.random.default_rng(0)
        lengths, pending, first = [0] * n, [False] * n, [True] * n
        completions = 0
        for _ in range(120):
            actions = rng.integers(0, 2, n)
            bare_obs, rewards, terminated, truncated, _ = bare.step(actions)
            response = (await messages(env).step(action_request(actions))).response
            assert response.observation.bytes.data == bare_obs.tobytes()
            assert list(response.rewards) == rewards.tolist()
            assert bytes(response.terminated_mask) == terminated.tobytes()
            assert bytes(response.truncated_mask) == truncated.tobytes()
            expected = []
            for lane in range(n):
                if pending[lane]:  # gymnasium's reset step: not counted
                    lengths[lane], pending[lane] = 0, False
                    continue
                lengths[lane] += 1
                if terminated[lane] or truncated[lane]:
                    expected.append((lane, seeds[lane] if first[lane] else None, lengths[lane]))
                    pending[lane], first[lane] = True, False
            got = [
                (m.env_index, m.seed if m.HasField("seed") else None, m.step_count)
                for m in response.completed_episodes
            ]
            assert got == expected
            assert all(m.cumulative_reward == m.step_count for m in response.completed_episodes)
            completions += len(got)
        assert completions >= 3
        bare.close()
        await env.close(1.0)

    run(body())


def test_cartpole_vector_disabled_partial_resets_match_the_bare_env():
    async def body():
        n = 3
        bare = gym.make_vec(
            "CartPole-v1", n, vectorization_mode="sync", vector_kwargs={"autoreset_mode": "Disabled"}
        )
        env = GymVectorEnv.make("CartPole-v1", num_envs=n, autoreset="disabled")
        bare.reset(seed=[10, 11, 12])
        await messages(env).reset(env_pb2.ResetRequest(seeds=[10, 11, 12]))
        rng = np.random.default_rng(1)
        next_seed, seen = 100, []
        for _ in range(150):
            actions = rng.integers(0, 2, n)
            bare_obs, _, terminated, truncated, _ = bare.step(actions)
            response = (await messages(env).step(action_request(actions))).response
            assert response.observation.bytes.data == bare_obs.tobytes()
            done = np.flatnonzero(terminated | truncated).tolist()
            assert [m.env_index for m in response.completed_episodes] == done
            seen += [m.seed for m in response.completed_episodes]
            if done:
                seeds = list(range(next_seed, next_seed + len(done)))
                next_seed += len(done)
                mask = np.zeros(n, dtype=np.bool_)
                mask[done] = True
                full = [None] * n
                for lane, seed in zip(done, seeds, strict=True):
                    full[lane] = seed
                bare_obs, _ = bare.reset(seed=full, options={"reset_mask": mask})
                reset = (
                    await messages(env).reset(env_pb2.ResetRequest(env_indices=done, seeds=seeds))
                ).response
                assert reset.observation.bytes.data == bare_obs.tobytes()
        assert len(seen) >= 3 and all(isinstance(seed, int) for seed in seen)  # every episode has its seed
        bare.close()
        await env.close(1.0)

    run(body())


def test_cartpole_single_env_matches_the_bare_env():
    async def body():
        bare = gym.make("CartPole-v1")
        env = GymVectorEnv(gym.make("CartPole-v1"))
        contract = env.contract
        assert (contract.id, contract.num_envs, contract.autoreset_mode) == (
            "CartPole-v1",
            1,
            env_pb2.AUTORESET_MODE_DISABLED,
        )
        assert from_meta_map(contract.metadata) == {"render_fps": 50, "render_modes": ["human", "rgb_array"]}
        rng = np.random.default_rng(2)
        episodes = []
        seed = 40
        bare_obs, _ = bare.reset(seed=seed)
        reset = (await messages(env).reset(env_pb2.ResetRequest(seeds=[seed]))).response
        assert reset.observation.bytes.data == bare_obs.tobytes()
        length = 0
        while len(episodes) < 3:
            action = int(rng.integers(0, 2))
            bare_obs, reward, terminated, truncated, _ = bare.step(action)
            response = (await messages(env).step(action_request([action]))).response
            length += 1
            assert response.observation.bytes.data == bare_obs.tobytes()
            assert list(response.rewards) == [reward]
            if terminated or truncated:
                (metadata,) = response.completed_episodes
                assert (metadata.seed, metadata.step_count, metadata.cumulative_reward) == (
                    seed,
                    length,
                    length,
                )
                episodes.append(metadata)
                seed, length = seed + 1, 0
                bare.reset(seed=seed)
                await messages(env).reset(env_pb2.ResetRequest(seeds=[seed]))
            else:
                assert not response.completed_episodes
        bare.close()
        await env.close(1.0)

    run(body())


def test_cartpole_rgb_frames_per_lane():
    async def body():
        env = GymVectorEnv.make("CartPole-v1", num_envs=2, render_mode="rgb_array")
        assert env.contract.render_mode == "rgb_array"
        await messages(env).reset(env_pb2.ResetRequest(seeds=[0, 1]))
        frames = env.render_frames()
        assert [frame.shape for frame in frames] == [(400, 600, 3), (400, 600, 3)]
        assert all(frame.dtype == np.uint8 for frame in frames)
        await env.close(1.0)

    run(body())


class DictObsEnv(gym.Env):
    """A Dict observation (Box, Discrete, MultiBinary) and a Box action; episodes last 4 steps."""

    metadata = {"render_modes": []}
    observation_space = gym.spaces.Dict(
        {
            "pos": gym.spaces.Box(-1, 1, (2,), np.float32),
            "count": gym.spaces.Discrete(5),
            "flags": gym.spaces.MultiBinary(3),
        }
    )
    action_space = gym.spaces.Box(-1, 1, (2,), np.float32)

    def _obs(self):
        flags = np.array([self.count % 2, 1, 0], dtype=np.int8)
        return {"pos": self.pos.copy(), "count": self.count, "flags": flags}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self.count = 0
        return self._obs(), {}

    def step(self, action):
        self.pos = np.clip(self.pos + 0.25 * action, -1, 1).astype(np.float32)
        self.count += 1
        return (
            self._obs(),
            float(np.sum(action)),
            self.count >= 4,
            False,
            {"action": np.asarray(action).copy()},
        )


def assert_same_dict_batch(decoded, expected):
    assert set(decoded) == set(expected)
    for key, column in expected.items():
        np.testing.assert_array_equal(np.asarray(decoded[key]), np.asarray(column))


def test_dict_observation_vector_env():
    async def body():
        bare = SyncVectorEnv([DictObsEnv, DictObsEnv])
        env = GymVectorEnv(SyncVectorEnv([DictObsEnv, DictObsEnv]))
        contract = env.contract
        assert list(contract.observation_space.dict.keys) == ["count", "flags", "pos"]
        bare_obs, _ = bare.reset(seed=[5, 6])
        reset = (await messages(env).reset(env_pb2.ResetRequest(seeds=[5, 6]))).response
        assert_same_dict_batch(
            decode_batch(reset.observation.bytes.data, contract.observation_space, 2), bare_obs
        )

        actions = np.array([[0.5, -0.25], [1.0, 1.0]], dtype=np.float32)
        request = env_pb2.StepRequest()
        request.action.bytes.data = encode_batch(actions, contract.action_space, 2)
        for _ in range(4):
            bare_obs, rewards, *_ = bare.step(actions)
            response = (await messages(env).step(request)).response
            observation = decode_batch(response.observation.bytes.data, contract.observation_space, 2)
            assert_same_dict_batch(observation, bare_obs)
            assert list(response.rewards) == pytest.approx([0.25, 2.0]) == rewards.tolist()
            infos = from_meta_map(response.infos)
            assert infos["action"] == actions.tolist()
        assert [m.env_index for m in response.completed_episodes] == [0, 1]
        for metadata in response.completed_episodes:
            lane = metadata.env_index
            assert metadata.step_count == 4 and metadata.seed == 5 + lane
            assert metadata.cumulative_reward == pytest.approx(4 * float(actions[lane].sum()))
            assert from_meta_map(metadata.final_info) == {"action": actions[lane].tolist()}
        bare.close()
        await env.close(1.0)

    run(body())


def test_dict_observation_single_env():
    async def body():
        bare = DictObsEnv()
        env = GymVectorEnv(DictObsEnv())
        contract = env.contract
        bare_obs, _ = bare.reset(seed=3)
        reset = (await messages(env).reset(env_pb2.ResetRequest(seeds=[3]))).response
        observation = decode(reset.observation.bytes.data, contract.observation_space)
        assert observation["count"] == 0 and observation["pos"].tolist() == bare_obs["pos"].tolist()
        assert observation["flags"].tolist() == [0, 1, 0]
        request = env_pb2.StepRequest()
        request.action.bytes.data = np.array([0.5, 0.5], dtype=np.float32).tobytes()
        response = (await messages(env).step(request)).response
        observation = decode(response.observation.bytes.data, contract.observation_space)
        assert observation["count"] == 1 and observation["flags"].tolist() == [1, 1, 0]
        assert list(response.rewards) == [1.0]
        await env.close(1.0)

    run(body())


def test_make_async_vectorization():
    async def body():
        env = GymVectorEnv.make(
            "CartPole-v1", num_envs=2, autoreset=AutoresetMode.SAME_STEP, vectorization="ASYNC"
        )
        assert type(env.env).__name__ == "AsyncVectorEnv"
        assert env.contract.autoreset_mode == env_pb2.AUTORESET_MODE_SAME_STEP
        await messages(env).reset(env_pb2.ResetRequest(seeds=[0, 1]))
        total = 0
        for _ in range(40):
            response = (
                await messages(env).step(action_request([0, 0]))
            ).response  # always left: short episodes
            total += len(response.completed_episodes)
            for metadata in response.completed_episodes:
                assert "final_obs" in from_meta_map(metadata.final_info)
            assert all(response.episode_ids)
        assert total >= 2
        await env.close(5.0)

    run(body())


def test_make_skips_gymnasiums_defensive_copy_unless_asked():
    env = GymVectorEnv.make("CartPole-v1", num_envs=2)
    assert env.env.copy is False
    copying = GymVectorEnv.make("CartPole-v1", num_envs=2, vector_kwargs={"copy": True})
    assert copying.env.copy is True
    env.env.close()
    copying.env.close()
