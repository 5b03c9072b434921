"""The driver against scripted envs and models: upstream's driver test scenarios, event order, ids, seeds,
counters, the failure path, cancellation, timeouts and this port's extensions."""

from __future__ import annotations

import asyncio
import logging
import re
import sys

import pytest
from _runtime_fakes import (
    DISABLED,
    NEXT_STEP,
    SAME_STEP,
    Blocker,
    CountingEnv,
    EchoModel,
    RecordingHooks,
    ScriptedVectorEnv,
    names,
    single_env_spec,
    value,
    vector_spec,
)

from rlmesh_gym.proto import env_pb2, model_pb2
from rlmesh_gym.runtime import (
    CancellationToken,
    EnvRpcError,
    HookError,
    HookFailedError,
    InvalidSpecError,
    ModelRouteMismatchError,
    ModelRpcError,
    OperationTimeoutError,
    ProtocolError,
    RouteCancelledError,
    RuntimeDriver,
    RuntimeEnvStep,
    RuntimeHooks,
    RuntimeLimits,
    RuntimeModelPrediction,
    reset_seed,
)


def run(driver: RuntimeDriver, token: CancellationToken | None = None, reason: str | None = None):
    if token is None:
        return asyncio.run(driver.run())
    if reason is None:
        return asyncio.run(driver.run_with_cancellation(token))
    return asyncio.run(driver.run_with_cancellation_reason(token, reason))


def fail(driver: RuntimeDriver, error: type[BaseException], token=None, reason=None) -> BaseException:
    with pytest.raises(error) as caught:
        run(driver, token, reason)
    return caught.value


def assert_failed_cleanly(env, model, hooks: RecordingHooks, error: BaseException) -> None:
    """Env and model closed, then session_failed exactly once with the error's text, nothing after."""
    assert env.closed and model.closed
    failed = hooks.named("session_failed")
    assert len(failed) == 1 and failed[0].reason == str(error)
    assert names(hooks.entries)[-1] == "session_failed"
    assert not hooks.named("session_ended") and not hooks.named("telemetry_summary")
    assert model.close_requests[-1].reason == str(error)


# -- upstream's driver tests --------------------------------------------------------------------------


def test_driver_runs_one_episode_and_closes_terminal_route() -> None:
    log: list = []
    env, model, hooks = CountingEnv(log), EchoModel(log), RecordingHooks(log)
    report = run(RuntimeDriver(single_env_spec(), env, model, hooks))
    assert (report.session_id, report.route_id, report.total_steps, report.total_episodes) == (
        "session-1",
        "route-1",
        1,
        1,
    )
    assert env.closed and model.closed
    assert len(hooks.named("action_received")) == 1 and len(hooks.named("session_ended")) == 1
    # The exact interleaving of hooks and calls (docs/design/runtime.md#event-order, #normal-end-and-failure).
    assert names(log) == [
        "session_started",
        "env.reset",
        "log",
        "episode_started",
        "transform_observation",
        "observation_emitted",
        "model.predict",
        "transform_action",
        "action_received",
        "env.step",
        "step_completed",
        "episode_completed",
        "telemetry_window",
        "telemetry_summary",
        "model.close_route",
        "env.close",
        "session_ended",
    ]
    assert log[1] == ("env.reset", [], [])
    assert model.close_requests[0].context.request_id == "session-1:route-1:close_route:000002"
    assert model.close_requests[0].reason == "completed requested episodes"
    assert env.close_timeout == 5.0


def test_timing_counts_every_completed_operation() -> None:
    driver = RuntimeDriver(single_env_spec(max_episodes=1), CountingEnv(terminal_after=3), EchoModel())
    assert driver.timing is None  # before the run
    run(driver)
    timing = driver.timing
    assert (timing.reset.count, timing.model_wait.count, timing.env_step.count) == (1, 3, 3)
    for timer in (timing.reset, timing.model_wait, timing.env_step):
        assert 0 <= timer.min_ns <= timer.max_ns <= timer.total_ns


def test_event_fields_of_a_one_episode_run() -> None:
    env, model, hooks = CountingEnv(), EchoModel(), RecordingHooks()
    spec = single_env_spec(env_id="CartPole-v1")
    run(RuntimeDriver(spec, env, model, hooks))
    route = spec.route_context()
    (started,) = hooks.named("session_started")
    assert (started.session_id, started.route, started.env_id) == ("session-1", route, "CartPole-v1")
    (log_event,) = hooks.named("log")
    assert re.fullmatch(r"env reset complete in \d+ms \(1 episode\(s\) ready\)", log_event.message)
    assert (log_event.level.value, log_event.source) == ("info", "runtime")
    (episode,) = hooks.named("episode_started")
    assert (episode.episode_id, episode.episode_record_id, episode.episode_index, episode.env_index) == (
        "episode-1",
        "ep-000001",
        1,
        0,
    )
    assert episode.started_from_auto_reset is False
    (observation,) = hooks.named("observation_emitted")
    assert (observation.step, observation.is_reset, observation.num_envs, observation.observation) == (
        0,
        True,
        1,
        b"\x01",
    )
    assert observation.episode_ids == ["episode-1"] and observation.episode_record_ids == ["ep-000001"]
    (action,) = hooks.named("action_received")
    assert (action.step, action.env_index, action.action, action.episode_id) == (1, 0, b"\x00", "episode-1")
    (step,) = hooks.named("step_completed")
    assert (step.step, step.rewards, step.episode_record_id) == (1, [1.0], "ep-000001")
    assert step.response is not None and step.response.observation.bytes.data == b"\x01"
    assert (step.episode_ids, step.episode_record_ids) == (["episode-1"], ["ep-000001"])
    (completed,) = hooks.named("episode_completed")
    assert (
        completed.episode_id,
        completed.episode_record_id,
        completed.episode_index,
        completed.env_index,
    ) == (
        "episode-1",
        "ep-000001",
        1,
        0,
    )
    assert (completed.step_count, completed.cumulative_reward, completed.terminated, completed.truncated) == (
        1,
        1.0,
        True,
        False,
    )
    assert completed.final_info is None and completed.metadata.episode_id == "episode-1"
    (ended,) = hooks.named("session_ended")
    assert (ended.reason, ended.total_steps, ended.total_episodes) == ("completed requested episodes", 1, 1)
    (summary,) = hooks.named("telemetry_summary")
    assert summary.sample_count == 1
    assert [(t.operation, t.component_id, t.name) for t in summary.timings] == [
        ("env.step", "env-1", "rpc.total"),
        ("model.predict", "model-1", "rpc.total"),
    ]
    (window,) = hooks.named("telemetry_window")
    assert window.sample_count == 1


