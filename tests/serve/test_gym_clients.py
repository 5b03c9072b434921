"""An env server as a gymnasium env (connect_gym_vector_env / connect_gym_env): gymnasium's API, and a
round trip gymnasium env -> GymVectorEnv -> served -> the adapter that is the env itself again.

Servers bind 127.0.0.1 on free ports; every wait is bounded; every env and session is closed.
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
import rlmesh
from _gym_roundtrip import DictEnv, InfoEnv, assert_same, info_vector, single_trajectory, trajectory
from _gym_serving import serving
from _serve_fakes import CountingEnv
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode

from rlmesh_gym.envs import GymVectorEnv, RlmeshEnv, RlmeshVectorEnv
from rlmesh_gym.runtime import EnvRpcError
from rlmesh_gym.serve import RemoteEnv, SessionBusyError, connect_gym_env, connect_gym_vector_env
from rlmesh_gym.spaces import UnrestrictedText

NO_SPEC = "Not able to test alternative render modes due to the environment not having a spec"


def checker_warnings(env: gym.Env, **kwargs) -> set[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, **kwargs)
    return {str(warning.message) for warning in caught}


ENVS = {
    "cartpole": lambda: gym.make("CartPole-v1"),
    "dict": DictEnv,
    "mission": lambda: gym.make("minigrid:MiniGrid-Empty-5x5-v0"),
}


@pytest.mark.parametrize("name", sorted(ENVS))
def test_check_env_passes_on_a_served_env(name, no_leaked_threads):
    make = ENVS[name]
    expected = checker_warnings(make().unwrapped, skip_render_check=True)
    with serving(GymVectorEnv(make())) as served:
        env = connect_gym_env(served.address)
        try:
            got = checker_warnings(env)
            if name == "mission":
                assert isinstance(env.observation_space["mission"], UnrestrictedText)
                assert " " in env.reset(seed=0)[0]["mission"]  # "get to the green goal square"
        finally:
            env.close()
        assert served.wait_idle()
    assert {message for message in got - expected if NO_SPEC not in message} == set()


@pytest.mark.parametrize("mode", list(AutoresetMode), ids=lambda mode: mode.name)
def test_the_round_trip_through_a_server_is_the_identity(mode, no_leaked_threads):
    expected = trajectory(info_vector(mode), mode, seed=5, steps=40)
    with serving(GymVectorEnv(info_vector(mode))) as served:
        env = connect_gym_vector_env(served.address)
        try:
            assert isinstance(env, gym.vector.VectorEnv) and env.metadata["autoreset_mode"] is mode
            got = trajectory(env, mode, seed=5, steps=40)
        finally:
            env.close()
    assert_same(got, expected)


@pytest.mark.parametrize("mode", list(AutoresetMode), ids=lambda mode: mode.name)
def test_the_one_lane_adapter_over_a_served_vector_env_steps_like_a_plain_env(mode, no_leaked_threads):
    expected = single_trajectory(InfoEnv())
    with serving(GymVectorEnv(info_vector(mode, num_envs=1))) as served:
        env = connect_gym_env(served.address)
        try:
            got = single_trajectory(env)
        finally:
            env.close()
    assert_same(got, expected)


def test_the_vector_adapter_over_a_served_single_env_batches_its_infos_as_one_lane(no_leaked_threads):
    reference = gym.vector.SyncVectorEnv([InfoEnv], autoreset_mode=AutoresetMode.DISABLED)
    expected = trajectory(reference, AutoresetMode.DISABLED, seed=2, steps=20)
    with serving(GymVectorEnv(InfoEnv())) as served:
        env = connect_gym_vector_env(served.address)
        try:
            got = trajectory(env, AutoresetMode.DISABLED, seed=2, steps=20)
        finally:
            env.close()
    assert_same(got, expected)


def test_a_served_single_env_is_the_env_itself_and_renders_its_frames(no_leaked_threads):
    def play(env):
        records = []
        for seed in (3, 4):
            records.append(env.reset(seed=seed))
            done = False
            while not done:
                result = env.step(int(records[-1][0][2] > 0))
                records.append(result)
                done = result[2] or result[3]
        return records, env.render()

    original = gym.make("CartPole-v1", render_mode="rgb_array")
    expected, expected_frame = play(original)
    original.close()
    with serving(GymVectorEnv(gym.make("CartPole-v1", render_mode="rgb_array"))) as served:
        env = connect_gym_env(served.address)
        try:
            assert env.render_mode == "rgb_array"
            got, frame = play(env)
        finally:
            env.close()
    assert_same(got, expected)
    assert frame.shape == (400, 600, 3)
    np.testing.assert_array_equal(frame, expected_frame)


def test_vector_frames_come_per_lane(no_leaked_threads):
    reference = gym.vector.SyncVectorEnv([lambda: InfoEnv("rgb_array")] * 2)
    reference.reset(seed=1)
    reference.step(np.array([0, 2]))
    with serving(GymVectorEnv(gym.vector.SyncVectorEnv([lambda: InfoEnv("rgb_array")] * 2))) as served:
        env = connect_gym_vector_env(served.address)
        try:
            env.reset(seed=1)
            env.step(np.array([0, 2]))
            frames = env.render()
        finally:
            env.close()
    assert_same(frames, reference.render())
    reference.close()


def test_close_ends_the_session_so_the_next_client_gets_it(no_leaked_threads):
    with serving(GymVectorEnv.make("CartPole-v1", num_envs=2)) as served:
        first = connect_gym_vector_env(served.address)
        with pytest.raises(SessionBusyError):
            connect_gym_vector_env(served.address, connect_timeout=5)
        first.reset(seed=0)
        first.close()
        assert served.wait_idle()
        second = connect_gym_vector_env(served.address)
        try:
            assert second.reset(seed=0)[0].shape == (2, 4)
        finally:
            second.close()
        with pytest.raises(ValueError, match="the env has 2 lanes; RlmeshEnv is one lane"):
            connect_gym_env(served.address)
        assert served.wait_idle()  # the refused adapter closed its session
        assert served.server.sessions_served == 3


def test_b3s_env_server_as_the_server(no_leaked_threads):
    def play(env):
        records = [env.reset(seed=21)]
        rng = np.random.default_rng(1)
        for _ in range(60):
            result = env.step(int(rng.integers(0, 2)))
            records.append(result)
            if result[2] or result[3]:
                records.append(env.reset())
        return records

    original = gym.make("CartPole-v1", render_mode="rgb_array")
    expected = play(original)
    expected_frame = original.render()
    upstream = rlmesh.EnvServer(gym.make("CartPole-v1", render_mode="rgb_array"), "127.0.0.1:0")
    upstream.start()
    try:
        env = connect_gym_env(upstream.address.removeprefix("tcp://"))
        try:
            assert isinstance(env, RlmeshEnv) and env.contract.id == "CartPole-v1"
            got = play(env)
            frame = env.render()  # b3's PNG, decoded here
            warnings_seen = checker_warnings(env, skip_render_check=True)
        finally:
            env.close()
    finally:
        upstream.shutdown()
        assert upstream.wait(10.0)
    assert_same(got, expected)
    np.testing.assert_array_equal(frame, expected_frame)
    assert warnings_seen <= checker_warnings(gym.make("CartPole-v1").unwrapped, skip_render_check=True)


def test_an_adapter_over_a_remote_env_connected_on_its_own_loop(no_leaked_threads):
    with serving(GymVectorEnv.make("CartPole-v1", num_envs=3, autoreset="disabled")) as served:
        env = RlmeshVectorEnv(lambda: RemoteEnv.connect(served.address))
        try:
            observations, _ = env.reset(seed=[1, 2, 3])
            assert observations.shape == (3, 4) and observations.flags.writeable
        finally:
            env.close()
        assert served.wait_idle()


def test_a_users_message_form_env_in_process():
    env = RlmeshVectorEnv(CountingEnv(num_envs=2, length=2))
    try:
        observations, infos = env.reset(seed=[4, 5])
        np.testing.assert_array_equal(observations, np.array([[0, 0], [1, 0]], np.float32))
        assert infos == {"seeds": [4, 5]}  # not per lane (no mask): as the env sent it
        observations, rewards, terminated, truncated, _ = env.step(np.array([0, 1]))
        np.testing.assert_array_equal(observations, np.array([[0, 1], [1, 1]], np.float32))
        assert rewards.tolist() == [1.0, 1.0] and not terminated.any() and not truncated.any()
        assert env.step(np.array([1, 1]))[2].tolist() == [True, True]
        with pytest.raises(EnvRpcError, match=r"outside Discrete\(2\)"):
            env.reset(seed=0)
            env.step(np.array([2, 0]))
    finally:
        env.close()
