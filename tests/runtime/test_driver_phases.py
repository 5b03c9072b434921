"""The driver's phases one at a time: cold reset, predict, step, settle episodes, reset finished lanes.

Each test makes one run of a driver (what ``RuntimeDriver.run`` makes), then calls one phase on
it, with the scripted vector env of the other driver tests seen through the driver's message
ports.
"""

from __future__ import annotations

import asyncio

from _runtime_fakes import DISABLED, NEXT_STEP, EchoModel, RecordingHooks, ScriptedVectorEnv, vector_spec

from rlmesh_gym.runtime import RuntimeDriver
from rlmesh_gym.runtime.driver import DEFAULT_CANCELLATION_REASON, _Run
from rlmesh_gym.runtime.seeds import ResetSeeds


def prepared(env, mode, num_envs, **spec) -> tuple[_Run, RecordingHooks]:
    hooks = RecordingHooks()
    driver = RuntimeDriver(vector_spec(num_envs, mode, base_seed=7, **spec), env, EchoModel(), hooks)
    driver._run = run = _Run(driver, None, DEFAULT_CANCELLATION_REASON)
    return run, hooks


def test_cold_reset_seeds_every_lane_and_starts_their_episodes():
    env = ScriptedVectorEnv([3, 5], NEXT_STEP)
    run, hooks = prepared(env, NEXT_STEP, 2)
    observation, context = asyncio.run(run.cold_reset())
    spec = run.spec
    expected_seeds = ResetSeeds(7, spec.session_id, spec.route_id).seeds(0, [0, 1])
    assert env.reset_requests == [(expected_seeds, [])]
    assert run.state.episode_ids() == ["ep-0-0", "ep-1-0"]
    assert [event.episode_id for event in hooks.named("episode_started")] == ["ep-0-0", "ep-1-0"]
    assert observation.data == bytes([0, 0]) and context.rows == 2
    assert context.message().request_id.endswith(":reset_observation:000001")
    assert run.timing.reset.count == 1


def test_predict_then_step_records_the_step():
    env = ScriptedVectorEnv([3, 5], NEXT_STEP)
    run, hooks = prepared(env, NEXT_STEP, 2)
    observation, context = asyncio.run(run.cold_reset())
    actions = asyncio.run(run.predict(observation, context))
    assert actions.data == b"\x00" and run.model_ns > 0  # the echo model answers action [0]
    step = asyncio.run(run.step(actions))
    assert step.rewards.tolist() == [1.0, 1.0] and step.completed == []
    assert run.state.total_steps == 1 and run.state.lane_steps() == [1, 1]
    [event] = hooks.named("step_completed")
    assert event.rewards == [1.0, 1.0] and list(event.response.episode_ids) == ["ep-0-0", "ep-1-0"]


def test_settle_adopts_rolled_ids_then_counts_completions():
    env = ScriptedVectorEnv([1, 5], NEXT_STEP)
    run, hooks = prepared(env, NEXT_STEP, 2)
    observation, context = asyncio.run(run.cold_reset())
    actions = asyncio.run(run.predict(observation, context))
    done = asyncio.run(run.step(actions))  # lane 0 finishes
    asyncio.run(run.settle_episodes(done))
    assert run.state.total_episodes == 1
    [completed] = hooks.named("episode_completed")
    assert (completed.episode_id, completed.episode_record_id, completed.step_count) == (
        "ep-0-0",
        "ep-000001",
        1,
    )
    rolled = asyncio.run(run.step(actions))  # NEXT_STEP: lane 0's id rolls now
    asyncio.run(run.settle_episodes(rolled))
    assert run.state.episode_ids() == ["ep-0-1", "ep-1-0"]
    assert [event.episode_record_id for event in hooks.named("episode_started")][-1] == "ep-000003"


def test_reset_finished_lanes_resets_only_those_with_the_next_generation_seeds():
    env = ScriptedVectorEnv([1, 5, 1], DISABLED)
    run, hooks = prepared(env, DISABLED, 3)
    observation, context = asyncio.run(run.cold_reset())
    actions = asyncio.run(run.predict(observation, context))
    step = asyncio.run(run.step(actions))
    asyncio.run(run.settle_episodes(step))
    lanes = run.done_lanes(step.completed)
    assert lanes == [0, 2]
    observation, context = asyncio.run(run.reset_finished_lanes(lanes))
    spec = run.spec
    assert env.reset_requests[-1] == (ResetSeeds(7, spec.session_id, spec.route_id).seeds(1, [0, 2]), [0, 2])
    assert run.state.episode_ids() == ["ep-0-1", "ep-1-0", "ep-2-1"]
    assert context.message().request_id.endswith(":reset_observation:000002")  # the cold reset used 000001
    assert [event.started_from_auto_reset for event in hooks.named("episode_started")][-2:] == [True, True]