def test_model_predict_timeout_fails_session() -> None:
    class SlowModel(EchoModel):
        async def predict(self, request):
            await asyncio.sleep(0.05)
            return await super().predict(request)

    env, model, hooks = CountingEnv(), SlowModel(), RecordingHooks()
    spec = single_env_spec(limits=RuntimeLimits(model_predict_timeout=0.005))
    error = fail(RuntimeDriver(spec, env, model, hooks), OperationTimeoutError)
    assert (error.operation, error.component_id, error.step, error.route_id) == (
        "model.predict",
        "model-1",
        0,
        "route-1",
    )
    assert (
        str(error) == "model.predict timed out on route route-1 component model-1 at runtime step 0 after 5ms"
    )
    assert_failed_cleanly(env, model, hooks, error)


def test_driver_continues_after_non_terminal_step() -> None:
    env, model = CountingEnv(terminal_after=2), EchoModel()
    report = run(RuntimeDriver(single_env_spec(), env, model))
    assert (report.total_steps, report.total_episodes) == (2, 1)
    assert len(model.requests) == 2
    # The non-terminal step is followed by a step observation, not a reset.
    assert [r.context.request_id for r in model.requests] == [
        "session-1:route-1:reset_observation:000001",
        "session-1:route-1:step_observation:000002",
    ]
    assert len(env.reset_requests) == 1
    assert [(s.step, s.reset) for s in model.requests[1].context.slots] == [(1, False)]


def test_fatal_transform_hook_failure_closes_route() -> None:
    class FailingTransform(RecordingHooks):
        async def transform_action(self, event):
            raise HookError("transform exploded")

    env, model, hooks = CountingEnv(), EchoModel(), FailingTransform()
    error = fail(RuntimeDriver(single_env_spec(), env, model, hooks), HookFailedError)
    assert str(error) == "runtime hook failed: transform exploded"
    assert not env.step_requests
    assert_failed_cleanly(env, model, hooks, error)


def test_driver_threads_deterministic_reset_seeds() -> None:
    runs = []
    for _ in range(2):
        env, hooks = CountingEnv(), RecordingHooks()
        report = run(RuntimeDriver(single_env_spec(base_seed=1234, max_episodes=2), env, EchoModel(), hooks))
        assert report.total_episodes == 2
        runs.append([list(r.seeds) for r in env.reset_requests])
        # The env reuses "episode-1", so the DISABLED whole-vector reset starts no new episode.
        assert len(hooks.named("episode_started")) == 1
        assert [list(r.env_indices) for r in env.reset_requests] == [[], []]
    assert runs[0] == runs[1] == [[8552392209508998990], [7706257071820558593]]
    assert runs[0][0] == [reset_seed(1234, "session-1", "route-1", 0, 0)]
    assert runs[0][1] == [reset_seed(1234, "session-1", "route-1", 1, 0)]


def test_env_rpc_preserves_recoverability_and_source() -> None:
    source = ConnectionResetError("transport error: connection closed")
    recoverable = EnvRpcError.wrap("step", 3, source, recoverable=True)
    assert recoverable.recoverable and recoverable.__cause__ is source
    plain = EnvRpcError.wrap("step", 3, source)
    assert not plain.recoverable and isinstance(plain.__cause__, ConnectionResetError)
    assert str(plain).startswith(
        "environment step failed at runtime step 3: transport error: connection closed. If the source is "
    )


def test_model_rpc_preserves_source() -> None:
    source = KeyError("weights")
    plain = ModelRpcError.wrap("model-1", source)
    assert not plain.recoverable and plain.__cause__ is source
    assert ModelRpcError.wrap("model-1", source, recoverable=True).recoverable
    assert str(plain) == "model endpoint model-1 request failed: 'weights'"
    assert not OperationTimeoutError("r", "c", "env.step", 1, 1.0).recoverable


def test_cancellation_reason_is_threaded_from_caller() -> None:
    token = CancellationToken()
    token.cancel()
    env, model, hooks = CountingEnv(), EchoModel(), RecordingHooks()
    driver = RuntimeDriver(single_env_spec(), env, model, hooks)
    error = fail(driver, RouteCancelledError, token, "operator requested shutdown")
    assert (error.reason, error.step, error.route_id) == ("operator requested shutdown", 0, "route-1")
    assert str(error) == "route route-1 cancelled at runtime step 0: operator requested shutdown"
    # Cancellation wins the tie at the cold reset: the env is never asked to reset.
    assert not env.reset_requests
    assert_failed_cleanly(env, model, hooks, error)
    assert names(hooks.entries) == ["session_started", "session_failed"]


def test_default_cancellation_reason_does_not_claim_sibling_failure() -> None:
    token = CancellationToken()
    token.cancel()
    error = fail(RuntimeDriver(single_env_spec(), CountingEnv(), EchoModel()), RouteCancelledError, token)
    assert error.reason == "cancelled by caller" and "sibling" not in str(error)


def test_observation_emitted_always_carries_transformed_payload() -> None:
    class Marker(RecordingHooks):
        async def transform_observation(self, event):
            return b"\xab" + event.observation

    env, model, hooks = CountingEnv(terminal_after=2), EchoModel(), Marker()
    run(RuntimeDriver(single_env_spec(), env, model, hooks))
    emitted = [event.observation for event in hooks.named("observation_emitted")]
    assert emitted == [b"\xab\x01", b"\xab\x01"]  # the reset and the first step; never the terminal one
    assert model.observations() == [b"\xab\x01", b"\xab\x01"]


def test_shutdown_enforces_service_close_timeout_on_hung_model() -> None:
    class HungClose(EchoModel):
        async def close_route(self, request, timeout):
            await asyncio.Event().wait()
            self.closed = True

    env, model = CountingEnv(), HungClose()
    spec = single_env_spec(limits=RuntimeLimits(service_close_timeout=0.05))

    async def bounded():
        return await asyncio.wait_for(RuntimeDriver(spec, env, model).run(), 5)

    report = asyncio.run(bounded())
    assert report.total_episodes == 1
    assert model.closed is False and env.closed is True


