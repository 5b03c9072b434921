"""The runtime driver: one route's reset -> predict -> step loop (port of ``rlmesh-runtime`` rc.1).

::

    spec = RuntimeSessionSpec(session_id="s", route_id="r", env_contract=env.contract,
                              num_envs=env.num_envs, max_episodes=10)
    report = asyncio.run(RuntimeDriver(spec, env, model, hooks=[MyHooks()]).run())

Control flow, event order, ids, seeds, counters and error texts follow the seed
(runtime.md §1 and §7). What this port adds or decides where the seed is silent:

* **Validation** accepts SAME_STEP and vectorised DISABLED/UNSPECIFIED (see
  :mod:`rlmesh_gym.runtime.spec`). SAME_STEP runs on the observational path like NEXT_STEP;
  DISABLED resets exactly the lanes that completed their current episode (``env_indices`` +
  aligned seeds), or the whole vector when every lane did; a completed episode that is not
  its lane's current one (interrupted earlier) resets nothing, and an ``env_index`` out of
  range is a :class:`~rlmesh_gym.runtime.errors.ProtocolError`.
* **Operations** (``env.reset``, ``env.step``, ``model.predict``) start eagerly in the
  driver's task and are raced against their limit and the cancellation token only if they
  suspend (:mod:`rlmesh_gym.runtime._guard`). Cancellation wins a tie with completion; a
  completed operation wins a tie with its deadline. A timed-out or cancelled operation is
  cancelled and abandoned, never waited for. A cancellation of the driver's task is raised
  inside a suspended operation as with a plain ``await`` (its own ``asyncio.timeout`` works).
* **Exceptions** an env or model raises that are not
  :class:`~rlmesh_gym.runtime.errors.RuntimeDriverError` are wrapped as
  :class:`~rlmesh_gym.runtime.errors.EnvRpcError` (operation ``reset``/``step``, the step of
  the guard) or :class:`~rlmesh_gym.runtime.errors.ModelRpcError` (the model component id),
  with the original as ``__cause__`` (a ``CancelledError`` the env or model raises by itself
  too, on every Python version). A result of the wrong type is a
  :class:`~rlmesh_gym.runtime.errors.ProtocolError`.
* :meth:`RuntimeDriver.request_stop` ends the run the **normal** way (final window,
  summary, close, ``session_ended`` with the given reason, a report) after the current step's
  completions; the seed can only end normally through ``max_episodes``.
* If the task running the driver is itself cancelled, the failure shutdown (close both
  endpoints, ``session_failed``) still runs before the ``CancelledError`` propagates;
  ``session_failed`` fires even if a second cancellation cuts the closes short.
* The echoed predict context is compared with the context as sent (its bytes, taken before
  ``predict``), so a model that mutates ``request.context`` and echoes it is caught.
* Hooks a hooks object does not override are never called, and events nobody listens to are
  never built; telemetry series are only kept if some hook listens to telemetry.
"""

from __future__ import annotations

import asyncio
import logging
import math
import types
from collections.abc import Callable, Sequence
from time import perf_counter_ns
from typing import Any

from rlmesh_gym.proto import env_pb2, model_pb2, spaces_pb2
from rlmesh_gym.runtime import _guard
from rlmesh_gym.runtime.cancellation import CancellationToken
from rlmesh_gym.runtime.errors import (
    EnvRpcError,
    ModelRouteMismatchError,
    ModelRpcError,
    OperationTimeoutError,
    ProtocolError,
    RouteCancelledError,
    RuntimeDriverError,
)
from rlmesh_gym.runtime.events import (
    ActionReceivedEvent,
    EpisodeCompletedEvent,
    EpisodeStartedEvent,
    LogEvent,
    LogLevel,
    ObservationEmittedEvent,
    SessionEndedEvent,
    SessionFailedEvent,
    SessionStartedEvent,
    StepCompletedEvent,
)
from rlmesh_gym.runtime.hooks import HookTable, RuntimeHooks
from rlmesh_gym.runtime.seams import (
    RuntimeEnv,
    RuntimeEnvReset,
    RuntimeEnvStep,
    RuntimeModel,
    RuntimeModelPrediction,
)
from rlmesh_gym.runtime.seeds import ResetSeeds
from rlmesh_gym.runtime.spec import COMPLETED_REQUESTED_EPISODES, RuntimeReport, RuntimeSessionSpec
from rlmesh_gym.runtime.state import RequestPhase, RouteState, StartedEpisode
from rlmesh_gym.runtime.telemetry import RuntimeTiming

