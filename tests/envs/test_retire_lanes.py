"""``GymVectorEnv.retire_lanes``: a lane of an env ``make`` built under SAME_STEP plays out its
running episode and is then left out of the steps until the next reset (what ``evaluate()`` does
to a lane once its running episode is the last one it counts there)."""

from __future__ import annotations

import asyncio
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.envs.resolve import ResolvedEnv
from rlmesh_gym.evaluation import EvaluationOptions, evaluate
from rlmesh_gym.evaluation._evaluate import evaluate_resolved
from rlmesh_gym.evaluation._settings import EvaluationSettings
from rlmesh_gym.recording import load_recording
from rlmesh_gym.runtime import AutoresetMode
from rlmesh_gym.spaces.batch import SpaceBatch


class _CountSteps(gym.Wrapper):
    """Counts the steps of its sub-env, per lane, in a list shared by the lanes."""

    def __init__(self, env: gym.Env, counts: list[int]) -> None:
        super().__init__(env)
        self.lane = len(counts)
        counts.append(0)
        self.counts = counts

    def step(self, action: Any) -> Any:
        self.counts[self.lane] += 1
        return self.env.step(action)


def _counted_env(num_envs: int) -> tuple[GymVectorEnv, list[int]]:
    counts: list[int] = []
    env = GymVectorEnv.make(
        "CartPole-v1",
        num_envs,
        autoreset="same_step",
        wrappers=[lambda lane_env: _CountSteps(lane_env, counts)],
    )
    return env, counts


def _actions(env: GymVectorEnv, values: list[int]) -> SpaceBatch:
    return SpaceBatch.from_values(env._action_codec, np.array(values), len(values))


def test_a_retired_lane_plays_out_its_episode_then_is_left_out() -> None:
    async def play() -> None:
        env, counts = _counted_env(2)
        twin, _ = _counted_env(2)  # the same lanes, never retired
        async with env, twin:
            first = await env.reset_arrays([], [1, 2])
            await twin.reset_arrays([], [1, 2])
            env.retire_lanes([1])
            assert env.episode_ids[1] == first.episode_ids[1]  # its running episode goes on
            # Push both lanes right until lane 1's episode ends (CartPole falls within 15 steps).
            step, ended_now = 0, False
            while not ended_now:
                step += 1
                result = await env.step_arrays(_actions(env, [1, 1]))
                same = await twin.step_arrays(_actions(twin, [1, 1]))
                np.testing.assert_array_equal(result.rewards, same.rewards)
                ended_now = bool(result.truncated[1] or result.terminated[1])
            ended = result.completed[-1]
            assert (ended.env_index, ended.episode_id, ended.step_count) == (1, first.episode_ids[1], step)
            # Not reset: the step reports the terminal observation, and no new episode rolls in.
            terminal = result.observation.values[1]
            np.testing.assert_array_equal(terminal, ended.final_info["final_obs"])
            assert result.episode_ids[1] == "" and env.episode_ids[1] == ""
            assert same.episode_ids[1] not in ("", first.episode_ids[1])  # the twin rolled
            assert counts[1] == step
            for _ in range(3):
                later = await env.step_arrays(_actions(env, [0, 0]))
                np.testing.assert_array_equal(later.observation.values[1], terminal)
                assert (later.rewards[1], later.terminated[1], later.truncated[1]) == (0.0, False, False)
                assert later.episode_ids[1] == "" and all(e.env_index == 0 for e in later.completed)
            assert counts[1] == step  # its sub-env was not stepped
            assert counts[0] == step + 3
            # A reset brings every lane back.
            again = await env.reset_arrays([], [1, 2])
            assert all(again.episode_ids)
            await env.step_arrays(_actions(env, [0, 0]))
            assert counts[1] == step + 1

    asyncio.run(play())


def test_a_lane_marked_before_a_reset_stops_after_the_episode_the_reset_starts() -> None:
    async def play() -> None:
        env, counts = _counted_env(2)
        async with env:
            env.retire_lanes([0])  # before any reset, as evaluate() does for a one-episode lane
            started = await env.reset_arrays([], [1, 2])
            ended: list[Any] = []
            while not ended:
                result = await env.step_arrays(_actions(env, [1, 1]))
                ended = [episode for episode in result.completed if episode.env_index == 0]
            assert ended[0].episode_id == started.episode_ids[0] and result.episode_ids[0] == ""
            stopped_at = counts[0]
            for _ in range(20):  # lane 1 goes on rolling episodes; lane 0 stays out
                result = await env.step_arrays(_actions(env, [1, 1]))
                assert result.episode_ids[0] == "" and all(e.env_index == 1 for e in result.completed)
            assert counts[0] == stopped_at and counts[1] == stopped_at + 20

    asyncio.run(play())


def test_only_an_env_make_built_under_same_step_retires_lanes() -> None:
    own = GymVectorEnv(
        gym.make_vec(
            "CartPole-v1",
            2,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
        )
    )
    next_step = GymVectorEnv.make("CartPole-v1", 2)
    for env in (own, next_step):
        with env:
            assert not env.can_retire_lanes
            with pytest.raises(ValueError, match="cannot retire lanes: only an env GymVectorEnv.make built"):
                env.retire_lanes([0])
    with GymVectorEnv.make("CartPole-v1", 2, autoreset="same_step") as env:
        assert env.can_retire_lanes
        with pytest.raises(ValueError, match=r"lanes \[2\] are not lanes of this env; expected ints in 0..1"):
            env.retire_lanes([0, 2])
        with pytest.raises(TypeError, match="lanes must be a sequence of ints"):
            env.retire_lanes([0.5])  # type: ignore[list-item]
        env.retire_lanes([np.int64(1)])  # numpy ints are lanes too