def test_next_step_vector_env_follows_the_worked_example() -> None:
    # docs/design/runtime.md#route-state, the worked example: 4 lanes, episodes of 2/3/2/4 steps,
    # NEXT_STEP, max_episodes=8.
    env, model, hooks = ScriptedVectorEnv([2, 3, 2, 4], NEXT_STEP), EchoModel(), RecordingHooks()
    report = run(RuntimeDriver(vector_spec(4, NEXT_STEP, max_episodes=8), env, model, hooks))
    assert (report.total_steps, report.total_episodes) == (8, 9)
    assert len(env.reset_requests) == 1 and len(model.requests) == report.total_steps
    slot_steps = [
        ["0r" if slot.reset else str(slot.step) for slot in request.context.slots]
        for request in model.requests
    ]
    assert slot_steps == [
        ["0r", "0r", "0r", "0r"],
        ["1", "1", "1", "1"],
        ["2", "2", "2", "2"],
        ["0r", "3", "0r", "3"],
        ["1", "0r", "1", "4"],
        ["2", "1", "2", "0r"],
        ["0r", "2", "0r", "1"],
        ["1", "3", "1", "2"],
    ]
    started = [(e.episode_id, e.episode_record_id, e.env_index) for e in hooks.named("episode_started")]
    assert started == [
        ("ep-0-0", "ep-000001", 0),
        ("ep-1-0", "ep-000002", 1),
        ("ep-2-0", "ep-000003", 2),
        ("ep-3-0", "ep-000004", 3),
        ("ep-0-1", "ep-000005", 0),
        ("ep-2-1", "ep-000006", 2),
        ("ep-1-1", "ep-000007", 1),
        ("ep-3-1", "ep-000008", 3),
        ("ep-0-2", "ep-000009", 0),
        ("ep-2-2", "ep-000010", 2),
        ("ep-1-2", "ep-000011", 1),
    ]
    assert all(e.started_from_auto_reset for e in hooks.named("episode_started")[4:])
    assert [(e.episode_id, e.env_index) for e in hooks.named("episode_completed")] == [
        ("ep-0-0", 0),
        ("ep-2-0", 2),
        ("ep-1-0", 1),
        ("ep-3-0", 3),
        ("ep-0-1", 0),
        ("ep-2-1", 2),
        ("ep-1-1", 1),
        ("ep-0-2", 0),
        ("ep-2-2", 2),
    ]
    assert model.requests[-1].context.request_id == "session-vec:route-vec:step_observation:000008"
    assert model.close_requests[0].context.request_id == "session-vec:route-vec:close_route:000009"
    # Lane-0-centric single-valued fields, all lanes in the list fields.
    step_events = hooks.named("step_completed")
    assert [e.step for e in step_events] == [1, 2, 3, 1, 2, 3, 1, 2]
    assert step_events[2].episode_ids == ["ep-0-0", "ep-1-0", "ep-2-0", "ep-3-0"]  # before the rolls
    assert step_events[2].episode_id == "ep-0-0"


def test_next_step_hook_order_of_a_non_final_step() -> None:
    log: list = []
    env, hooks = ScriptedVectorEnv([2, 3], NEXT_STEP, log), RecordingHooks(log)
    run(RuntimeDriver(vector_spec(2, NEXT_STEP, max_episodes=3), env, EchoModel(log), hooks))
    third_step = log[log.index(("env.step", 3)) - 3 : log.index(("env.step", 4)) - 3]
    assert names(third_step) == [
        "model.predict",
        "transform_action",
        "action_received",
        "env.step",
        "step_completed",
        "episode_started",  # lane 0 rolled
        "episode_completed",  # lane 1 completed
        "transform_observation",
        "observation_emitted",
    ]


# -- autoreset paths (extensions) -----------------------------------------------------------------


def test_disabled_vector_resets_only_completed_lanes_with_aligned_seeds() -> None:
    log: list = []
    env, model, hooks = ScriptedVectorEnv([1, 2, 3], DISABLED, log), EchoModel(log), RecordingHooks(log)
    spec = vector_spec(3, DISABLED, base_seed=7, max_episodes=5)
    report = run(RuntimeDriver(spec, env, model, hooks))
    assert (report.total_steps, report.total_episodes) == (3, 5)

    def seeds(generation, lanes):
        return [reset_seed(7, "session-vec", "route-vec", generation, lane) for lane in lanes]

    assert env.reset_requests == [
        (seeds(0, [0, 1, 2]), []),  # cold, whole vector
        (seeds(1, [0]), [0]),  # step 1: lane 0 done
        (seeds(2, [0, 1]), [0, 1]),  # step 2: lanes 0 and 1 done
    ]
    slots = [[(s.episode_id, s.step, s.reset) for s in r.context.slots] for r in model.requests]
    assert slots == [
        [("ep-0-0", 0, True), ("ep-1-0", 0, True), ("ep-2-0", 0, True)],
        [("ep-0-1", 0, True), ("ep-1-0", 1, False), ("ep-2-0", 1, False)],
        [("ep-0-2", 0, True), ("ep-1-1", 0, True), ("ep-2-0", 2, False)],
    ]
    assert [r.context.request_id.rsplit(":", 2)[1] for r in model.requests] == ["reset_observation"] * 3
    assert all(event.is_reset for event in hooks.named("observation_emitted"))
    # Order on a DISABLED step with lanes done: completions, then the reset, then its starts.
    second = log[log.index(("env.step", 2)) :]
    assert names(second)[:7] == [
        "env.step",
        "step_completed",
        "episode_completed",
        "episode_completed",
        "env.reset",
        "episode_started",
        "episode_started",
    ]
    assert [e.started_from_auto_reset for e in hooks.named("episode_started")] == [False] * 3 + [True] * 3
    assert not any(entry[0] == "log" for entry in log[log.index(("env.step", 1)) :])


def test_disabled_vector_resets_the_whole_vector_when_every_lane_is_done() -> None:
    env, model = ScriptedVectorEnv([1, 1], DISABLED), EchoModel()
    run(RuntimeDriver(vector_spec(2, DISABLED, base_seed=11, max_episodes=4), env, model))
    assert env.reset_requests == [
        ([reset_seed(11, "session-vec", "route-vec", 0, lane) for lane in (0, 1)], []),
        ([reset_seed(11, "session-vec", "route-vec", 1, lane) for lane in (0, 1)], []),
    ]
    assert [(s.episode_id, s.step, s.reset) for s in model.requests[1].context.slots] == [
        ("ep-0-1", 0, True),
        ("ep-1-1", 0, True),
    ]


def test_disabled_without_base_seed_sends_no_seeds() -> None:
    env = ScriptedVectorEnv([1, 2], DISABLED)
    run(RuntimeDriver(vector_spec(2, DISABLED, max_episodes=2), env, EchoModel()))
    assert env.reset_requests == [([], []), ([], [0])]


