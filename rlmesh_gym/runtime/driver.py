"""The runtime driver: one route's reset -> predict -> step loop (port of upstream rlmesh-runtime 0.1.0-rc.1).

::

    spec = RuntimeSessionSpec(session_id="s", route_id="r", env_contract=env.contract,
                              num_envs=env.num_envs, max_episodes=10)
    report = asyncio.run(RuntimeDriver(spec, env, model, hooks=[MyHooks()]).run())

Control flow, event order, ids, seeds, counters and error texts follow upstream rlmesh-runtime
0.1.0-rc.1 (docs/design/runtime.md#event-order and #normal-end-and-failure). What this port
adds or decides where upstream is silent:

* **Validation** accepts SAME_STEP and vectorised DISABLED/UNSPECIFIED (see
  :mod:`rlmesh_gym.runtime.spec`). SAME_STEP runs on the observational path like NEXT_STEP;
  DISABLED resets exactly the lanes that completed their current episode (``env_indices`` +
  aligned seeds), or the whole vector when every lane did; a completed episode that is not
  its lane's current one (interrupted earlier) resets nothing, and an ``env_index`` out of
  range is a :class:`~rlmesh_gym.runtime.errors.ProtocolError`.
* **One loop on the array form** of the seams (:mod:`rlmesh_gym.runtime.seams`): in-process
  peers are called as ``reset_arrays``/``step_arrays``/``predict_arrays``; message-form peers
  through the ports of :mod:`rlmesh_gym.runtime.message_form`, which build upstream's requests
  (with its ``timeout_ms``) and check the echoed context. No protobuf message is built on the
  in-process path unless a hook reads one.
* **Operations** (``env.reset``, ``env.step``, ``model.predict``) start eagerly in the
  driver's task and are raced against their limit and the cancellation token only if they
  suspend (:mod:`rlmesh_gym.runtime._guard`). Cancellation wins a tie with completion; a
  completed operation wins a tie with its deadline. An operation that finished without
  suspending but took longer than its (positive) limit is refused as that timeout. A
  timed-out or cancelled operation is cancelled and abandoned, never waited for. A
  cancellation of the driver's task is raised inside a suspended operation as with a plain
  ``await`` (its own ``asyncio.timeout`` works).
* **Exceptions** an env or model raises that are not
  :class:`~rlmesh_gym.runtime.errors.RuntimeDriverError` are wrapped as
  :class:`~rlmesh_gym.runtime.errors.EnvRpcError` (operation ``reset``/``step``, the step of
  the guard) or :class:`~rlmesh_gym.runtime.errors.ModelRpcError` (the model component id),
  with the original as ``__cause__`` (a ``CancelledError`` the env or model raises by itself
  too, on every Python version). A result of the wrong type is a
  :class:`~rlmesh_gym.runtime.errors.ProtocolError`.
* :meth:`RuntimeDriver.request_stop` ends the run the **normal** way (final window,
  summary, close, ``session_ended`` with the given reason, a report) after the current step's
  completions; upstream can only end normally through ``max_episodes``.
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
from functools import partial
from time import perf_counter_ns
from typing import Any, cast

from rlmesh_gym.proto import model_pb2, spaces_pb2
from rlmesh_gym.runtime import _guard
from rlmesh_gym.runtime.autoreset import AutoresetMode
from rlmesh_gym.runtime.cancellation import CancellationToken
from rlmesh_gym.runtime.errors import (
    EnvRpcError,
    ModelRpcError,
    OperationTimeoutError,
    ProtocolError,
    RouteCancelledError,
    RuntimeDriverError,
)
from rlmesh_gym.runtime.events import (
    ActionReceivedEvent,
    EpisodeStartedEvent,
    LazyEpisodeCompletedEvent,
    LazyStepCompletedEvent,
    LogEvent,
    LogLevel,
    ObservationEmittedEvent,
    SessionEndedEvent,
    SessionFailedEvent,
    SessionStartedEvent,
)
from rlmesh_gym.runtime.hooks import HookTable, RuntimeHooks
from rlmesh_gym.runtime.message_form import (
    MessageEnvPort,
    MessageModelPort,
    episode_metadata,
    final_info_message,
    meta_map,
    step_message,
)
from rlmesh_gym.runtime.seams import (
    ArrayPredictContext,
    ArrayRuntimeEnv,
    ArrayRuntimeModel,
    CompletedEpisode,
    EnvResetBatch,
    EnvStepBatch,
    ModelActionBatch,
    RuntimeEnv,
    RuntimeModel,
)
from rlmesh_gym.runtime.seeds import ResetSeeds
from rlmesh_gym.runtime.spec import COMPLETED_REQUESTED_EPISODES, RuntimeReport, RuntimeSessionSpec
from rlmesh_gym.runtime.state import RequestPhase, RouteState, StartedEpisode
from rlmesh_gym.runtime.telemetry import RuntimeTiming
from rlmesh_gym.spaces.batch import SpaceBatch
from rlmesh_gym.spaces.codec import CodecError, SpaceCodec
from rlmesh_gym.spaces.meta import MetaConversionError

__all__ = ["DEFAULT_CANCELLATION_REASON", "DEFAULT_STOP_REASON", "RuntimeDriver"]

DEFAULT_CANCELLATION_REASON = "cancelled by caller"
"""The reason of a cancellation when the caller gives none."""

DEFAULT_STOP_REASON = "stop requested"
"""The reason of :meth:`RuntimeDriver.request_stop` when the caller gives none."""

_log = logging.getLogger("rlmesh_gym.runtime")
_CoroutineType = types.CoroutineType
_STEP_OBSERVATION = RequestPhase.STEP_OBSERVATION.value
_RESET_OBSERVATION = RequestPhase.RESET_OBSERVATION.value


def _reason_of(error: BaseException) -> str:
    if isinstance(error, asyncio.CancelledError):
        return str(error) or "runtime driver task was cancelled"
    return str(error) or type(error).__name__


class _Suspended:
    """An operation that suspended on its first run: its iterator and what it yielded."""

    __slots__ = ("running", "yielded")

    def __init__(self, running: Any, yielded: Any) -> None:
        self.running = running
        self.yielded = yielded


_ENV_ARRAY_METHODS = ("reset_arrays", "step_arrays")
_MODEL_ARRAY_METHODS = ("predict_arrays",)


def _implements(peer: object, methods: tuple[str, ...]) -> bool:
    return all(callable(getattr(peer, method, None)) for method in methods)


def _codec_or_none(spec: spaces_pb2.SpaceSpec, name: str) -> SpaceCodec | None:
    """The codec of ``spec``, or ``None`` if it has none (then only message-form peers, which
    pass bytes through undecoded, can run; an array-form peer reports the decode failure)."""
    try:
        return SpaceCodec(spec, name=name)
    except (CodecError, ValueError):
        return None


def _payload_size(batch: SpaceBatch | None) -> int:
    return batch.nbytes if batch is not None else 0


def _step_size(step: EnvStepBatch) -> int:
    """The response bytes of a step as telemetry counts them: observation payload plus infos."""
    size = _payload_size(step.observation)
    if step.infos is not None:
        try:
            infos = meta_map(step.infos, "infos")
        except (MetaConversionError, TypeError, ValueError):
            infos = None  # infos the wire cannot carry count nothing in-process
        if infos is not None:
            size += infos.ByteSize()
    return size


class RuntimeDriver:
    """Drives one route: an env and a model, under a session spec, reporting to hooks.

    ``env`` and ``model`` are used in their array form when they have it
    (:class:`~rlmesh_gym.runtime.seams.ArrayRuntimeEnv` / ``ArrayRuntimeModel``: the
    in-process adapters), else in their message form (``RuntimeEnv`` / ``RuntimeModel``).
    ``hooks`` is a :class:`~rlmesh_gym.runtime.hooks.RuntimeHooks`, a sequence of them
    (called in order), or ``None``. A driver runs once.
    """

    def __init__(
        self,
        spec: RuntimeSessionSpec,
        env: RuntimeEnv | ArrayRuntimeEnv,
        model: RuntimeModel | ArrayRuntimeModel,
        hooks: RuntimeHooks | Sequence[RuntimeHooks] | None = None,
    ) -> None:
        if not isinstance(spec, RuntimeSessionSpec):
            raise TypeError(f"spec must be a RuntimeSessionSpec; got {type(spec).__name__}")
        # The array form is used when a peer has it (in-process adapters), else the message form.
        self._env_arrays = _implements(env, _ENV_ARRAY_METHODS)
        self._model_arrays = _implements(model, _MODEL_ARRAY_METHODS)
        for name, peer, methods, array_methods, arrays in (
            ("env", env, ("reset", "step"), _ENV_ARRAY_METHODS, self._env_arrays),
            ("model", model, ("predict",), _MODEL_ARRAY_METHODS, self._model_arrays),
        ):
            missing = [method for method in methods if not callable(getattr(peer, method, None))]
            if missing and not arrays:
                raise TypeError(
                    f"{name} must implement {'/'.join(methods)} (the Runtime{name.capitalize()} "
                    f"protocol) or {'/'.join(array_methods)} (ArrayRuntime{name.capitalize()}); "
                    f"{type(peer).__name__} has no {', '.join(missing)}"
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
        # The same object once a run started, typed for the code that only runs then.
        self._run_timing: RuntimeTiming

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
        contract = spec.env_contract
        self._session_id = spec.session_id
        self._route_id = spec.route_id
        self._env_component_id = spec.env_component_id
        self._model_component_id = spec.model_component_id
        self._route = spec.route_context()
        # Shared into every event, as upstream's Arc'd copies.
        self._action_space = spaces_pb2.SpaceSpec()
        self._action_space.CopyFrom(contract.action_space)
        self._observation_space = spaces_pb2.SpaceSpec()
        self._observation_space.CopyFrom(contract.observation_space)
        self._observation_codec = _codec_or_none(self._observation_space, "observation")
        self._action_codec = _codec_or_none(self._action_space, "action")
        self._seeds = (
            ResetSeeds(spec.base_seed, spec.session_id, spec.route_id) if spec.base_seed is not None else None
        )
        self._window_ns = (
            round(limits.telemetry_window * 1e9) if limits.telemetry_window != math.inf else None
        )
        self._observational = AutoresetMode.from_wire(contract.autoreset_mode).observational
        # The seams in array form: in-process adapters are used as they are, message-form peers
        # through their ports (the one place where the two forms convert).
        env, model = self.env, self.model
        if self._env_arrays:
            self._env_port: Any = env
        else:
            self._env_port = MessageEnvPort(
                cast(RuntimeEnv, env),
                self._observation_codec,
                spec.num_envs,
                limits.env_reset_timeout_ms(),
                limits.env_step_timeout_ms(),
            )
        if self._model_arrays:
            self._model_port: Any = model
        else:
            self._model_port = MessageModelPort(
                cast(RuntimeModel, model), self._action_codec, self._model_component_id
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
        """The session, phase by phase, in the order of docs/design/runtime.md#event-order."""
        self._prepare()
        timing = RuntimeTiming(self._env_component_id, self._model_component_id, perf_counter_ns())
        self._timing = self._run_timing = timing
        if self._hooks.listeners("session_started"):
            await self._hooks.fire(
                "session_started", SessionStartedEvent(self._session_id, self._route, self.spec.env_id)
            )
        max_episodes = self.spec.max_episodes
        observation, context = await self._cold_reset(state)
        while True:
            token = self._token
            if token is not None and token.cancelled:
                raise RouteCancelledError(self._route_id, state.step, self._cancellation_reason)
            if self._stop_reason is not None:
                return await self._end(state, self._stop_reason)
            actions, model_ns = await self._predict(state, observation, context)
            step = await self._step(state, actions, model_ns)
            completed = step.completed
            if completed or state.episode_ids_changed(step.episode_ids):
                await self._settle_episodes(state, step)
                if completed and max_episodes is not None and state.total_episodes >= max_episodes:
                    return await self._end(state, COMPLETED_REQUESTED_EPISODES)
            if self._stop_reason is not None:
                return await self._end(state, self._stop_reason)
            # Next observation: the step's, unless DISABLED lanes finished their current episode.
            if self._observational or not completed or not (done_lanes := self._done_lanes(state, completed)):
                if self._on_observation:
                    observation, context = await self._emit_observation(
                        state, step.observation, _STEP_OBSERVATION, False
                    )
                else:
                    observation, context = step.observation, state.predict_context(_STEP_OBSERVATION)
            else:
                observation, context = await self._reset_finished_lanes(state, done_lanes)

    # -- phases -------------------------------------------------------------------------------

    async def _cold_reset(self, state: RouteState) -> tuple[SpaceBatch | None, ArrayPredictContext]:
        """Reset every lane with the generation-0 seeds; the first observation and its context."""
        self._generation = 0
        reset = await self._reset(state, (), self._seeds_for(0, range(self.spec.num_envs)), 0)
        hooks = self._hooks
        if hooks.listeners("log"):
            ready = sum(1 for episode_id in reset.episode_ids if episode_id)
            reset_ms = self._run_timing.reset.total_ns / 1e6  # the only reset so far
            message = f"env reset complete in {reset_ms:.0f}ms ({ready} episode(s) ready)"
            await hooks.fire(
                "log", LogEvent(self._session_id, self._route, LogLevel.INFO, message, "runtime")
            )
        await self._started(state.start_episodes(reset.episode_ids, False))
        return await self._emit_observation(state, reset.observation, _RESET_OBSERVATION, True)

    async def _predict(
        self, state: RouteState, observation: SpaceBatch | None, context: ArrayPredictContext
    ) -> tuple[SpaceBatch | None, int]:
        """Ask the model for the next actions (after the action hooks): the actions and the model time."""
        step = state.step
        started_ns = perf_counter_ns()
        timeout = self.spec.limits.model_predict_timeout
        prediction = self._begin(
            self._model_port.predict_arrays,
            (observation, context),
            "model.predict",
            step,
            started_ns,
            timeout,
        )
        if type(prediction) is _Suspended:
            prediction = await self._finish(prediction, started_ns, timeout, "model.predict", step)
        if type(prediction) is not ModelActionBatch and not isinstance(prediction, ModelActionBatch):
            raise ProtocolError(
                f"model.predict_arrays returned {type(prediction).__name__}; expected ModelActionBatch"
            )
        model_ns = perf_counter_ns() - started_ns
        timing = self._run_timing
        timing.model_wait.record(model_ns)
        actions = prediction.action
        if self._telemetry_on:
            timing.record_operation_telemetry(self._model_component_id, prediction.telemetry)
        if self._on_action:
            actions = await self._emit_action(state, actions, step + 1)
        return actions, model_ns

    async def _step(self, state: RouteState, actions: SpaceBatch | None, model_ns: int) -> EnvStepBatch:
        """Step the env with ``actions``, record the step and fire ``step_completed``."""
        action_step = state.step + 1
        started_ns = perf_counter_ns()
        timeout = self.spec.limits.env_step_timeout
        stepped = self._begin(
            self._env_port.step_arrays, (actions,), "env.step", action_step, started_ns, timeout
        )
        if type(stepped) is _Suspended:
            stepped = await self._finish(stepped, started_ns, timeout, "env.step", action_step)
        env_ns = perf_counter_ns() - started_ns
        if type(stepped) is not EnvStepBatch and not isinstance(stepped, EnvStepBatch):
            raise ProtocolError(f"env.step_arrays returned {type(stepped).__name__}; expected EnvStepBatch")
        timing = self._run_timing
        timing.env_step.record(env_ns)
        if self._telemetry_on:
            timing.record_operation_telemetry(self._env_component_id, stepped.telemetry)
            timing.record_step(model_ns, env_ns, _payload_size(actions), _step_size(stepped))
        state.record_step()
        hooks = self._hooks
        if self._on_step_completed:
            await hooks.fire(
                "step_completed",
                LazyStepCompletedEvent(
                    self._session_id,
                    self._route,
                    state.episode_id,
                    state.episode_record_id,
                    state.step,
                    0,
                    stepped.rewards.tolist(),
                    None,
                    state.episode_ids(),
                    state.episode_record_ids(),
                    stepped,
                    build=partial(step_message, stepped),
                ),
            )
        if self._telemetry_on and self._window_ns is not None:
            now_ns = perf_counter_ns()
            if timing.window_due(now_ns, self._window_ns):
                window = timing.flush_window(self._session_id, self._route, now_ns)
                if window is not None and self._on_window:
                    await hooks.fire("telemetry_window", window)
        return stepped

    async def _settle_episodes(self, state: RouteState, step: EnvStepBatch) -> None:
        """Adopt the step's episode ids (``episode_started`` for new ones), then count the
        completed episodes (``episode_completed``)."""
        if step.episode_ids:
            started = state.observe_episode_ids(step.episode_ids)
            if started:
                await self._started(started)
        if step.completed:
            await self._completed(state, step.completed)

    async def _reset_finished_lanes(
        self, state: RouteState, done_lanes: list[int]
    ) -> tuple[SpaceBatch | None, ArrayPredictContext]:
        """DISABLED: reset the lanes whose current episode completed (every lane: a whole-vector
        reset) with the next generation's seeds; the reset observation and its context."""
        self._generation += 1
        generation = self._generation
        num_envs = self.spec.num_envs
        if len(done_lanes) == num_envs:
            reset = await self._reset(state, (), self._seeds_for(generation, range(num_envs)), state.step)
            started = state.start_episodes(reset.episode_ids, True)
        else:
            reset = await self._reset(state, done_lanes, self._seeds_for(generation, done_lanes), state.step)
            started = state.observe_episode_ids(reset.episode_ids)
        await self._started(started)
        return await self._emit_observation(state, reset.observation, _RESET_OBSERVATION, True)

    async def _reset(
        self, state: RouteState, env_indices: Sequence[int], seeds: list[int], step: int
    ) -> EnvResetBatch:
        """One guarded ``env.reset`` (every lane for empty ``env_indices``), timed."""
        started_ns = perf_counter_ns()
        timeout = self.spec.limits.env_reset_timeout
        reset = self._begin(
            self._env_port.reset_arrays, (env_indices, seeds), "env.reset", step, started_ns, timeout
        )
        if type(reset) is _Suspended:
            reset = await self._finish(reset, started_ns, timeout, "env.reset", step)
        if type(reset) is not EnvResetBatch and not isinstance(reset, EnvResetBatch):
            raise ProtocolError(f"env.reset_arrays returned {type(reset).__name__}; expected EnvResetBatch")
        self._run_timing.reset.record(perf_counter_ns() - started_ns)
        if self._telemetry_on:
            self._run_timing.record_operation_telemetry(self._env_component_id, reset.telemetry)
        return reset

    # -- guarded operations -------------------------------------------------------------------

    def _begin(
        self,
        function: Callable[..., Any],
        args: tuple[Any, ...],
        operation: str,
        step: int,
        started_ns: int,
        timeout: float,
    ) -> Any:
        """Start ``function(*args)`` in this task: its result if it did not suspend, else ``_Suspended``.

        A plain method rather than a coroutine: an in-process env or model never suspends, and
        this is called twice per step. A call that finished without suspending (an inline call:
        nothing could interrupt it) but took longer than a positive ``timeout`` is refused as that
        timeout, the error a suspended call gets when its deadline passes. A zero limit keeps
        upstream's meaning, "never wait": a call that did not suspend passes.
        """
        token = self._token
        try:
            if token is not None and token.cancelled:
                raise RouteCancelledError(self._route_id, step, self._cancellation_reason)
            awaitable = function(*args)
            running = awaitable if type(awaitable) is _CoroutineType else _guard.start(awaitable, operation)
            try:
                yielded = running.send(None)
            except StopIteration as stop:
                if token is not None and token.cancelled:
                    raise RouteCancelledError(self._route_id, step, self._cancellation_reason) from None
                if timeout and perf_counter_ns() - started_ns > timeout * 1e9:
                    raise self._timed_out(operation, step, timeout) from None
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
            raise self._timed_out(operation, step, timeout)
        except RuntimeDriverError:
            raise
        except _guard.OperationCancelled as own:
            raise self._wrap(operation, step, own.error) from own.error
        except Exception as error:
            raise self._wrap(operation, step, error) from error
        # A CancelledError out of drive() is the task's own cancellation: it propagates.

    def _timed_out(self, operation: str, step: int, timeout: float) -> OperationTimeoutError:
        component = self._model_component_id if operation == "model.predict" else self._env_component_id
        return OperationTimeoutError(self._route_id, component, operation, step, timeout)

    def _done_lanes(self, state: RouteState, completed: Sequence[CompletedEpisode]) -> list[int]:
        """The lanes to reset under DISABLED: sorted, deduplicated ``env_index`` of the completed
        episodes that are their lane's current episode (not one interrupted earlier)."""
        num_envs = self.spec.num_envs
        current = state.episode_ids()
        lanes = set()
        for episode in completed:
            lane = episode.env_index
            if not 0 <= lane < num_envs:
                raise ProtocolError(
                    f"env.step reported completed episode {episode.episode_id!r} on env_index {lane}; "
                    f"expected an env_index in 0..{num_envs - 1} (num_envs={num_envs})"
                )
            if episode.episode_id == current[lane]:
                lanes.add(lane)
        return sorted(lanes)

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

    async def _completed(self, state: RouteState, completed: Sequence[CompletedEpisode]) -> None:
        listening = bool(self._on_episode_completed)
        for episode in completed:
            record = state.complete_episode(episode.episode_id)
            if listening:
                await self._hooks.fire(
                    "episode_completed",
                    LazyEpisodeCompletedEvent(
                        self._session_id,
                        self._route,
                        episode.episode_id,
                        record.record_id if record is not None else "",
                        record.index if record is not None else 0,
                        episode.env_index,
                        episode.step_count,
                        episode.cumulative_reward,
                        episode.terminated,
                        episode.truncated,
                        episode.duration_ms,
                        None,
                        None,
                        episode,
                        build_metadata=episode_metadata,
                        build_final_info=final_info_message,
                    ),
                )

    async def _emit_action(
        self, state: RouteState, actions: SpaceBatch | None, action_step: int
    ) -> SpaceBatch | None:
        """Run the action hooks on the actions' bytes; the (transformed) actions."""
        data = actions.data if actions is not None else None
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
            data,
        )
        hooks = self._hooks
        if hooks.listeners("transform_action"):
            await hooks.transform("transform_action", event)
        sent = event.action  # what the transforms left; observers only look
        await hooks.fire("action_received", event)
        if sent is data:
            return actions
        if sent is None:
            return None
        # Without a codec only message-form peers run, and they pass the bytes on undecoded.
        return SpaceBatch.from_bytes(self._action_codec, sent, self.spec.num_envs)  # type: ignore[arg-type]

    async def _emit_observation(
        self, state: RouteState, observation: SpaceBatch | None, phase: str, is_reset: bool
    ) -> tuple[SpaceBatch | None, ArrayPredictContext]:
        """The next observation, after the observation hooks saw (and transformed) it, and the
        context of the predict that will take it (its request id is used up now)."""
        context = state.predict_context(phase)
        if not self._on_observation:
            return observation, context
        data = observation.data if observation is not None else None
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
            data,
        )
        hooks = self._hooks
        if hooks.listeners("transform_observation"):
            await hooks.transform("transform_observation", event)
        sent = event.observation  # what the transforms left; observers only look
        await hooks.fire("observation_emitted", event)
        if sent is not data:
            observation = (
                None
                if sent is None
                else SpaceBatch.from_bytes(self._observation_codec, sent, self.spec.num_envs)  # type: ignore[arg-type]
            )
        return observation, context

    # -- endings ------------------------------------------------------------------------------

    async def _end(self, state: RouteState, reason: str) -> RuntimeReport:
        """The normal end (docs/design/runtime.md#normal-end-and-failure)."""
        hooks = self._hooks
        timing = self._run_timing
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
        """The failure path: close, then ``session_failed`` exactly once.

        See docs/design/runtime.md#normal-end-and-failure.

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
