"""The driver's phases one at a time: cold reset, predict, step, settle episodes, reset finished lanes.

Each test prepares a driver, then calls one phase on a fresh route state, with the scripted
vector env of the other driver tests seen through the driver's message ports.
"""

from __future__ import annotations

import asyncio
import time

from _runtime_fakes import DISABLED, NEXT_STEP, EchoModel, RecordingHooks, ScriptedVectorEnv, vector_spec

from rlmesh_gym.runtime import RuntimeDriver
from rlmesh_gym.runtime.seeds import ResetSeeds
from rlmesh_gym.runtime.state import RouteState
from rlmesh_gym.runtime.telemetry import RuntimeTiming


def prepared(env, mode, num_envs, **spec) -> tuple[RuntimeDriver, RouteState, RecordingHooks]:
    hooks = RecordingHooks()
    driver = RuntimeDriver(vector_spec(num_envs, mode, base_seed=7, **spec), env, EchoModel(), hooks)
    driver._prepare()
    driver._timing = driver._run_timing = RuntimeTiming("env", "model", time.perf_counter_ns())
    return driver, RouteState.from_spec(driver.spec), hooks


def test_cold_reset_seeds_every_lane_and_starts_their_episodes():
    env = ScriptedVectorEnv([3, 5], NEXT_STEP)
    driver, state, hooks = prepared(env, NEXT_STEP, 2)
    observation, context = asyncio.run(driver._cold_reset(state))
    spec = driver.spec
    expected_seeds = ResetSeeds(7, spec.session_id, spec.route_id).seeds(0, [0, 1])
    assert env.reset_requests == [(expected_seeds, [])]
    assert state.episode_ids() == ["ep-0-0", "ep-1-0"]
    assert [event.episode_id for event in hooks.named("episode_started")] == ["ep-0-0", "ep-1-0"]
    assert observation.data == bytes([0, 0]) and context.rows == 2
    assert context.message().request_id.endswith(":reset_observation:000001")
    assert driver.timing.reset.count == 1


def test_predict_then_step_records_the_step():
    env = ScriptedVectorEnv([3, 5], NEXT_STEP)
    driver, state, hooks = prepared(env, NEXT_STEP, 2)
    observation, context = asyncio.run(driver._cold_reset(state))
    actions, model_ns = asyncio.run(driver._predict(state, observation, context))
    assert actions.data == b"\x00" and model_ns > 0  # the echo model answers action [0]
    step = asyncio.run(driver._step(state, actions, model_ns))
    assert step.rewards.tolist() == [1.0, 1.0] and step.completed == []
    assert state.total_steps == 1 and state.lane_steps() == [1, 1]
    [event] = hooks.named("step_completed")
    assert event.rewards == [1.0, 1.0] and list(event.response.episode_ids) == ["ep-0-0", "ep-1-0"]


def test_settle_adopts_rolled_ids_then_counts_completions():
    env = ScriptedVectorEnv([1, 5], NEXT_STEP)
    driver, state, hooks = prepared(env, NEXT_STEP, 2)
    observation, context = asyncio.run(driver._cold_reset(state))
    actions, model_ns = asyncio.run(driver._predict(state, observation, context))
    done = asyncio.run(driver._step(state, actions, model_ns))  # lane 0 finishes
    asyncio.run(driver._settle_episodes(state, done))
    assert state.total_episodes == 1
    [completed] = hooks.named("episode_completed")
    assert (completed.episode_id, completed.episode_record_id, completed.step_count) == (
        "ep-0-0",
        "ep-000001",
        1,
    )
    rolled = asyncio.run(driver._step(state, actions, model_ns))  # NEXT_STEP: lane 0's id rolls now
    asyncio.run(driver._settle_episodes(state, rolled))
    assert state.episode_ids() == ["ep-0-1", "ep-1-0"]
    assert [event.episode_record_id for event in hooks.named("episode_started")][-1] == "ep-000003"


def test_reset_finished_lanes_resets_only_those_with_the_next_generation_seeds():
    env = ScriptedVectorEnv([1, 5, 1], DISABLED)
    driver, state, hooks = prepared(env, DISABLED, 3)
    observation, context = asyncio.run(driver._cold_reset(state))
    actions, model_ns = asyncio.run(driver._predict(state, observation, context))
    step = asyncio.run(driver._step(state, actions, model_ns))
    asyncio.run(driver._settle_episodes(state, step))
    lanes = driver._done_lanes(state, step.completed)
    assert lanes == [0, 2]
    observation, context = asyncio.run(driver._reset_finished_lanes(state, lanes))
    spec = driver.spec
    assert env.reset_requests[-1] == (ResetSeeds(7, spec.session_id, spec.route_id).seeds(1, [0, 2]), [0, 2])
    assert state.episode_ids() == ["ep-0-1", "ep-1-0", "ep-2-1"]
    assert context.message().request_id.endswith(":reset_observation:000002")  # the cold reset used 000001
    assert [event.started_from_auto_reset for event in hooks.named("episode_started")][-2:] == [True, True]