def test_duplicate_completions_count_but_reset_a_lane_once() -> None:
    class DrainingEnv(CountingEnv):
        async def step(self, request):
            stepped = await super().step(request)
            stepped.response.completed_episodes.add(episode_id="interrupted", env_index=0)
            return stepped

    env, hooks = DrainingEnv(), RecordingHooks()
    report = run(RuntimeDriver(single_env_spec(max_episodes=3, base_seed=5), env, EchoModel(), hooks))
    assert (report.total_steps, report.total_episodes) == (2, 4)
    assert [list(r.env_indices) for r in env.reset_requests] == [[], []]  # one whole-vector reset
    unknown = [e for e in hooks.named("episode_completed") if e.episode_id == "interrupted"]
    assert [(e.episode_record_id, e.episode_index) for e in unknown] == [("", 0), ("", 0)]


def test_disabled_does_not_reset_a_lane_for_an_episode_interrupted_earlier() -> None:
    class LeftoverEnv(ScriptedVectorEnv):
        """Reports, on its first step, an episode of lane 1 interrupted in an earlier session."""

        async def step(self, request):
            stepped = await super().step(request)
            if self.steps == 1:
                stale = env_pb2.EpisodeMetadata(episode_id="earlier-session", env_index=1, truncated=True)
                stepped.response.completed_episodes.insert(0, stale)
            return stepped

    env, model, hooks = LeftoverEnv([3, 5], DISABLED), EchoModel(), RecordingHooks()
    report = run(RuntimeDriver(vector_spec(2, DISABLED, max_episodes=3), env, model, hooks))
    # upstream would also reset lane 1 after step 1, dropping its fresh episode
    assert env.reset_requests == [([], []), ([], [0])]
    assert (report.total_steps, report.total_episodes) == (5, 3)  # the stale entry still counts
    assert [e.episode_id for e in hooks.named("episode_completed")] == ["earlier-session", "ep-0-0", "ep-1-0"]
    # after step 1 the model gets the step observation, not a reset one
    assert [(s.episode_id, s.step, s.reset) for s in model.requests[1].context.slots] == [
        ("ep-0-0", 1, False),
        ("ep-1-0", 1, False),
    ]
    assert ":step_observation:" in model.requests[1].context.request_id


def test_disabled_rejects_a_completed_episode_on_a_lane_out_of_range() -> None:
    class OutOfRange(ScriptedVectorEnv):
        async def step(self, request):
            stepped = await super().step(request)
            for metadata in stepped.response.completed_episodes:
                metadata.env_index = 7
            return stepped

    env, model, hooks = OutOfRange([1, 2], DISABLED), EchoModel(), RecordingHooks()
    error = fail(RuntimeDriver(vector_spec(2, DISABLED, max_episodes=5), env, model, hooks), ProtocolError)
    assert str(error) == (
        "protocol error: env.step reported completed episode 'ep-0-0' on env_index 7; "
        "expected an env_index in 0..1 (num_envs=2)"
    )
    assert len(env.reset_requests) == 1 and env.closed
    assert [e.reason for e in hooks.named("session_failed")] == [str(error)]


def test_same_step_is_observational_and_starts_before_it_completes() -> None:
    log: list = []
    env, model, hooks = ScriptedVectorEnv([1, 2], SAME_STEP, log), EchoModel(log), RecordingHooks(log)
    report = run(RuntimeDriver(vector_spec(2, SAME_STEP, max_episodes=3), env, model, hooks))
    assert (report.total_steps, report.total_episodes) == (2, 3)
    assert len(env.reset_requests) == 1
    first_step = log[log.index(("env.step", 1)) :]
    assert names(first_step)[:4] == ["env.step", "step_completed", "episode_started", "episode_completed"]
    assert (first_step[2][1].episode_id, first_step[3][1].episode_id) == ("ep-0-1", "ep-0-0")
    assert [(s.episode_id, s.step, s.reset) for s in model.requests[1].context.slots] == [
        ("ep-0-1", 0, True),
        ("ep-1-0", 1, False),
    ]
    assert model.requests[1].context.request_id.endswith(":step_observation:000002")


# -- request_stop (extension) ----------------------------------------------------------------------


def test_request_stop_from_a_hook_ends_normally_after_the_step() -> None:
    class StopAtThree(RecordingHooks):
        async def step_completed(self, event):
            await super().step_completed(event)
            if event.step == 3:
                driver.request_stop("quota reached")
                driver.request_stop("second reason is ignored")

    env, model, hooks = CountingEnv(terminal_after=10), EchoModel(), StopAtThree()
    driver = RuntimeDriver(single_env_spec(max_episodes=None), env, model, hooks)
    report = run(driver)
    assert (report.total_steps, report.total_episodes, report.reason) == (3, 0, "quota reached")
    assert names(hooks.entries)[-3:] == ["telemetry_window", "telemetry_summary", "session_ended"]
    assert hooks.named("session_ended")[0].reason == "quota reached"
    assert model.close_requests[0].reason == "quota reached" and env.closed
    assert len(model.requests) == 3


def test_request_stop_before_run_ends_after_the_cold_reset() -> None:
    env, model, hooks = CountingEnv(), EchoModel(), RecordingHooks()
    driver = RuntimeDriver(single_env_spec(), env, model, hooks)
    driver.request_stop()
    report = run(driver)
    assert (report.total_steps, report.reason) == (0, "stop requested")
    assert not model.requests and env.closed and model.closed
    assert "telemetry_summary" not in names(hooks.entries) and "telemetry_window" not in names(hooks.entries)
    assert names(hooks.entries)[-1] == "session_ended"


def test_request_stop_checks_its_reason() -> None:
    with pytest.raises(TypeError, match="reason must be a str; got int"):
        RuntimeDriver(single_env_spec(), CountingEnv(), EchoModel()).request_stop(3)  # type: ignore[arg-type]


# -- failures ----------------------------------------------------------------------------------------


def test_invalid_spec_fails_before_anything_runs() -> None:
    env, model, hooks = CountingEnv(), EchoModel(), RecordingHooks()
    error = fail(RuntimeDriver(single_env_spec(session_id=" "), env, model, hooks), InvalidSpecError)
    assert str(error) == "invalid runtime session spec: runtime session_id must not be empty"
    assert not hooks.entries and not env.closed and not model.closed and not env.reset_requests


def test_model_returning_the_wrong_context_fails_the_route() -> None:
    class WrongContext(EchoModel):
        async def predict(self, request):
            prediction = await super().predict(request)
            prediction.response.context.slots[0].step += 1
            return prediction

    env, model, hooks = CountingEnv(), WrongContext(), RecordingHooks()
    error = fail(RuntimeDriver(single_env_spec(), env, model, hooks), ModelRouteMismatchError)
    assert str(error) == (
        "model endpoint model-1 returned mismatched route identity for request "
        "session-1:route-1:reset_observation:000001"
    )
    assert (error.component_id, error.request_id) == ("model-1", "session-1:route-1:reset_observation:000001")
    assert not env.step_requests
    assert_failed_cleanly(env, model, hooks, error)
    assert model.close_requests[0].context.request_id == "session-1:route-1:close_route:000002"


