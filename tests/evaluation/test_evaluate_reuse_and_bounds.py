"""Evaluating one env several times, and what ends an evaluation that cannot finish normally."""

from __future__ import annotations

import asyncio

import gymnasium
import numpy as np
import pytest
from _eval_envs import FixedLengthEnv, episode_key, register_test_envs
from _message_form import messages

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.evaluation import EvaluationError, EvaluationOptions, evaluate, evaluate_async
from rlmesh_gym.proto import env_pb2
from rlmesh_gym.runtime import RuntimeEnv
from rlmesh_gym.spaces.codec import encode_batch

MODES = ("next_step", "same_step", "disabled")


@pytest.fixture(autouse=True, scope="module")
def _registered():
    register_test_envs()


def _close(env: GymVectorEnv) -> None:
    asyncio.run(env.close(5.0))


def _keys(result) -> list[tuple]:
    return [episode_key(record) for record in result.episodes]


class _Delegating(RuntimeEnv):
    """A RuntimeEnv over a GymVectorEnv that offers no ``drain_episodes`` (like a remote env)."""

    def __init__(self, inner: GymVectorEnv) -> None:
        self.inner = inner
        self.contract = inner.contract
        self.num_envs = inner.num_envs

    async def reset(self, request):
        return await messages(self.inner).reset(request)

    async def step(self, request):
        return await messages(self.inner).step(request)


# -- reusing an env ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_a_reused_env_gives_the_same_episodes_as_a_fresh_one(mode):
    kwargs = dict(episodes=4, seed=3, progress=False)
    env = GymVectorEnv.make("CartPole-v1", num_envs=2, autoreset=mode)
    first = evaluate(env, "random", **kwargs)
    second = evaluate(env, "random", **kwargs)
    fresh = evaluate("CartPole-v1", "random", num_envs=2, autoreset=mode, **kwargs)

    assert _keys(second) == _keys(fresh) == _keys(first)
    assert all(record.length > 0 and not record.truncated for record in second.episodes)
    assert second.timings.vector_steps == fresh.timings.vector_steps
    assert second.timings.resets == fresh.timings.resets
    assert not {r.episode_id for r in first.episodes} & {r.episode_id for r in second.episodes}
    # Nothing of the evaluations is left running in the caller's env.
    assert env.drain_episodes() == []
    _close(env)


@pytest.mark.parametrize("mode", MODES)
def test_episodes_the_caller_left_running_are_not_counted(mode):
    env = GymVectorEnv.make("CartPole-v1", num_envs=2, autoreset=mode)
    request = env_pb2.StepRequest()
    request.action.bytes.data = encode_batch(np.zeros(2, dtype=np.int64), env.contract.action_space, 2)

    async def play_a_little() -> None:
        await messages(env).reset(env_pb2.ResetRequest(seeds=[11, 12]))
        for _ in range(3):
            await messages(env).step(request)

    asyncio.run(play_a_little())
    kwargs = dict(episodes=4, seed=3, progress=False)
    reused = evaluate(env, "random", **kwargs)
    fresh = evaluate("CartPole-v1", "random", num_envs=2, autoreset=mode, **kwargs)
    assert _keys(reused) == _keys(fresh)
    assert reused.timings.resets == fresh.timings.resets
    _close(env)


@pytest.mark.parametrize("mode", ("next_step", "same_step"))
def test_episodes_a_route_never_started_are_not_counted_without_drain(mode):
    # The env cannot be drained, so the second run's cold reset reports the first run's
    # unfinished episodes as interrupted completions; they are not this evaluation's.
    inner = GymVectorEnv.make("CartPole-v1", num_envs=2, autoreset=mode)
    env = _Delegating(inner)
    kwargs = dict(episodes=4, seed=3, progress=False)
    evaluate(env, "random", **kwargs)
    second = evaluate(env, "random", **kwargs)
    fresh = evaluate("CartPole-v1", "random", num_envs=2, autoreset=mode, **kwargs)
    assert _keys(second) == _keys(fresh)
    _close(inner)


# -- a failure to count an episode ends the run -----------------------------------------------


