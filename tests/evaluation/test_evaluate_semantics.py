"""What users rely on: reproducible episodes, unbiased per-lane quotas, exact seeds under DISABLED."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from _eval_envs import (
    RandomLengthEnv,
    balance_pole,
    episode_key,
    mixed_length_vector_env,
    register_test_envs,
)

from rlmesh_gym.evaluation import EvaluationOptions, default_ids, evaluate, lane_quotas
from rlmesh_gym.runtime import RuntimeHooks, reset_seed

MODES = ("next_step", "same_step", "disabled")


@pytest.fixture(autouse=True, scope="module")
def _registered():
    register_test_envs()


class AllCompletions(RuntimeHooks):
    """Every completed episode the env reports, counted or not, in order."""

    def __init__(self) -> None:
        self.completed: list[tuple[int, float]] = []

    async def episode_completed(self, event) -> None:
        self.completed.append((event.metadata.env_index, event.metadata.cumulative_reward))


@pytest.mark.parametrize("mode", MODES)
def test_same_seed_same_episodes(mode):
    runs = [
        evaluate("CartPole-v1", "random", episodes=12, num_envs=3, seed=5, autoreset=mode, progress=False)
        for _ in range(2)
    ]
    assert [episode_key(r) for r in runs[0].episodes] == [episode_key(r) for r in runs[1].episodes]
    assert len(runs[0].episodes) == 12
    # ...and a different seed gives different episodes.
    other = evaluate("CartPole-v1", "random", episodes=12, num_envs=3, seed=6, autoreset=mode, progress=False)
    assert [episode_key(r) for r in other.episodes] != [episode_key(r) for r in runs[0].episodes]


def test_async_vectorization_gives_the_same_episodes_as_sync():
    kwargs = dict(episodes=6, num_envs=2, seed=3, progress=False)
    sync = evaluate("CartPole-v1", balance_pole, **kwargs, options=EvaluationOptions(vectorization="sync"))
    asynchronous = evaluate(
        "CartPole-v1", balance_pole, **kwargs, options=EvaluationOptions(vectorization="async")
    )
    assert [episode_key(r) for r in sync.episodes] == [episode_key(r) for r in asynchronous.episodes]


def test_default_ids_depend_on_env_and_lanes_only():
    result = evaluate("CartPole-v1", "random", episodes=2, num_envs=2, seed=0, progress=False)
    assert (
        (result.session_id, result.route_id)
        == default_ids("CartPole-v1", 2)
        == ("eval-CartPole-v1", "lanes-2")
    )
    # The generation-0 reset seeds are the driver's seed function of those ids.
    first = {r.lane: r.seed for r in reversed(result.episodes)}
    assert first == {lane: reset_seed(0, "eval-CartPole-v1", "lanes-2", 0, lane) for lane in range(2)}


def test_given_ids_change_the_seeds():
    default = evaluate("CartPole-v1", "random", episodes=2, num_envs=2, seed=0, progress=False)
    custom = evaluate(
        "CartPole-v1",
        "random",
        episodes=2,
        num_envs=2,
        seed=0,
        progress=False,
        options=EvaluationOptions(session_id="mine", route_id="r"),
    )
    assert custom.session_id == "mine" and custom.route_id == "r"
    assert {r.seed for r in custom.episodes}.isdisjoint({r.seed for r in default.episodes})


@pytest.mark.parametrize("mode", MODES)
def test_mixed_length_lanes_fill_their_quotas_and_the_mean_is_unbiased(mode):
    # Lane 0 finishes an episode every 2 steps, lane 1 every 40: first-K completions would be
    # nearly all lane 0.
    lengths = [2, 40]
    spy = AllCompletions()
    env = mixed_length_vector_env(
        lengths, autoreset={"next_step": "NextStep", "same_step": "SameStep", "disabled": "Disabled"}[mode]
    )
    try:
        result = evaluate(
            env, "random", episodes=10, seed=0, progress=False, options=EvaluationOptions(hooks=[spy])
        )
    finally:
        env.close()
    assert result.quotas == lane_quotas(10, 2) == (5, 5)
    assert result.episodes_per_lane == (5, 5)
    assert all(r.episode_return == lengths[r.lane] == r.length for r in result.episodes)
    assert result.mean_return == (5 * 2 + 5 * 40) / 10 == 21.0
    # What stopping at the first 10 completions would have reported instead:
    first_k = [ret for _, ret in spy.completed[:10]]
    assert np.mean(first_k) < 10.0
    assert len(spy.completed) > 10  # lane 0 finished more than its quota: the extras were ignored


def test_quotas_take_each_lanes_first_episodes_in_order():
    # Random lengths per episode: the counted episodes of each lane are exactly its first ones.
    spy = AllCompletions()
    env = gymnasium.vector.SyncVectorEnv([lambda: RandomLengthEnv((2, 30))] * 4, autoreset_mode="NextStep")
    try:
        result = evaluate(
            env, "random", episodes=20, seed=1, progress=False, options=EvaluationOptions(hooks=[spy])
        )
    finally:
        env.close()
    assert result.episodes_per_lane == (5, 5, 5, 5)
    for lane in range(4):
        seen = [ret for done_lane, ret in spy.completed if done_lane == lane][:5]
        assert [r.episode_return for r in result.episodes if r.lane == lane] == seen
    successes = [r.success for r in result.episodes]
    assert set(successes) <= {True, False} and result.success_rate == np.mean(successes)


def test_fewer_episodes_than_lanes_uses_the_last_lanes():
    result = evaluate("CartPole-v1", "random", episodes=3, num_envs=4, seed=0, progress=False)
    assert result.quotas == (0, 1, 1, 1) and result.episodes_per_lane == (0, 1, 1, 1)


@pytest.mark.parametrize("lanes", [1, 4])
def test_first_episode_of_each_lane_is_identical_across_autoreset_modes(lanes):
    firsts = {}
    for mode in MODES:
        result = evaluate(
            "CartPole-v1",
            balance_pole,
            episodes=2 * lanes,
            num_envs=lanes,
            seed=11,
            autoreset=mode,
            progress=False,
        )
        firsts[mode] = {
            lane: episode_key(next(r for r in result.episodes if r.lane == lane)) for lane in range(lanes)
        }
    assert firsts["next_step"] == firsts["same_step"] == firsts["disabled"]
    assert all(key[1] is not None for key in firsts["next_step"].values())  # generation-0 seeds recorded


def test_more_episodes_extend_each_lane_prefix():
    small = evaluate("CartPole-v1", "random", episodes=6, num_envs=3, seed=2, progress=False)
    large = evaluate("CartPole-v1", "random", episodes=12, num_envs=3, seed=2, progress=False)
    for lane in range(3):
        lane_small = [episode_key(r) for r in small.episodes if r.lane == lane]
        lane_large = [episode_key(r) for r in large.episodes if r.lane == lane]
        assert lane_large[: len(lane_small)] == lane_small


def test_every_disabled_episode_replays_from_its_seed_in_a_plain_env():
    result = evaluate(
        "CartPole-v1", balance_pole, episodes=12, num_envs=4, seed=7, autoreset="disabled", progress=False
    )
    assert len(result.episodes) == 12
    assert len({r.seed for r in result.episodes}) == 12  # every episode has its own seed
    env = gymnasium.make("CartPole-v1")
    try:
        for record in result.episodes:
            assert record.seed is not None
            observation, _ = env.reset(seed=record.seed)
            total, steps, terminated, truncated = 0.0, 0, False, False
            while not (terminated or truncated):
                action = int(balance_pole(observation[None, :])[0])
                observation, reward, terminated, truncated, _ = env.step(action)
                total += reward
                steps += 1
            assert (total, steps, terminated, truncated) == (
                record.episode_return,
                record.length,
                record.terminated,
                record.truncated,
            )
    finally:
        env.close()


def test_unseeded_runs_still_count_quotas():
    result = evaluate("CartPole-v1", "random", episodes=4, num_envs=2, seed=None, progress=False)
    assert result.episodes_per_lane == (2, 2) and result.seed is None


@pytest.mark.parametrize(
    "mode, vector_steps, resets",
    [
        # Lane 1 (5-step episodes) sets the pace; NEXT_STEP spends one reset step between episodes.
        ("next_step", 11, 1),
        ("same_step", 10, 1),
        # DISABLED: the cold reset plus a driver reset each time a lane finishes before the end
        # (lane 0 at steps 3, 6, 9; lane 1 at step 5).
        ("disabled", 10, 5),
    ],
)
def test_timings_count_lane_steps_like_a_vector_loop(mode, vector_steps, resets):
    env = mixed_length_vector_env(
        [3, 5], autoreset={"next_step": "NextStep", "same_step": "SameStep", "disabled": "Disabled"}[mode]
    )
    try:
        result = evaluate(env, "random", episodes=4, seed=0, progress=False)
    finally:
        env.close()
    timings = result.timings
    assert (timings.vector_steps, timings.env_steps, timings.resets) == (
        vector_steps,
        2 * vector_steps,
        resets,
    )
    assert timings.wall_seconds > 0
    assert timings.env_steps_per_second == pytest.approx(timings.env_steps / timings.wall_seconds)
    parts = (timings.env_step_ms + timings.model_wait_ms + timings.overhead_ms) * vector_steps
    assert parts + timings.reset_ms == pytest.approx(timings.wall_seconds * 1000)