def test_model_returning_no_context_fails_the_route() -> None:
    class NoContext(EchoModel):
        async def predict(self, request):
            return RuntimeModelPrediction(model_pb2.PredictResponse(action=value(b"\x00")))

    error = fail(RuntimeDriver(single_env_spec(), CountingEnv(), NoContext()), ModelRouteMismatchError)
    assert error.request_id == "session-1:route-1:reset_observation:000001"


@pytest.mark.parametrize("field", ["request_id", "slot"])
def test_model_mutating_the_request_context_and_echoing_it_fails_the_route(field) -> None:
    class Mutating(EchoModel):
        async def predict(self, request):
            if field == "request_id":
                request.context.request_id = "rewritten"
            else:
                request.context.slots[0].step += 5
            return await super().predict(request)  # echoes the mutated request.context

    env, model, hooks = CountingEnv(), Mutating(), RecordingHooks()
    error = fail(RuntimeDriver(single_env_spec(), env, model, hooks), ModelRouteMismatchError)
    assert error.request_id == "session-1:route-1:reset_observation:000001"
    assert not env.step_requests
    assert_failed_cleanly(env, model, hooks, error)


def test_an_echo_equal_to_the_sent_context_passes_even_if_the_request_was_mutated() -> None:
    class MutatesAfterCopy(EchoModel):
        async def predict(self, request):
            sent = model_pb2.PredictContext()
            sent.CopyFrom(request.context)
            request.context.request_id = "scribbled"
            prediction = await super().predict(request)
            prediction.response.context.CopyFrom(sent)
            return prediction

    report = run(RuntimeDriver(single_env_spec(), CountingEnv(), MutatesAfterCopy()))
    assert report.total_episodes == 1


def test_env_exceptions_are_wrapped_with_their_cause() -> None:
    class Broken(CountingEnv):
        async def step(self, request):
            raise ValueError("physics exploded")

    env, model, hooks = Broken(), EchoModel(), RecordingHooks()
    error = fail(RuntimeDriver(single_env_spec(), env, model, hooks), EnvRpcError)
    assert (error.operation, error.step, error.message) == ("step", 1, "physics exploded")
    assert isinstance(error.__cause__, ValueError)
    assert_failed_cleanly(env, model, hooks, error)


def test_env_rpc_errors_pass_through_unchanged() -> None:
    original = EnvRpcError("reset", 0, "refused", recoverable=True)

    class Refusing(CountingEnv):
        async def reset(self, request):
            raise original

    assert fail(RuntimeDriver(single_env_spec(), Refusing(), EchoModel()), EnvRpcError) is original


def test_model_exceptions_are_wrapped_with_their_cause() -> None:
    class Broken(EchoModel):
        async def predict(self, request):
            raise RuntimeError("cuda out of memory")

    env, model, hooks = CountingEnv(), Broken(), RecordingHooks()
    error = fail(RuntimeDriver(single_env_spec(), env, model, hooks), ModelRpcError)
    assert str(error) == "model endpoint model-1 request failed: cuda out of memory"
    assert isinstance(error.__cause__, RuntimeError)
    assert_failed_cleanly(env, model, hooks, error)


def test_synchronous_raise_from_a_plain_function_is_wrapped_too() -> None:
    class SyncRaise(CountingEnv):
        def step(self, request):  # not async: raises before returning an awaitable
            raise OSError("pipe closed")

    error = fail(RuntimeDriver(single_env_spec(), SyncRaise(), EchoModel()), EnvRpcError)
    assert (error.operation, error.message) == ("step", "pipe closed")


def test_wrong_result_types_are_protocol_errors() -> None:
    class WrongWrapper(CountingEnv):
        async def step(self, request):
            return env_pb2.StepResponse()

    class WrongResponse(CountingEnv):
        async def step(self, request):
            return RuntimeEnvStep(env_pb2.ResetResponse())

    class NotAwaitable(CountingEnv):
        def step(self, request):
            return RuntimeEnvStep(env_pb2.StepResponse())

    env, model, hooks = WrongWrapper(), EchoModel(), RecordingHooks()
    error = fail(RuntimeDriver(single_env_spec(), env, model, hooks), ProtocolError)
    assert str(error) == "protocol error: env.step returned StepResponse; expected RuntimeEnvStep"
    assert_failed_cleanly(env, model, hooks, error)
    error = fail(RuntimeDriver(single_env_spec(), WrongResponse(), EchoModel()), ProtocolError)
    assert str(error) == (
        "protocol error: env.step returned a RuntimeEnvStep whose response is ResetResponse; "
        "expected StepResponse"
    )
    error = fail(RuntimeDriver(single_env_spec(), NotAwaitable(), EchoModel()), ProtocolError)
    assert "env.step must be a coroutine function (async def) or return an awaitable" in str(error)


def test_best_effort_hook_failures_are_logged_and_ignored(caplog) -> None:
    class Noisy(RuntimeHooks):
        pass

    async def boom(self, event):
        raise HookError(f"{type(event).__name__} hook broke")

    for method in (
        "session_started",
        "episode_started",
        "episode_completed",
        "action_received",
        "step_completed",
        "observation_emitted",
        "telemetry_window",
        "telemetry_summary",
        "session_ended",
        "log",
    ):
        setattr(Noisy, method, boom)
    env, model = CountingEnv(), EchoModel()
    with caplog.at_level(logging.WARNING, logger="rlmesh_gym.runtime"):
        report = run(RuntimeDriver(single_env_spec(), env, model, Noisy()))
    assert report.total_episodes == 1 and env.closed and model.closed
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert messages == [
        "runtime hook session_started failed: SessionStartedEvent hook broke",
        "runtime hook log failed: LogEvent hook broke",
        "runtime hook episode_started failed: EpisodeStartedEvent hook broke",
        "runtime hook observation_emitted failed: ObservationEmittedEvent hook broke",
        "runtime hook action_received failed: ActionReceivedEvent hook broke",
        "runtime hook step_completed failed: StepCompletedEvent hook broke",
        "runtime hook episode_completed failed: EpisodeCompletedEvent hook broke",
        "runtime hook telemetry_window failed: TelemetryWindowEvent hook broke",
        "runtime hook telemetry_summary failed: TelemetrySummaryEvent hook broke",
        "runtime hook session_ended failed: SessionEndedEvent hook broke",
    ]