class _WrongLaneEnv(_Delegating):
    """Reports its ``bad_at``-th completed episode on a lane that does not exist."""

    def __init__(self, inner: GymVectorEnv, bad_at: int) -> None:
        super().__init__(inner)
        self.bad_at = bad_at
        self.completed = 0
        self.steps = 0

    async def step(self, request):
        stepped = await messages(self.inner).step(request)
        self.steps += 1
        for metadata in stepped.response.completed_episodes:
            self.completed += 1
            if self.completed == self.bad_at:
                metadata.env_index = 7
        return stepped


def test_a_failure_counting_an_episode_ends_the_run_with_the_partial_result():
    inner = GymVectorEnv.make("rlmesh_eval_test/FixedLength-v0", num_envs=2, autoreset="next_step")
    env = _WrongLaneEnv(inner, bad_at=3)
    with pytest.raises(EvaluationError) as caught:
        evaluate(env, "random", episodes=8, seed=0, progress=False)
    error = caught.value
    assert "stopped after 2 of 8 episodes: counting a completed episode failed" in str(error)
    assert "reports lane 7, outside the 2 lane(s) being evaluated" in str(error)
    assert isinstance(error.__cause__, ValueError)
    partial = error.partial
    assert partial.complete is False
    assert partial.returns == [5.0, 5.0] and partial.episodes_per_lane == (1, 1)
    # The run stopped right after the step that reported the bad episode.
    assert partial.timings.vector_steps == env.steps == 11
    _close(inner)


# -- max_steps ----------------------------------------------------------------------------------


def _endless():
    return FixedLengthEnv(length=10**9)


@pytest.mark.parametrize("mode", MODES)
def test_max_steps_ends_an_evaluation_whose_episodes_never_end(mode):
    vector = gymnasium.vector.SyncVectorEnv(
        [_endless, lambda: FixedLengthEnv(3)],
        autoreset_mode={"next_step": "NextStep", "same_step": "SameStep", "disabled": "Disabled"}[mode],
    )
    with pytest.raises(EvaluationError) as caught:
        evaluate(
            vector, "random", episodes=4, seed=0, progress=False, options=EvaluationOptions(max_steps=25)
        )
    error = caught.value
    assert (
        "reached max_steps=25 vector steps with 2 of 4 episodes counted (per lane [0, 2] of [2, 2])"
    ) in str(error)
    assert "TimeLimit" in str(error) and error.__cause__ is None
    partial = error.partial
    assert partial.complete is False and partial.timings.vector_steps == 25
    assert partial.episodes_per_lane == (0, 2) and partial.returns == [3.0, 3.0]


def test_max_steps_is_a_cap_not_a_target():
    kwargs = dict(episodes=2, num_envs=1, seed=0, autoreset="next_step", progress=False)
    uncapped = evaluate("rlmesh_eval_test/FixedLength-v0", "random", **kwargs)
    # Two 5-step episodes and NEXT_STEP's reset step between them.
    assert uncapped.timings.vector_steps == 11
    exact = evaluate(
        "rlmesh_eval_test/FixedLength-v0", "random", **kwargs, options=EvaluationOptions(max_steps=11)
    )
    assert exact.complete and _keys(exact) == _keys(uncapped) and exact.timings.vector_steps == 11
    with pytest.raises(EvaluationError, match="reached max_steps=10 vector steps with 1 of 2 episodes"):
        evaluate(
            "rlmesh_eval_test/FixedLength-v0", "random", **kwargs, options=EvaluationOptions(max_steps=10)
        )


def test_max_steps_with_evaluate_async():
    async def main():
        return await evaluate_async(
            "rlmesh_eval_test/FixedLength-v0",
            "random",
            episodes=4,
            num_envs=2,
            seed=0,
            progress=False,
            options=EvaluationOptions(max_steps=3),
        )

    with pytest.raises(EvaluationError, match="reached max_steps=3") as caught:
        asyncio.run(main())
    assert caught.value.partial.episodes == () and caught.value.partial.timings.vector_steps == 3


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "10"])
def test_max_steps_must_be_a_positive_int(bad):
    with pytest.raises(
        ValueError, match=f"max_steps must be None or an int >= 1 \\(vector steps\\), got {bad!r}"
    ):
        evaluate("CartPole-v1", "random", progress=False, options=EvaluationOptions(max_steps=bad))