__all__ = ["DEFAULT_CANCELLATION_REASON", "DEFAULT_STOP_REASON", "RuntimeDriver"]

DEFAULT_CANCELLATION_REASON = "cancelled by caller"
"""The reason of a cancellation when the caller gives none."""

DEFAULT_STOP_REASON = "stop requested"
"""The reason of :meth:`RuntimeDriver.request_stop` when the caller gives none."""

_log = logging.getLogger("rlmesh_gym.runtime")
_CoroutineType = types.CoroutineType
_ResetRequest = env_pb2.ResetRequest
_StepRequest = env_pb2.StepRequest
_PredictRequest = model_pb2.PredictRequest
_STEP_OBSERVATION = RequestPhase.STEP_OBSERVATION.value
_RESET_OBSERVATION = RequestPhase.RESET_OBSERVATION.value
_OBSERVATIONAL_MODES = (env_pb2.AUTORESET_MODE_NEXT_STEP, env_pb2.AUTORESET_MODE_SAME_STEP)


def _reason_of(error: BaseException) -> str:
    if isinstance(error, asyncio.CancelledError):
        return str(error) or "runtime driver task was cancelled"
    return str(error) or type(error).__name__


def _expect(result: object, wrapper: type, response_type: type, operation: str) -> None:
    if not isinstance(result, wrapper):
        raise ProtocolError(f"{operation} returned {type(result).__name__}; expected {wrapper.__name__}")
    response = result.response  # type: ignore[attr-defined]
    if not isinstance(response, response_type):
        raise ProtocolError(
            f"{operation} returned a {wrapper.__name__} whose response is {type(response).__name__}; "
            f"expected {response_type.__name__}"
        )


class _Suspended:
    """An operation that suspended on its first run: its iterator and what it yielded."""

    __slots__ = ("running", "yielded")

    def __init__(self, running: Any, yielded: Any) -> None:
        self.running = running
        self.yielded = yielded


def _plain_request(state: RouteState, value: Any, phase: str) -> tuple[model_pb2.PredictRequest, bytes]:
    """The next predict request for the observation ``value`` (a ``SpaceValue``), no hooks,
    and its context's serialized bytes."""
    request = _PredictRequest()
    context = state.fill_context(request.context, phase)
    if value.HasField("bytes"):
        request.observation.bytes.CopyFrom(value.bytes)
    return request, context


