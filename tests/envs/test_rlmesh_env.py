"""RlmeshVectorEnv / RlmeshEnv over in-process envs: gymnasium's API, and the identity of the round trip.

A gymnasium env -> GymVectorEnv -> the adapter must be the env itself again: same observations,
rewards, flags and infos for the same seeds and actions, in every autoreset mode.
"""

from __future__ import annotations

import asyncio
import threading
import warnings

import gymnasium as gym
import numpy as np
import pytest
from _gym_roundtrip import DictEnv, InfoEnv, assert_same, info_vector, single_trajectory, trajectory
from gymnasium.utils.env_checker import check_env
from gymnasium.utils.passive_env_checker import env_render_passive_checker
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from rlmesh_gym.envs import GymVectorEnv, RlmeshEnv, RlmeshVectorEnv
from rlmesh_gym.runtime import EnvRpcError
from rlmesh_gym.spaces import UnrestrictedText

# check_env's one remark on any env not made by gymnasium.make: it cannot make the env again in
# another render mode. The adapters render in the served env's mode only and have no EnvSpec.
NO_SPEC = "Not able to test alternative render modes due to the environment not having a spec"


def checker_warnings(env: gym.Env, **kwargs) -> set[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env, **kwargs)
    return {str(warning.message) for warning in caught}


def assert_checks_like(adapter: gym.Env, original: gym.Env) -> None:
    """check_env passes on the adapter with no warning beyond the original env's own (and NO_SPEC)."""
    expected = checker_warnings(original, skip_render_check=True)
    got = checker_warnings(adapter)
    extra = {message for message in got - expected if NO_SPEC not in message}
    assert not extra, extra
    assert checker_warnings(adapter, skip_render_check=True) <= expected


ENVS = {
    "cartpole": lambda: gym.make("CartPole-v1"),
    "dict": DictEnv,
    "mission": lambda: gym.make("minigrid:MiniGrid-Empty-5x5-v0"),  # Text observations (MissionSpace)
}


@pytest.mark.parametrize("name", sorted(ENVS))
def test_check_env_passes_on_the_one_lane_adapter(name):
    make = ENVS[name]
    adapter = RlmeshEnv(GymVectorEnv(make()))
    try:
        assert_checks_like(adapter, make().unwrapped)
    finally:
        adapter.close()
    if name == "mission":
        assert isinstance(adapter.observation_space["mission"], UnrestrictedText)


def test_render_passes_gymnasiums_render_check_and_gives_the_envs_frames():
    original = gym.make("CartPole-v1", render_mode="rgb_array")
    adapter = RlmeshEnv(GymVectorEnv(gym.make("CartPole-v1", render_mode="rgb_array")))
    try:
        assert adapter.render_mode == "rgb_array"
        assert adapter.metadata["render_modes"] == ["human", "rgb_array"]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            adapter.reset(seed=3)
            env_render_passive_checker(adapter)
        original.reset(seed=3)
        np.testing.assert_array_equal(adapter.render(), original.render())
    finally:
        adapter.close()
        original.close()
    vector = RlmeshVectorEnv(GymVectorEnv(SyncVectorEnv([lambda: InfoEnv("rgb_array")] * 2)))
    reference = SyncVectorEnv([lambda: InfoEnv("rgb_array")] * 2)
    try:
        vector.reset(seed=1)
        reference.reset(seed=1)
        vector.step(np.array([0, 1]))
        reference.step(np.array([0, 1]))
        assert_same(vector.render(), reference.render())
    finally:
        vector.close()
        reference.close()


@pytest.mark.parametrize("mode", list(AutoresetMode), ids=lambda mode: mode.name)
def test_the_round_trip_through_gym_vector_env_is_the_identity(mode):
    expected = trajectory(info_vector(mode), mode, seed=5, steps=40)
    adapter = RlmeshVectorEnv(GymVectorEnv(info_vector(mode)))
    try:
        assert adapter.metadata["autoreset_mode"] is mode
        got = trajectory(adapter, mode, seed=5, steps=40)
    finally:
        adapter.close()
    assert_same(got, expected)
    finished = sum(
        int(np.logical_or(record[3], record[4]).sum()) for record in expected if record[0] == "step"
    )
    assert finished >= 10  # the run crossed many episode ends (and, under DISABLED, masked resets)