def test_a_failing_session_failed_hook_is_logged_once(caplog) -> None:
    class Both(RuntimeHooks):
        def __init__(self):
            self.calls = 0

        async def session_failed(self, event):
            self.calls += 1
            raise HookError("cannot report")

    class Broken(CountingEnv):
        async def reset(self, request):
            raise ValueError("no")

    hooks = Both()
    with caplog.at_level(logging.WARNING, logger="rlmesh_gym.runtime"):
        fail(RuntimeDriver(single_env_spec(), Broken(), EchoModel(), hooks), EnvRpcError)
    assert hooks.calls == 1
    assert [r.getMessage() for r in caplog.records] == ["runtime hook session_failed failed: cannot report"]


def test_close_failures_and_timeouts_are_logged_not_raised(caplog) -> None:
    class BadClose(CountingEnv):
        async def close(self, timeout):
            raise OSError("already gone")

    class HangingClose(EchoModel):
        async def close_route(self, request, timeout):
            await asyncio.sleep(3600)

    spec = single_env_spec(limits=RuntimeLimits(service_close_timeout=0.01))
    with caplog.at_level(logging.WARNING, logger="rlmesh_gym.runtime"):
        report = run(RuntimeDriver(spec, BadClose(), HangingClose()))
    assert report.total_episodes == 1
    messages = sorted(r.getMessage() for r in caplog.records)
    assert messages == [
        "environment close failed during route shutdown: already gone",
        "model route close timed out during route shutdown; relying on owner shutdown "
        "(timeout_ms=10, reason=completed requested episodes)",
    ]


def test_hung_env_close_is_abandoned_after_the_close_timeout(caplog) -> None:
    class HungEnvClose(CountingEnv):
        async def close(self, timeout):
            await asyncio.Event().wait()

    env, model = HungEnvClose(), EchoModel()
    spec = single_env_spec(limits=RuntimeLimits(service_close_timeout=0.02))
    with caplog.at_level(logging.WARNING, logger="rlmesh_gym.runtime"):
        run(RuntimeDriver(spec, env, model))
    assert model.closed and not env.closed
    assert [r.getMessage() for r in caplog.records] == [
        "environment close timed out during route shutdown; abandoning close (timeout_ms=20)"
    ]


def test_close_env_on_end_false_leaves_the_env_to_its_owner() -> None:
    env, model = CountingEnv(), EchoModel()
    run(RuntimeDriver(single_env_spec(close_env_on_end=False), env, model))
    assert model.closed and not env.closed


def test_duck_typed_peers_without_close_methods() -> None:
    class Env:
        reset = CountingEnv.reset
        step = CountingEnv.step

        def __init__(self):
            CountingEnv.__init__(self)

    class Model:
        predict = EchoModel.predict

        def __init__(self):
            EchoModel.__init__(self)

    assert run(RuntimeDriver(single_env_spec(), Env(), Model())).total_episodes == 1


def test_constructor_checks_its_arguments() -> None:
    with pytest.raises(TypeError, match="spec must be a RuntimeSessionSpec; got dict"):
        RuntimeDriver({}, CountingEnv(), EchoModel())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="env must implement reset/step .*; object has no reset, step"):
        RuntimeDriver(single_env_spec(), object(), EchoModel())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="model must implement predict"):
        RuntimeDriver(single_env_spec(), CountingEnv(), CountingEnv())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="hooks must be RuntimeHooks objects"):
        RuntimeDriver(single_env_spec(), CountingEnv(), EchoModel(), hooks=[1])  # type: ignore[list-item]


def test_a_driver_runs_once() -> None:
    driver = RuntimeDriver(single_env_spec(), CountingEnv(), EchoModel())
    run(driver)
    with pytest.raises(RuntimeError, match="already ran"):
        run(driver)


def test_run_with_cancellation_checks_its_arguments() -> None:
    driver = RuntimeDriver(single_env_spec(), CountingEnv(), EchoModel())
    with pytest.raises(TypeError, match="cancellation must be a CancellationToken; got str"):
        asyncio.run(driver.run_with_cancellation("now"))  # type: ignore[arg-type]


# -- cancellation and timeouts --------------------------------------------------------------------


def test_cancellation_mid_predict() -> None:
    token = CancellationToken()
    blocker = Blocker()

    class CancelledWhileWaiting(EchoModel):
        async def predict(self, request):
            if len(self.requests) == 2:
                asyncio.get_running_loop().call_soon(token.cancel)
                await blocker.wait()
            return await super().predict(request)

    env, model, hooks = CountingEnv(terminal_after=10), CancelledWhileWaiting(), RecordingHooks()
    driver = RuntimeDriver(single_env_spec(), env, model, hooks)
    error = fail(driver, RouteCancelledError, token, "ctrl-c")
    assert (error.step, error.reason) == (2, "ctrl-c")
    assert blocker.cancellations == 1  # the in-flight predict was cancelled
    assert len(env.step_requests) == 2
    assert_failed_cleanly(env, model, hooks, error)


def test_cancellation_mid_step() -> None:
    token = CancellationToken()

    class CancelledWhileStepping(CountingEnv):
        async def step(self, request):
            if self.count == 1:
                asyncio.get_running_loop().call_later(0.001, token.cancel)
                await asyncio.sleep(3600)
            return await super().step(request)

    env, model, hooks = CancelledWhileStepping(terminal_after=10), EchoModel(), RecordingHooks()
    error = fail(RuntimeDriver(single_env_spec(), env, model, hooks), RouteCancelledError, token)
    assert error.step == 2  # lane 0's step before predict (1) + 1
    assert len(model.requests) == 2
    assert_failed_cleanly(env, model, hooks, error)


def test_cancellation_wins_when_it_is_ready_with_the_result() -> None:
    token = CancellationToken()

    class CancelsAndAnswers(EchoModel):
        async def predict(self, request):
            token.cancel()
            return await super().predict(request)

    env, model = CountingEnv(), CancelsAndAnswers()
    error = fail(RuntimeDriver(single_env_spec(), env, model), RouteCancelledError, token)
    assert error.step == 0 and not env.step_requests


def test_cancellation_noticed_at_the_top_of_the_loop() -> None:
    token = CancellationToken()

    class CancelOnObservation(RuntimeHooks):
        async def observation_emitted(self, event):
            if event.step == 1:
                token.cancel()

    env, model = CountingEnv(terminal_after=5), EchoModel()
    error = fail(
        RuntimeDriver(single_env_spec(), env, model, CancelOnObservation()), RouteCancelledError, token
    )
    assert error.step == 1 and len(model.requests) == 1