class RuntimeDriver:
    """Drives one route: an env and a model, under a session spec, reporting to hooks.

    ``hooks`` is a :class:`~rlmesh_gym.runtime.hooks.RuntimeHooks`, a sequence of them
    (called in order), or ``None``. A driver runs once.
    """

    def __init__(
        self,
        spec: RuntimeSessionSpec,
        env: RuntimeEnv,
        model: RuntimeModel,
        hooks: RuntimeHooks | Sequence[RuntimeHooks] | None = None,
    ) -> None:
        if not isinstance(spec, RuntimeSessionSpec):
            raise TypeError(f"spec must be a RuntimeSessionSpec; got {type(spec).__name__}")
        for name, peer, methods in (("env", env, ("reset", "step")), ("model", model, ("predict",))):
            missing = [method for method in methods if not callable(getattr(peer, method, None))]
            if missing:
                raise TypeError(
                    f"{name} must implement {'/'.join(methods)} (the Runtime{name.capitalize()} "
                    f"protocol); {type(peer).__name__} has no {', '.join(missing)}"
                )
        self.spec = spec
        self.env = env
        self.model = model
        self._hooks = HookTable(hooks)
        self._cancellation_reason = DEFAULT_CANCELLATION_REASON
        self._stop_reason: str | None = None
        self._token: CancellationToken | None = None
        self._ran = False
        self._closed = False
        self._failed_reported = False
        self._timing: RuntimeTiming | None = None

    # -- entry points -------------------------------------------------------------------------

    def request_stop(self, reason: str = DEFAULT_STOP_REASON) -> None:
        """End the run normally once the current step's completions are processed.

        The run then flushes telemetry, closes the route (and env), fires ``session_ended``
        with ``reason`` and returns its report. Safe to call from a hook or another task; the
        first reason given wins. It does not interrupt an operation in flight; to abort, use a
        :class:`CancellationToken`.
        """
        if not isinstance(reason, str):
            raise TypeError(f"reason must be a str; got {type(reason).__name__}")
        if self._stop_reason is None:
            self._stop_reason = reason

    async def run(self) -> RuntimeReport:
        """Run the session with no cancellation."""
        return await self.run_with_cancellation_reason(None, DEFAULT_CANCELLATION_REASON)

    async def run_with_cancellation(self, cancellation: CancellationToken) -> RuntimeReport:
        """Run the session until it ends, fails, or ``cancellation`` fires."""
        return await self.run_with_cancellation_reason(cancellation, DEFAULT_CANCELLATION_REASON)

    async def run_with_cancellation_reason(
        self, cancellation: CancellationToken | None, reason: str
    ) -> RuntimeReport:
        """Run the session, attributing a cancellation of ``cancellation`` to ``reason``.

        Returns the report of a normal end. Raises
        :class:`~rlmesh_gym.runtime.errors.InvalidSpecError` before anything runs if the spec
        is invalid; any later error first closes model route and env (each bounded by
        ``limits.service_close_timeout``), fires ``session_failed`` once, then propagates.
        """
        if cancellation is not None and not isinstance(cancellation, CancellationToken):
            raise TypeError(f"cancellation must be a CancellationToken; got {type(cancellation).__name__}")
        if not isinstance(reason, str):
            raise TypeError(f"reason must be a str; got {type(reason).__name__}")
        if self._ran:
            raise RuntimeError("this RuntimeDriver already ran; build a new one for each session")
        self._ran = True
        self._cancellation_reason = reason
        self._token = cancellation
        self.spec.validate()
        state = RouteState.from_spec(self.spec)
        try:
            return await self._run_loop(state)
        except (Exception, asyncio.CancelledError) as error:
            await self._shutdown_after_failure(state, error)
            raise

    @property
    def timing(self) -> RuntimeTiming | None:
        """The run's timing accumulators (``None`` before it starts).

        Its phase timers (``reset``, ``model_wait``, ``env_step``) count every completed
        operation and its total, min and max nanoseconds, whether or not a hook listens to
        telemetry.
        """
        return self._timing

    # -- the loop -----------------------------------------------------------------------------

    def _prepare(self) -> None:
        spec = self.spec
        hooks = self._hooks
        limits = spec.limits
        self._session_id = spec.session_id
        self._route_id = spec.route_id
        self._env_component_id = spec.env_component_id
        self._model_component_id = spec.model_component_id
        self._route = spec.route_context()
        # Shared into every event, as upstream's Arc'd copies.
        self._action_space = spaces_pb2.SpaceSpec()
        self._action_space.CopyFrom(spec.env_contract.action_space)
        self._observation_space = spaces_pb2.SpaceSpec()
        self._observation_space.CopyFrom(spec.env_contract.observation_space)
        self._seeds = (
            ResetSeeds(spec.base_seed, spec.session_id, spec.route_id) if spec.base_seed is not None else None
        )
        self._reset_timeout_ms = limits.env_reset_timeout_ms()
        self._step_timeout_ms = limits.env_step_timeout_ms()
        self._window_ns = (
            round(limits.telemetry_window * 1e9) if limits.telemetry_window != math.inf else None
        )
        listeners = hooks.listeners
        self._on_episode_started = listeners("episode_started")
        self._on_episode_completed = listeners("episode_completed")
        self._on_action = bool(listeners("transform_action") or listeners("action_received"))
        self._on_observation = bool(listeners("transform_observation") or listeners("observation_emitted"))
        self._on_step_completed = listeners("step_completed")
        self._on_window = listeners("telemetry_window")
        self._on_summary = listeners("telemetry_summary")
        self._telemetry_on = bool(self._on_window or self._on_summary)

    def _seeds_for(self, generation: int, env_indices: Sequence[int]) -> list[int]:
        return self._seeds.seeds(generation, env_indices) if self._seeds is not None else []

    async def _run_loop(self, state: RouteState) -> RuntimeReport:
        self._prepare()
        spec = self.spec
        limits = spec.limits
        hooks = self._hooks
        env = self.env
        model = self.model
        session_id = self._session_id
        route = self._route
        env_component_id = self._env_component_id
        num_envs = spec.num_envs
        max_episodes = spec.max_episodes
        observational = spec.env_contract.autoreset_mode in _OBSERVATIONAL_MODES
        telemetry_on = self._telemetry_on
        guarded = self._guarded
        begin = self._begin
        predict_timeout = limits.model_predict_timeout
        step_timeout = limits.env_step_timeout
        step_timeout_ms = self._step_timeout_ms

        timing = self._timing = RuntimeTiming(env_component_id, self._model_component_id, perf_counter_ns())
        if hooks.listeners("session_started"):
            await hooks.fire("session_started", SessionStartedEvent(session_id, route, spec.env_id))

        # Cold reset.
        generation = 0
        started_ns = perf_counter_ns()
        reset = await guarded(
            env.reset,
            _ResetRequest(seeds=self._seeds_for(0, range(num_envs)), timeout_ms=self._reset_timeout_ms),
            started_ns,
            limits.env_reset_timeout,
            "env.reset",
            0,
        )
        reset_ns = perf_counter_ns() - started_ns
        _expect(reset, RuntimeEnvReset, env_pb2.ResetResponse, "env.reset")
        timing.reset.record(reset_ns)
        if telemetry_on:
            timing.record_operation_telemetry(env_component_id, reset.telemetry)
        reset_response = reset.response
        if hooks.listeners("log"):
            ready = sum(1 for episode_id in reset_response.episode_ids if episode_id)
            message = f"env reset complete in {reset_ns / 1e6:.0f}ms ({ready} episode(s) ready)"
            await hooks.fire("log", LogEvent(session_id, route, LogLevel.INFO, message, "runtime"))
        await self._started(state.start_episodes(reset_response.episode_ids, False))
        request, context_bytes = await self._emit_observation(
            state, reset_response.observation, _RESET_OBSERVATION, True
        )

        while True:
            token = self._token
            if token is not None and token.cancelled:
                raise RouteCancelledError(self._route_id, state.step, self._cancellation_reason)
            if self._stop_reason is not None:
                return await self._end(state, self._stop_reason)

            # Predict.
            predict_step = state.step
            started_ns = perf_counter_ns()
            prediction = begin(model.predict, request, "model.predict", predict_step)
            if type(prediction) is _Suspended:
                prediction = await self._finish(
                    prediction, started_ns, predict_timeout, "model.predict", predict_step
                )
            if (
                type(prediction) is not RuntimeModelPrediction
                or type(prediction.response) is not model_pb2.PredictResponse
            ):
                _expect(prediction, RuntimeModelPrediction, model_pb2.PredictResponse, "model.predict")
            response = prediction.response
            # Serializing the echo and comparing bytes is cheaper than comparing messages; the
            # message comparison decides only if the bytes differ. It compares against the
            # context as sent (its bytes), never `request.context`: the model may have
            # mutated that in place.
            echoed = response.context
            if echoed.SerializeToString() != context_bytes:
                self._check_echo(echoed, context_bytes)
            model_ns = perf_counter_ns() - started_ns
            timing.model_wait.record(model_ns)
            if telemetry_on:
                timing.record_operation_telemetry(self._model_component_id, prediction.telemetry)

            # Action.
            action_step = predict_step + 1
            request_bytes = 0
            action_value = response.action
            if self._on_action:
                step_request = _StepRequest(timeout_ms=step_timeout_ms)
                request_bytes = await self._emit_action(state, action_value, action_step, step_request)
            elif action_value.HasField("bytes"):
                # The SpaceValue holds nothing but its bytes, so copying it whole is the seed's
                # SpaceValue{bytes} rebuild in one C call.
                step_request = _StepRequest(action=action_value, timeout_ms=step_timeout_ms)
                if telemetry_on:
                    request_bytes = len(action_value.bytes.data)
            else:
                step_request = _StepRequest(timeout_ms=step_timeout_ms)

            # Step.
            started_ns = perf_counter_ns()
            stepped = begin(env.step, step_request, "env.step", action_step)
            if type(stepped) is _Suspended:
                stepped = await self._finish(stepped, started_ns, step_timeout, "env.step", action_step)
            env_ns = perf_counter_ns() - started_ns
            if type(stepped) is not RuntimeEnvStep or type(stepped.response) is not env_pb2.StepResponse:
                _expect(stepped, RuntimeEnvStep, env_pb2.StepResponse, "env.step")
            step_response = stepped.response
            timing.env_step.record(env_ns)
            if telemetry_on:
                timing.record_operation_telemetry(env_component_id, stepped.telemetry)
                observation = step_response.observation
                response_bytes = len(observation.bytes.data) if observation.HasField("bytes") else 0
                if step_response.HasField("infos"):
                    response_bytes += step_response.infos.ByteSize()
                timing.record_step(model_ns, env_ns, request_bytes, response_bytes)
            state.record_step()
            if self._on_step_completed:
                await hooks.fire(
                    "step_completed",
                    StepCompletedEvent(
                        session_id,
                        route,
                        state.episode_id,
                        state.episode_record_id,
                        state.step,
                        0,
                        list(step_response.rewards),
                        step_response,
                        state.episode_ids(),
                        state.episode_record_ids(),
                    ),
                )
            if telemetry_on and self._window_ns is not None:
                now_ns = perf_counter_ns()
                if timing.window_due(now_ns, self._window_ns):
                    window = timing.flush_window(session_id, route, now_ns)
                    if window is not None and self._on_window:
                        await hooks.fire("telemetry_window", window)

            # Episodes.
            if step_response.episode_ids:
                started = state.observe_episode_ids(step_response.episode_ids)
                if started:
                    await self._started(started)
            completed = step_response.completed_episodes
            if completed:
                await self._completed(state, completed)
                if max_episodes is not None and state.total_episodes >= max_episodes:
                    return await self._end(state, COMPLETED_REQUESTED_EPISODES)
            if self._stop_reason is not None:
                return await self._end(state, self._stop_reason)

            # Next observation: the step's, unless DISABLED lanes finished their current episode.
            if observational or not completed or not (done_lanes := self._done_lanes(state, completed)):
                if self._on_observation:
                    request, context_bytes = await self._emit_observation(
                        state, step_response.observation, _STEP_OBSERVATION, False
                    )
                else:
                    request, context_bytes = _plain_request(
                        state, step_response.observation, _STEP_OBSERVATION
                    )
                continue
            generation += 1
            whole_vector = len(done_lanes) == num_envs
            if whole_vector:
                reset_request = _ResetRequest(
                    seeds=self._seeds_for(generation, range(num_envs)), timeout_ms=self._reset_timeout_ms
                )
            else:
                reset_request = _ResetRequest(
                    seeds=self._seeds_for(generation, done_lanes),
                    timeout_ms=self._reset_timeout_ms,
                    env_indices=done_lanes,
                )
            started_ns = perf_counter_ns()
            reset = await guarded(
                env.reset, reset_request, started_ns, limits.env_reset_timeout, "env.reset", state.step
            )
            reset_ns = perf_counter_ns() - started_ns
            _expect(reset, RuntimeEnvReset, env_pb2.ResetResponse, "env.reset")
            timing.reset.record(reset_ns)
            if telemetry_on:
                timing.record_operation_telemetry(env_component_id, reset.telemetry)
            reset_response = reset.response
            if whole_vector:
                started = state.start_episodes(reset_response.episode_ids, True)
            else:
                started = state.observe_episode_ids(reset_response.episode_ids)
            await self._started(started)
            request, context_bytes = await self._emit_observation(
                state, reset_response.observation, _RESET_OBSERVATION, True
            )

    # -- guarded operations -------------------------------------------------------------------

    async def _guarded(
        self,
        function: Callable[[Any], Any],
        request: object,
        started_ns: int,
        timeout: float,
        operation: str,
        step: int,
    ) -> Any:
        """``await function(request)`` under ``timeout`` and the token (see :mod:`._guard`)."""
        result = self._begin(function, request, operation, step)
        if type(result) is _Suspended:
            result = await self._finish(result, started_ns, timeout, operation, step)
        return result

    def _begin(self, function: Callable[[Any], Any], request: object, operation: str, step: int) -> Any:
        """Start ``function(request)`` in this task: its result if it did not suspend, else ``_Suspended``.

        A plain method rather than a coroutine: an in-process env or model never suspends, and
        this is called twice per step.
        """
        token = self._token
        try:
            if token is not None and token.cancelled:
                raise RouteCancelledError(self._route_id, step, self._cancellation_reason)
            awaitable = function(request)
            running = awaitable if type(awaitable) is _CoroutineType else _guard.start(awaitable, operation)
            try:
                yielded = running.send(None)
            except StopIteration as stop:
                if token is not None and token.cancelled:
                    raise RouteCancelledError(self._route_id, step, self._cancellation_reason) from None
                return stop.value
            return _Suspended(running, yielded)
        except RuntimeDriverError:
            raise
        except (Exception, asyncio.CancelledError) as error:
            # Nothing was awaited yet, so a CancelledError here is the operation's own, never
            # the task's cancellation.
            raise self._wrap(operation, step, error) from error

    async def _finish(
        self, suspended: _Suspended, started_ns: int, timeout: float, operation: str, step: int
    ) -> Any:
        """Race a suspended operation against its deadline and the token."""
        token = self._token
        try:
            loop = asyncio.get_running_loop()
            deadline = math.inf
            if timeout != math.inf:
                deadline = loop.time() + timeout - (perf_counter_ns() - started_ns) / 1e9
            outcome, result = await _guard.drive(suspended.running, suspended.yielded, deadline, token, loop)
            if outcome == _guard.DONE:
                return result
            if outcome == _guard.CANCELLED:
                raise RouteCancelledError(self._route_id, step, self._cancellation_reason)
            component = self._model_component_id if operation == "model.predict" else self._env_component_id
            raise OperationTimeoutError(self._route_id, component, operation, step, timeout)
        except RuntimeDriverError:
            raise
        except _guard.OperationCancelled as own:
            raise self._wrap(operation, step, own.error) from own.error
        except Exception as error:
            raise self._wrap(operation, step, error) from error
        # A CancelledError out of drive() is the task's own cancellation: it propagates.

    def _done_lanes(self, state: RouteState, completed: Sequence[env_pb2.EpisodeMetadata]) -> list[int]:
        """The lanes to reset under DISABLED: sorted, deduplicated ``env_index`` of the completed
        episodes that are their lane's current episode (not one interrupted earlier)."""
        num_envs = self.spec.num_envs
        current = state.episode_ids()
        lanes = set()
        for metadata in completed:
            lane = metadata.env_index
            if not 0 <= lane < num_envs:
                raise ProtocolError(
                    f"env.step reported completed episode {metadata.episode_id!r} on env_index {lane}; "
                    f"expected an env_index in 0..{num_envs - 1} (num_envs={num_envs})"
                )
            if metadata.episode_id == current[lane]:
                lanes.add(lane)
        return sorted(lanes)

    def _check_echo(self, echoed: model_pb2.PredictContext, context_bytes: bytes) -> None:
        """Raise ``ModelRouteMismatchError`` unless ``echoed`` is the context sent (``context_bytes``)."""
        expected = model_pb2.PredictContext.FromString(context_bytes)
        if echoed != expected:
            raise ModelRouteMismatchError(self._model_component_id, expected.request_id)

    def _wrap(self, operation: str, step: int, error: BaseException) -> RuntimeDriverError:
        if operation == "model.predict":
            return ModelRpcError.wrap(self._model_component_id, error)
        return EnvRpcError.wrap(operation.removeprefix("env."), step, error)

    # -- events -------------------------------------------------------------------------------

    async def _started(self, started: list[StartedEpisode]) -> None:
        if not self._on_episode_started:
            return
        for episode in started:
            record = episode.record
            await self._hooks.fire(
                "episode_started",
                EpisodeStartedEvent(
                    self._session_id,
                    self._route,
                    episode.episode_id,
                    record.record_id,
                    record.index,
                    record.env_index,
                    record.started_from_auto_reset,
                ),
            )

    async def _completed(self, state: RouteState, completed: Sequence[env_pb2.EpisodeMetadata]) -> None:
        listening = bool(self._on_episode_completed)
        for metadata in completed:
            record = state.complete_episode(metadata.episode_id)
            if listening:
                await self._hooks.fire(
                    "episode_completed",
                    EpisodeCompletedEvent(
                        self._session_id,
                        self._route,
                        metadata.episode_id,
                        record.record_id if record is not None else "",
                        record.index if record is not None else 0,
                        metadata.env_index,
                        metadata.step_count,
                        metadata.cumulative_reward,
                        metadata.terminated,
                        metadata.truncated,
                        metadata.duration_ms,
                        metadata.final_info if metadata.HasField("final_info") else None,
                        metadata,
                    ),
                )

    async def _emit_action(
        self, state: RouteState, action_value: Any, action_step: int, step_request: env_pb2.StepRequest
    ) -> int:
        """Run the action hooks; put the (transformed) action in ``step_request``; its size."""
        event = ActionReceivedEvent(
            self._session_id,
            self._route,
            state.episode_id,
            state.episode_record_id,
            state.episode_ids(),
            state.episode_record_ids(),
            action_step,
            0,
            self._action_space,
            action_value.bytes.data if action_value.HasField("bytes") else None,
        )
        hooks = self._hooks
        if hooks.listeners("transform_action"):
            await hooks.transform("transform_action", event)
        if event.action is not None:
            step_request.action.bytes.data = event.action
        await hooks.fire("action_received", event)
        return len(event.action) if event.action is not None else 0

    async def _emit_observation(
        self, state: RouteState, value: Any, phase: str, is_reset: bool
    ) -> tuple[model_pb2.PredictRequest, bytes]:
        """The next predict request, after the observation hooks saw (and transformed) it, and
        its context's serialized bytes."""
        if not self._on_observation:
            return _plain_request(state, value, phase)
        request = _PredictRequest()
        context_bytes = state.fill_context(request.context, phase)
        event = ObservationEmittedEvent(
            self._session_id,
            self._route,
            state.episode_id,
            state.episode_record_id,
            state.episode_ids(),
            state.episode_record_ids(),
            state.step,
            0,
            is_reset,
            self.spec.num_envs,
            self._observation_space,
            value.bytes.data if value.HasField("bytes") else None,
        )
        hooks = self._hooks
        if hooks.listeners("transform_observation"):
            await hooks.transform("transform_observation", event)
        if event.observation is not None:
            request.observation.bytes.data = event.observation
        await hooks.fire("observation_emitted", event)
        return request, context_bytes

    # -- endings ------------------------------------------------------------------------------

    async def _end(self, state: RouteState, reason: str) -> RuntimeReport:
        """The normal end (runtime.md §7.4)."""
        hooks = self._hooks
        timing = self._timing
        if self._telemetry_on:
            now_ns = perf_counter_ns()
            window = timing.flush_window(self._session_id, self._route, now_ns)
            if window is not None and self._on_window:
                await hooks.fire("telemetry_window", window)
            summary = timing.summary(self._session_id, self._route, now_ns)
            if summary is not None and self._on_summary:
                await hooks.fire("telemetry_summary", summary)
        await self._shutdown_terminal_route(state, reason, state.close_route_request(reason))
        if hooks.listeners("session_ended"):
            await hooks.fire(
                "session_ended",
                SessionEndedEvent(
                    self._session_id, self._route, reason, state.total_steps, state.total_episodes
                ),
            )
        _log.info(timing.summary_log_line(state.total_steps, state.total_episodes))
        return RuntimeReport(
            self.spec.session_id, self.spec.route_id, state.total_steps, state.total_episodes, reason
        )

    async def _shutdown_after_failure(self, state: RouteState, error: BaseException) -> None:
        """The failure path (runtime.md §7.3): close, then ``session_failed`` exactly once.

        If the task is cancelled (again) during the closes, ``session_failed`` still fires,
        then that cancellation propagates.
        """
        if self._failed_reported:
            return
        self._failed_reported = True
        reason = _reason_of(error)
        try:
            if not self._closed:
                await self._shutdown_terminal_route(state, reason, state.close_route_request(reason))
        finally:
            await self._hooks.fire(
                "session_failed", SessionFailedEvent(self.spec.session_id, self.spec.route_context(), reason)
            )

    async def _shutdown_terminal_route(
        self, state: RouteState, reason: str, request: model_pb2.CloseRouteRequest
    ) -> None:
        """Close the model route and (if owned) the env, concurrently, each bounded; never raises."""
        self._closed = True
        timeout = self.spec.limits.service_close_timeout
        closes = [self._close_model(request, timeout, reason)]
        if self.spec.close_env_on_end:
            closes.append(self._close_env(timeout))
        else:
            _log.debug(
                "skipping environment close for route %s (%s); endpoint remains owned by the run",
                state.route_id,
                reason,
            )
        await asyncio.gather(*closes)

    async def _close_env(self, timeout: float) -> None:
        close = getattr(self.env, "close", None)
        if close is None:
            return
        try:
            outcome = await _guard.call_bounded(close, timeout, timeout=timeout)
        except Exception as err:
            _log.warning("environment close failed during route shutdown: %s", err)
            return
        if outcome == _guard.TIMED_OUT:
            _log.warning(
                "environment close timed out during route shutdown; abandoning close (timeout_ms=%d)",
                round(timeout * 1000) if timeout != math.inf else -1,
            )

    async def _close_model(self, request: model_pb2.CloseRouteRequest, timeout: float, reason: str) -> None:
        close_route = getattr(self.model, "close_route", None)
        if close_route is None:
            return
        try:
            outcome = await _guard.call_bounded(close_route, request, timeout, timeout=timeout)
        except Exception as err:
            _log.warning(
                "model route close failed during route shutdown; relying on owner shutdown "
                "(error=%s, reason=%s)",
                err,
                reason,
            )
            return
        if outcome == _guard.TIMED_OUT:
            _log.warning(
                "model route close timed out during route shutdown; relying on owner shutdown "
                "(timeout_ms=%d, reason=%s)",
                round(timeout * 1000) if timeout != math.inf else -1,
                reason,
            )