def _steps_of(episodes: Any) -> list[tuple[int, int | None, float, int, bool, bool]]:
    return [(e.lane, e.seed, e.episode_return, e.length, e.terminated, e.truncated) for e in episodes]


def _mlp_policy() -> Any:
    import torch  # only the tests marked torch call this (tests/conftest.py)

    torch.manual_seed(0)  # greedy on the observation: CartPole episodes of 8 to 11 steps
    return torch.nn.Sequential(
        torch.nn.Linear(4, 64),
        torch.nn.Tanh(),
        torch.nn.Linear(64, 64),
        torch.nn.Tanh(),
        torch.nn.Linear(64, 2),
    )


@pytest.mark.parametrize("policy_kind", [pytest.param("mlp", marks=pytest.mark.torch), "random"])
@pytest.mark.parametrize(("episodes", "num_envs"), [(40, 8), (8, 8), (5, 8), (24, 4)])
def test_evaluate_counts_the_same_episodes_in_fewer_env_steps(
    policy_kind: str, episodes: int, num_envs: int
) -> None:
    policy: Any = _mlp_policy() if policy_kind == "mlp" else "random"  # seeded: the same draws
    built, built_counts = _counted_env(num_envs)  # evaluate()'s own env: owned, so retired
    resolved = ResolvedEnv(built, "CartPole-v1", num_envs, AutoresetMode.SAME_STEP, "sync", owned=True)
    settings = EvaluationSettings.of(None, episodes=episodes, num_envs=num_envs, seed=0, progress=False)
    retired = evaluate_resolved(resolved, policy, settings)
    own, own_counts = _counted_env(num_envs)  # a caller's env: stepped as it is
    with own:
        stepped = evaluate(own, policy, episodes=episodes, num_envs=num_envs, seed=0, progress=False)
    assert _steps_of(retired.episodes) == _steps_of(stepped.episodes)
    assert retired.timings.vector_steps == stepped.timings.vector_steps
    # A lane stops when its last counted episode ends: its env-steps are its counted ones. A lane
    # with none to count plays one episode.
    for lane, quota in enumerate(retired.quotas):
        counted_steps = sum(e.length for e in retired.episodes if e.lane == lane)
        assert built_counts[lane] == counted_steps if quota else 0 < built_counts[lane] <= own_counts[lane]
    assert sum(built_counts) < sum(own_counts)


@pytest.mark.parametrize("seed", [0, 1, 3])
def test_a_recording_of_evaluates_own_env_holds_the_counted_episodes(tmp_path: Any, seed: int) -> None:
    path = tmp_path / "run.rec"
    result = evaluate("CartPole-v1", "random", episodes=6, num_envs=4, seed=seed, record=path, progress=False)
    recording = load_recording(path)
    assert [e.episode_id for e in recording.episodes] == [e.episode_id for e in result.episodes]
    assert all(e.counted for e in recording.episodes) and not recording.incomplete_episodes
    assert [len(e.steps) for e in recording.episodes] == [e.length for e in result.episodes]


@pytest.mark.torch
def test_the_estimate_after_a_pilot_steps_every_lane_again() -> None:
    # target_ci: the pilot retires lanes of evaluate()'s own env; the estimate's cold reset brings
    # them back, so both rounds are the episodes a caller's (never retired) env gives.
    policy = _mlp_policy()
    options = EvaluationOptions(max_episodes=64)
    built = evaluate(
        "CartPole-v1", policy, episodes=8, num_envs=4, seed=1, target_ci=0.5, progress=False, options=options
    )
    with GymVectorEnv.make("CartPole-v1", 4, autoreset="same_step") as own:
        caller = evaluate(
            own, policy, episodes=8, num_envs=4, seed=1, target_ci=0.5, progress=False, options=options
        )
    assert len(built.episodes) > len(built.pilot_episodes) == 8
    assert _steps_of(built.pilot_episodes) == _steps_of(caller.pilot_episodes)
    assert _steps_of(built.episodes) == _steps_of(caller.episodes)


class _TwoStepDict(gym.Env):
    """Episodes of two steps whose observations are dicts (batched by gymnasium's concatenate)."""

    observation_space = gym.spaces.Dict(
        {"t": gym.spaces.Box(0.0, 100.0, (1,), np.float32), "phase": gym.spaces.Discrete(3)}
    )
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return self._observation(), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        return self._observation(), 1.0, self.t >= 2, False, {}

    def _observation(self) -> dict[str, Any]:
        return {"t": np.array([self.t], dtype=np.float32), "phase": self.t % 3}


def test_a_retired_lane_of_a_dict_space_repeats_its_terminal_observation() -> None:
    gym.register("rlmesh-test/TwoStepDict-v0", entry_point=_TwoStepDict)

    async def play() -> None:
        async with GymVectorEnv.make("rlmesh-test/TwoStepDict-v0", 2, autoreset="same_step") as env:
            await env.reset_arrays([], [1, 2])
            env.retire_lanes([1])
            await env.step_arrays(_actions(env, [0, 0]))
            ended = await env.step_arrays(_actions(env, [0, 0]))  # both lanes' episodes end
            assert ended.episode_ids[1] == "" and ended.episode_ids[0] != ""
            for _ in range(3):
                later = await env.step_arrays(_actions(env, [0, 0]))
                assert later.observation.values["t"][1].tolist() == [2.0]  # its terminal one
                assert later.observation.values["phase"][1] == 2 and later.rewards[1] == 0.0
            assert later.observation.values["t"][0].tolist() == [1.0]  # lane 0 rolled on

    try:
        asyncio.run(play())
    finally:
        gym.registry.pop("rlmesh-test/TwoStepDict-v0")