def test_env_step_and_reset_timeouts() -> None:
    class HangingStep(CountingEnv):
        async def step(self, request):
            await asyncio.sleep(3600)

    class HangingReset(CountingEnv):
        async def reset(self, request):
            await asyncio.sleep(3600)

    env, model, hooks = HangingStep(), EchoModel(), RecordingHooks()
    spec = single_env_spec(limits=RuntimeLimits(env_step_timeout=0.001))
    error = fail(RuntimeDriver(spec, env, model, hooks), OperationTimeoutError)
    assert str(error) == "env.step timed out on route route-1 component env-1 at runtime step 1 after 1ms"
    assert_failed_cleanly(env, model, hooks, error)
    spec = single_env_spec(limits=RuntimeLimits(env_reset_timeout=0.0015))
    error = fail(RuntimeDriver(spec, HangingReset(), EchoModel()), OperationTimeoutError)
    assert str(error) == "env.reset timed out on route route-1 component env-1 at runtime step 0 after 1.5ms"


def test_timeout_values_are_sent_in_requests() -> None:
    env = CountingEnv()
    spec = single_env_spec(limits=RuntimeLimits(env_reset_timeout=1.5, env_step_timeout=0.25))
    run(RuntimeDriver(spec, env, EchoModel()))
    assert env.reset_requests[0].timeout_ms == 1500 and env.step_requests[0].timeout_ms == 250
    assert not env.reset_requests[0].HasField("options") and not env.step_requests[0].env_indices


def test_disabled_reset_timeout_reports_lane_zero_step() -> None:
    class SlowSecondReset(ScriptedVectorEnv):
        async def reset(self, request):
            if self.reset_requests:
                await asyncio.sleep(3600)
            return await super().reset(request)

    env = SlowSecondReset([3, 2], DISABLED)
    # A zero limit: the first reset, already done when awaited, passes however busy the machine is
    # (a 2 ms limit could expire before the loop came back to it); the second has to wait and fails.
    spec = vector_spec(2, DISABLED, limits=RuntimeLimits(env_reset_timeout=0))
    error = fail(RuntimeDriver(spec, env, EchoModel()), OperationTimeoutError)
    assert (error.operation, error.step) == ("env.reset", 2)


def test_zero_timeouts_let_operations_that_are_already_done_succeed() -> None:
    zero = RuntimeLimits(
        env_reset_timeout=0, model_predict_timeout=0, env_step_timeout=0, service_close_timeout=0
    )
    env, model = CountingEnv(terminal_after=3), EchoModel()
    report = run(RuntimeDriver(single_env_spec(limits=zero), env, model))
    assert report.total_steps == 3 and env.closed and model.closed


def test_zero_timeout_fails_an_operation_that_has_to_wait() -> None:
    class YieldsOnce(EchoModel):
        async def predict(self, request):
            await asyncio.sleep(0)
            return await super().predict(request)

    error = fail(
        RuntimeDriver(
            single_env_spec(limits=RuntimeLimits(model_predict_timeout=0)), CountingEnv(), YieldsOnce()
        ),
        OperationTimeoutError,
    )
    assert str(error).endswith("after 0ns")


def test_operations_that_wait_within_their_limit_succeed() -> None:
    class Sleepy(EchoModel):
        async def predict(self, request):
            await asyncio.sleep(0)
            await asyncio.sleep(0.001)
            return await super().predict(request)

    token = CancellationToken()
    report = run(RuntimeDriver(single_env_spec(), CountingEnv(terminal_after=2), Sleepy()), token)
    assert report.total_steps == 2


def test_a_timed_out_operation_is_cancelled_and_unwinds_before_the_timeout_is_reported() -> None:
    events = []

    class SlowToStop(EchoModel):
        async def predict(self, request):
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                events.append("cancelled")
                await asyncio.sleep(0.01)  # cleanup that awaits, as asyncio.timeout lets it
                events.append("cleaned up")
                raise

    class Hooks(RecordingHooks):
        async def session_failed(self, event):
            events.append("session_failed")

    spec = single_env_spec(limits=RuntimeLimits(model_predict_timeout=0.001))
    with pytest.raises(OperationTimeoutError) as caught:
        asyncio.run(RuntimeDriver(spec, CountingEnv(), SlowToStop(), Hooks()).run())
    assert caught.value.operation == "model.predict"
    assert events == ["cancelled", "cleaned up", "session_failed"]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.timeout is new in Python 3.11")
def test_operations_run_in_the_driver_task() -> None:
    seen = []

    class TaskAware(EchoModel):
        async def predict(self, request):
            seen.append(asyncio.current_task())
            async with asyncio.timeout(10):  # captures the current task
                await asyncio.sleep(0)
            seen.append(asyncio.current_task())
            return await super().predict(request)

    async def scenario():
        task = asyncio.current_task()
        await RuntimeDriver(single_env_spec(), CountingEnv(), TaskAware()).run()
        assert seen == [task, task]

    asyncio.run(scenario())


def test_cancelling_the_driver_task_still_closes_and_reports() -> None:
    env, hooks = CountingEnv(terminal_after=10), RecordingHooks()
    blocker = Blocker()

    class Hanging(EchoModel):
        async def predict(self, request):
            if self.requests:
                await blocker.wait()
            return await super().predict(request)

    model = Hanging()

    async def scenario():
        task = asyncio.create_task(RuntimeDriver(single_env_spec(), env, model, hooks).run())
        while not model.requests or len(env.step_requests) < 1:
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert blocker.cancellations == 1 and env.closed and model.closed
    (failed,) = hooks.named("session_failed")
    assert failed.reason == "runtime driver task was cancelled"


def test_a_second_cancellation_during_the_failure_closes_still_reports_session_failed() -> None:
    env, hooks = CountingEnv(terminal_after=10), RecordingHooks()
    close_blocker = Blocker()

    class HangsEverywhere(EchoModel):
        async def predict(self, request):
            self.requests.append(request)
            await asyncio.sleep(3600)

        async def close_route(self, request, timeout):
            self.close_requests.append(request)
            await close_blocker.wait()

    model = HangsEverywhere()

    async def scenario():
        task = asyncio.create_task(RuntimeDriver(single_env_spec(), env, model, hooks).run())
        while not model.requests:
            await asyncio.sleep(0.001)
        task.cancel()
        while not model.close_requests:
            await asyncio.sleep(0.001)
        task.cancel()  # a second Ctrl+C while the failure path closes
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    assert close_blocker.cancellations == 1 and env.closed
    assert [e.reason for e in hooks.named("session_failed")] == ["runtime driver task was cancelled"]
    assert names(hooks.entries)[-1] == "session_failed"