def test_a_single_env_through_the_adapter_is_the_env_itself():
    def play(env, seeds):
        records = []
        for seed in seeds:
            records.append(env.reset(seed=seed))
            done = False
            while not done:
                result = env.step(int(records[-1][0][2] > 0))  # push toward the lean
                records.append(result)
                done = result[2] or result[3]
        return records

    adapter = RlmeshEnv(GymVectorEnv(gym.make("CartPole-v1")))
    try:
        got = play(adapter, [7, 8, 9])
    finally:
        adapter.close()
    assert_same(got, play(gym.make("CartPole-v1"), [7, 8, 9]))


@pytest.mark.parametrize("mode", list(AutoresetMode), ids=lambda mode: mode.name)
def test_the_one_lane_adapter_over_a_vector_env_steps_like_a_plain_env(mode):
    # Under SAME_STEP the env has already rolled on; the done step still reports the episode's end.
    adapter = RlmeshEnv(GymVectorEnv(info_vector(mode, num_envs=1)))
    try:
        got = single_trajectory(adapter)
    finally:
        adapter.close()
    expected = single_trajectory(InfoEnv())
    assert_same(got, expected)
    assert sum(1 for record in expected if len(record) == 2) >= 8  # many episodes


def test_the_vector_adapter_over_a_single_env_batches_its_infos_as_one_lane():
    reference = SyncVectorEnv([InfoEnv], autoreset_mode=AutoresetMode.DISABLED)
    expected = trajectory(reference, AutoresetMode.DISABLED, seed=2, steps=20)
    adapter = RlmeshVectorEnv(GymVectorEnv(InfoEnv()))
    try:
        got = trajectory(adapter, AutoresetMode.DISABLED, seed=2, steps=20)
    finally:
        adapter.close()
    assert_same(got, expected)


def test_gymnasium_vector_wrappers_and_a_cleanrl_style_loop_see_the_env_itself():
    def rollout(env):
        env = gym.wrappers.vector.RecordEpisodeStatistics(env)
        env = gym.wrappers.vector.NormalizeObservation(env)
        observations, _ = env.reset(seed=0)
        rng = np.random.default_rng(0)
        returns, seen = [], []
        for _ in range(300):
            observations, _, _, _, infos = env.step(rng.integers(0, 2, size=env.num_envs))
            seen.append(observations)
            if "episode" in infos:
                returns.extend(infos["episode"]["r"][infos["_episode"]].tolist())
        env.close()
        return returns, np.stack(seen)

    got_returns, got = rollout(RlmeshVectorEnv(GymVectorEnv.make("CartPole-v1", num_envs=4)))
    expected_returns, expected = rollout(gym.make_vec("CartPole-v1", 4, vectorization_mode="sync"))
    assert got_returns == expected_returns and len(got_returns) >= 20
    np.testing.assert_array_equal(got, expected)


def test_seeds_follow_gymnasiums_rules_and_mixed_seeds_are_refused():
    adapter = RlmeshVectorEnv(GymVectorEnv.make("CartPole-v1", num_envs=3, autoreset="disabled"))
    reference = gym.make_vec("CartPole-v1", 3, vectorization_mode="sync")
    try:
        np.testing.assert_array_equal(adapter.reset(seed=4)[0], reference.reset(seed=4)[0])
        np.testing.assert_array_equal(adapter.reset(seed=[9, 1, 5])[0], reference.reset(seed=[9, 1, 5])[0])
        with pytest.raises(ValueError, match="mixes ints and None"):
            adapter.reset(seed=[1, None, 2])
        with pytest.raises(ValueError, match="a sequence of 3 ints or Nones"):
            adapter.reset(seed=[1, 2])
        with pytest.raises(ValueError, match="bool array of shape"):
            adapter.reset(options={"reset_mask": [1, 0, 0]})
        with pytest.raises(ValueError, match="selects no lane"):
            adapter.reset(options={"reset_mask": np.zeros(3, bool)})
        with pytest.raises(gym.error.Error, match="greater or equal to zero"):
            adapter.reset(seed=-5)  # gymnasium's own check, before anything is sent
    finally:
        adapter.close()
        reference.close()