def test_token_cancelled_from_another_thread() -> None:
    import threading

    token = CancellationToken()

    class Hang(EchoModel):
        async def predict(self, request):
            threading.Timer(0.005, token.cancel).start()
            await asyncio.sleep(3600)

    error = fail(RuntimeDriver(single_env_spec(), CountingEnv(), Hang()), RouteCancelledError, token)
    assert error.step == 0


# -- hooks on the hot path -------------------------------------------------------------------------


def test_events_nobody_listens_to_are_never_built(monkeypatch) -> None:
    import rlmesh_gym.runtime.driver as driver_module

    def forbidden(*args, **kwargs):
        raise AssertionError("an event nobody listens to was built")

    for event in (
        "ActionReceivedEvent",
        "ObservationEmittedEvent",
        "LazyStepCompletedEvent",
        "EpisodeStartedEvent",
        "LazyEpisodeCompletedEvent",
        "SessionStartedEvent",
        "SessionEndedEvent",
        "LogEvent",
    ):
        monkeypatch.setattr(driver_module, event, forbidden)

    class OnlyFailure(RuntimeHooks):
        async def session_failed(self, event):
            pass

    report = run(
        RuntimeDriver(
            vector_spec(3, NEXT_STEP, max_episodes=4),
            ScriptedVectorEnv([1, 2, 3], NEXT_STEP),
            EchoModel(),
            OnlyFailure(),
        )
    )
    assert report.total_episodes == 4


def test_telemetry_windows_with_a_zero_window() -> None:
    env, hooks = CountingEnv(terminal_after=3), RecordingHooks()
    run(RuntimeDriver(single_env_spec(limits=RuntimeLimits(telemetry_window=0)), env, EchoModel(), hooks))
    windows = hooks.named("telemetry_window")
    assert [w.sample_count for w in windows] == [1, 1, 1]  # one per step; the final flush is empty
    names_log = names(hooks.entries)
    assert names_log.index("telemetry_window") == names_log.index("step_completed") + 1
    assert hooks.named("telemetry_summary")[0].sample_count == 3


def test_operation_telemetry_reaches_the_windows() -> None:
    from rlmesh_gym.proto import core_pb2
    from rlmesh_gym.runtime import RuntimeEnvReset

    class Reporting(CountingEnv):
        async def reset(self, request):
            reset = await super().reset(request)
            telemetry = core_pb2.OperationTelemetry(operation="env.reset")
            telemetry.metrics.add(name="server.total", duration_ns=3_000_000)
            return RuntimeEnvReset(reset.response, telemetry)

    hooks = RecordingHooks()
    run(RuntimeDriver(single_env_spec(), Reporting(), EchoModel(), hooks))
    (window,) = hooks.named("telemetry_window")
    assert ("env.reset", "env-1", "server.total", 1, 3.0) in [
        (t.operation, t.component_id, t.name, t.sample_count, t.avg_ms) for t in window.timings
    ]
    assert window.request_bytes_per_second > 0 and window.response_bytes_per_second > 0


def test_transform_action_replaces_the_action_sent_to_the_env() -> None:
    class Doubler(RuntimeHooks):
        async def transform_action(self, event):
            return event.action * 2 + b"\x07"

    class DropObservation(RuntimeHooks):
        async def transform_observation(self, event):
            return None

    env, model, recorder = CountingEnv(), EchoModel(), RecordingHooks()
    run(RuntimeDriver(single_env_spec(), env, model, [Doubler(), DropObservation(), recorder]))
    assert env.step_requests[0].action.bytes.data == b"\x00\x00\x07"
    assert recorder.named("action_received")[0].action == b"\x00\x00\x07"
    assert not model.requests[0].HasField("observation")
    assert recorder.named("observation_emitted")[0].observation is None


def test_absent_payloads_stay_absent() -> None:
    class Empty(CountingEnv):
        async def reset(self, request):
            reset = await super().reset(request)
            reset.response.ClearField("observation")
            return reset

    class NoAction(EchoModel):
        async def predict(self, request):
            prediction = await super().predict(request)
            prediction.response.action.ClearField("bytes")  # a SpaceValue without bytes
            return prediction

    env, model = Empty(), NoAction()
    run(RuntimeDriver(single_env_spec(), env, model))
    assert not model.requests[0].HasField("observation")
    assert not env.step_requests[0].HasField("action")


def test_plain_awaitables_such_as_futures_are_accepted() -> None:
    class FutureEnv(CountingEnv):
        def step(self, request):  # returns a Task, not a coroutine
            return asyncio.ensure_future(CountingEnv.step(self, request))

    token = CancellationToken()
    report = run(RuntimeDriver(single_env_spec(), FutureEnv(terminal_after=2), EchoModel()), token)
    assert report.total_steps == 2


def test_failure_shutdown_closes_env_and_model_concurrently() -> None:
    # Each close can only finish once the other has started: a sequential shutdown would leave
    # both unfinished (each abandoned at the close timeout).
    events: dict[str, asyncio.Event] = {}

    class Env(CountingEnv):
        async def step(self, request):
            raise ValueError("broken")

        async def close(self, timeout):
            events["env_started"].set()
            await events["model_started"].wait()
            await super().close(timeout)

    class Model(EchoModel):
        async def close_route(self, request, timeout):
            events["model_started"].set()
            await events["env_started"].wait()
            await super().close_route(request, timeout)

    env, model, hooks = Env(), Model(), RecordingHooks()

    async def scenario():
        events.update(env_started=asyncio.Event(), model_started=asyncio.Event())
        spec = single_env_spec(limits=RuntimeLimits(service_close_timeout=0.5))
        with pytest.raises(EnvRpcError) as caught:
            await RuntimeDriver(spec, env, model, hooks).run()
        return caught.value

    error = asyncio.run(scenario())
    assert_failed_cleanly(env, model, hooks, error)


def test_failure_shutdown_is_bounded_when_both_closes_hang() -> None:
    class Env(CountingEnv):
        async def reset(self, request):
            raise ValueError("no reset")

        async def close(self, timeout):
            await asyncio.sleep(3600)

    class Model(EchoModel):
        async def close_route(self, request, timeout):
            await asyncio.sleep(3600)

    hooks = RecordingHooks()
    spec = single_env_spec(limits=RuntimeLimits(service_close_timeout=0.01))
    error = fail(RuntimeDriver(spec, Env(), Model(), hooks), EnvRpcError)
    assert (error.operation, error.step) == ("reset", 0)
    assert [event.reason for event in hooks.named("session_failed")] == [str(error)]