def test_bad_actions_and_bad_envs_are_refused_with_what_was_expected():
    adapter = RlmeshEnv(GymVectorEnv(gym.make("CartPole-v1")))
    vector = RlmeshVectorEnv(GymVectorEnv.make("CartPole-v1", num_envs=2))
    try:
        adapter.reset(seed=0)
        vector.reset(seed=0)
        with pytest.raises(ValueError, match=r"invalid action for Discrete\(2\)"):
            adapter.step([0, 1])
        with pytest.raises(ValueError, match="invalid actions for 2 lane"):
            vector.step(np.zeros(3, np.int64))
        with pytest.raises(EnvRpcError, match="outside Discrete"):
            vector.step(np.array([0, 5]))
    finally:
        adapter.close()
        vector.close()
    lanes = GymVectorEnv.make("CartPole-v1", num_envs=3)
    with pytest.raises(ValueError, match="the env has 3 lanes; RlmeshEnv is one lane"):
        RlmeshEnv(lanes)
    assert lanes.closed  # the adapter owned it, and closed it
    with pytest.raises(TypeError, match="expected a RuntimeEnv"):
        RlmeshVectorEnv(gym.make("CartPole-v1"))

    async def not_an_env():
        return "CartPole-v1"

    with pytest.raises(TypeError, match="the env factory returned str"):
        RlmeshVectorEnv(not_an_env)


def test_close_closes_the_env_and_the_loop_thread():
    before = set(threading.enumerate())
    inner = GymVectorEnv.make("CartPole-v1", num_envs=2)
    adapter = RlmeshVectorEnv(inner)
    adapter.reset(seed=0)
    assert [t for t in threading.enumerate() if t not in before]  # the adapter's loop thread
    adapter.close()
    adapter.close()  # idempotent
    assert inner.closed and adapter.closed
    assert [t for t in threading.enumerate() if t not in before and t.is_alive()] == []
    with pytest.raises(RuntimeError, match="closed RlmeshVectorEnv"):
        adapter.step(np.zeros(2, np.int64))
    single = RlmeshEnv(GymVectorEnv(gym.make("CartPole-v1")))
    single.close()
    assert single.closed and single.env.closed
    with pytest.raises(RuntimeError, match="closed RlmeshEnv"):
        single.reset()


def test_an_env_made_by_a_factory_on_the_adapters_loop_and_calls_from_inside_a_running_loop():
    made_on: list[int] = []

    async def make():
        made_on.append(threading.get_ident())
        return GymVectorEnv.make("CartPole-v1", num_envs=2)

    adapter = RlmeshVectorEnv(make)

    async def notebook_cell():  # Jupyter runs cells inside a running event loop
        return adapter.reset(seed=1)[0], adapter.step(np.array([0, 1]))[0]

    try:
        first, second = asyncio.run(notebook_cell())
    finally:
        adapter.close()
    assert made_on and made_on[0] != threading.get_ident()
    reference = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    np.testing.assert_array_equal(first, reference.reset(seed=1)[0])
    np.testing.assert_array_equal(second, reference.step(np.array([0, 1]))[0])
    reference.close()


class BrokenClose(gym.Wrapper):
    def close(self):
        raise OSError("the display is gone")


def test_a_failing_close_is_reported_and_the_adapter_and_its_loop_end_anyway():
    before = set(threading.enumerate())
    adapter = RlmeshVectorEnv(GymVectorEnv(BrokenClose(gym.make("CartPole-v1"))))
    with pytest.raises(EnvRpcError, match="the display is gone"):
        adapter.close()
    assert adapter.closed
    adapter.close()  # nothing left to close
    assert [t for t in threading.enumerate() if t not in before and t.is_alive()] == []


def test_a_refused_env_is_closed_with_its_adapters_loop():
    class NoContract(GymVectorEnv):
        contract = None  # type: ignore[assignment]

    before = set(threading.enumerate())
    env = NoContract(gym.make("CartPole-v1"))
    with pytest.raises(TypeError, match="contract is not an EnvContract"):
        RlmeshEnv(env)
    assert env.closed
    assert [t for t in threading.enumerate() if t not in before and t.is_alive()] == []


def test_calls_run_one_at_a_time_even_when_they_come_from_two_threads():
    # As after a Ctrl+C, which stops the caller's wait but not its call: the next call waits its turn.
    class SlowFirstStep(GymVectorEnv):
        calls: list[str] = []

        async def step_arrays(self, actions):
            self.calls.append("step begins")
            if len(self.calls) == 1:
                started.set()
                await asyncio.sleep(0.3)
            result = await super().step_arrays(actions)
            self.calls.append("step ends")
            return result

    started = threading.Event()
    adapter = RlmeshVectorEnv(SlowFirstStep(gym.make("CartPole-v1")))
    try:
        adapter.reset(seed=0)
        first = threading.Thread(target=adapter.step, args=(np.zeros(1, np.int64),))
        first.start()
        assert started.wait(10)
        adapter.step(np.ones(1, np.int64))
        first.join(10)
    finally:
        adapter.close()
    assert SlowFirstStep.calls == ["step begins", "step ends", "step begins", "step ends"]
