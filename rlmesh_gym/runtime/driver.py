"""The runtime driver: one route's reset -> predict -> step loop (port of upstream rlmesh-runtime 0.1.0-rc.1).

::

    spec = RuntimeSessionSpec(session_id="s", route_id="r", env_contract=env.contract,
                              num_envs=env.num_envs, max_episodes=10)
    report = asyncio.run(RuntimeDriver(spec, env, model, hooks=[MyHooks()]).run())

:class:`RuntimeDriver` holds one session's configuration; :meth:`RuntimeDriver.run` makes a
:class:`_Run`, the state of that one run, whose :meth:`_Run.loop` reads top to bottom in the
order of docs/design/runtime.md#event-order. Control flow, event order, ids, seeds, counters and
error texts follow upstream rlmesh-runtime 0.1.0-rc.1. What this port adds or decides where
upstream is silent:

* **Validation** accepts SAME_STEP and vectorised DISABLED/UNSPECIFIED (see
  :mod:`rlmesh_gym.runtime.spec`). SAME_STEP runs on the observational path like NEXT_STEP;
  DISABLED resets exactly the lanes that completed their current episode (``env_indices`` +
  aligned seeds), or the whole vector when every lane did; a completed episode that is not
  its lane's current one (interrupted earlier) resets nothing, and an ``env_index`` out of
  range is a :class:`~rlmesh_gym.runtime.errors.ProtocolError`.
* **One loop on the array form** of the seams (:mod:`rlmesh_gym.runtime.seams`): in-process
  peers are called as ``reset_arrays``/``step_arrays``/``predict_arrays``; message-form peers
  through the ports of :mod:`rlmesh_gym.runtime.message_form`, which build upstream's requests
  (with its ``timeout_ms``) and check the echoed context.
* **Operations** (``env.reset``, ``env.step``, ``model.predict``) of a peer that runs inline
  (:class:`~rlmesh_gym.runtime.seams.RunsInline`) are plain awaits; their limit and the
  cancellation token are applied when they return. Every other peer's operations go through
  :func:`~rlmesh_gym.runtime.guarded.await_guarded` (docs/design/runtime.md#operations-and-their-limits).
* **Exceptions** an env or model raises that are not
  :class:`~rlmesh_gym.runtime.errors.RuntimeDriverError` are wrapped as
  :class:`~rlmesh_gym.runtime.errors.EnvRpcError` (operation ``reset``/``step``) or
  :class:`~rlmesh_gym.runtime.errors.ModelRpcError` (the model component id), with the
  original as ``__cause__`` (a ``CancelledError`` the env or model raises by itself too). A
  result of the wrong type is a :class:`~rlmesh_gym.runtime.errors.ProtocolError`.
* :meth:`RuntimeDriver.request_stop` ends the run the **normal** way (final window,
  summary, close, ``session_ended`` with the given reason, a report) after the current step's
  completions; upstream can only end normally through ``max_episodes``.
* If the task running the driver is itself cancelled, the failure shutdown (close both
  endpoints, ``session_failed``) still runs before the ``CancelledError`` propagates;
  ``session_failed`` fires even if a second cancellation cuts the closes short.
* Hooks a hooks object does not override are never called, and events nobody listens to are
  never built; telemetry series are only kept if some hook listens to telemetry.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
from collections.abc import Awaitable, Sequence
from functools import partial
from time import perf_counter_ns
from typing import Any, cast

from rlmesh_gym.proto import model_pb2, spaces_pb2
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
    EpisodesCompletedEvent,
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
from rlmesh_gym.runtime.guarded import OperationCancelled, OperationTimedOut, TokenFired, await_guarded
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
    RunsInline,
    RuntimeEnv,
    RuntimeModel,
    has_array_form,
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
_STEP_OBSERVATION = RequestPhase.STEP_OBSERVATION.value
_RESET_OBSERVATION = RequestPhase.RESET_OBSERVATION.value
_PREDICT = "model.predict"
_RESET = "env.reset"
_STEP = "env.step"


def _reason_of(error: BaseException) -> str:
    if isinstance(error, asyncio.CancelledError):
        return str(error) or "runtime driver task was cancelled"
    return str(error) or type(error).__name__


def _codec_or_none(spec: spaces_pb2.SpaceSpec, name: str) -> SpaceCodec | None:
    """The codec of ``spec``, or ``None`` if it has none (then only message-form peers, which
    pass bytes through undecoded, can run; an array-form peer reports the decode failure)."""
    try:
        return SpaceCodec(spec, name=name)
    except (CodecError, ValueError):
        return None


def _cause_of(error: BaseException) -> BaseException | None:
    """What a failed operation's driver error names as its cause: the peer's own exception (its
    ``CancelledError`` for :class:`OperationCancelled`); none for a timeout or the token."""
    if type(error) is TokenFired or type(error) is OperationTimedOut:
        return None
    return error.error if type(error) is OperationCancelled else error


def _runs_inline(peer: object) -> bool:
    return isinstance(peer, RunsInline) and peer.runs_inline is True


def _limit_ns(seconds: float) -> float:
    """A limit in nanoseconds, for checking an operation after it returned: ``math.inf`` for no
    limit and for zero ("never wait", which an operation that returned did not do)."""
    return seconds * 1e9 if 0 < seconds < math.inf else math.inf


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
        for name, peer, methods, array_methods in (
            ("env", env, ("reset", "step"), ("reset_arrays", "step_arrays")),
            ("model", model, ("predict",), ("predict_arrays",)),
        ):
            missing = [method for method in methods if not callable(getattr(peer, method, None))]
            if missing and not has_array_form(peer):
                raise TypeError(
                    f"{name} must implement {'/'.join(methods)} (the Runtime{name.capitalize()} "
                    f"protocol) or {'/'.join(array_methods)} (ArrayRuntime{name.capitalize()}); "
                    f"{type(peer).__name__} has no {', '.join(missing)}"
                )
        self.spec = spec
        self.env = env
        self.model = model
        self._hooks = HookTable(hooks)
        self._stop_reason: str | None = None
        self._ran = False
        self._run: _Run | None = None

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
            if self._run is not None:
                self._run.stop_reason = reason

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
        self.spec.validate()
        run = self._run = _Run(self, cancellation, reason)
        run.stop_reason = self._stop_reason  # a stop asked before the run began
        try:
            return await run.loop()
        except (Exception, asyncio.CancelledError) as error:
            await run.shutdown_after_failure(error)
            raise

    @property
    def timing(self) -> RuntimeTiming | None:
        """The run's timing accumulators (``None`` before it starts).

        Its phase timers (``reset``, ``model_wait``, ``env_step``) count every completed
        operation and its total, min and max nanoseconds, whether or not a hook listens to
        telemetry.
        """
        return self._run.timing if self._run is not None else None


class _Run:
    """One run of a :class:`RuntimeDriver`: the ports, the route's state, timing and listeners.

    Made by :meth:`RuntimeDriver.run`; :meth:`loop` is the session, phase by phase.
    """

    def __init__(
        self, driver: RuntimeDriver, token: CancellationToken | None, cancellation_reason: str
    ) -> None:
        spec = driver.spec
        limits = spec.limits
        contract = spec.env_contract
        hooks = driver._hooks
        # What the run needs of its driver, taken here: a reference back to the driver (which
        # holds the run) would make a cycle that keeps the env, the model and the hooks alive
        # until the garbage collector finds it.
        self.env_peer = driver.env
        self.model_peer = driver.model
        self.stop_reason: str | None = None  # RuntimeDriver.request_stop's reason
        self.spec = spec
        self.hooks = hooks
        self.token = token
        self.cancellation_reason = cancellation_reason
        self.state = RouteState.from_spec(spec)
        self.session_id = spec.session_id
        self.route_id = spec.route_id
        self.num_envs = spec.num_envs
        self.env_component_id = spec.env_component_id
        self.model_component_id = spec.model_component_id
        self.route = spec.route_context()
        # Shared into every event, as upstream's Arc'd copies.
        self.action_space = spaces_pb2.SpaceSpec()
        self.action_space.CopyFrom(contract.action_space)
        self.observation_space = spaces_pb2.SpaceSpec()
        self.observation_space.CopyFrom(contract.observation_space)
        self.observation_codec = _codec_or_none(self.observation_space, "observation")
        self.action_codec = _codec_or_none(self.action_space, "action")
        self.seeds = (
            ResetSeeds(spec.base_seed, spec.session_id, spec.route_id) if spec.base_seed is not None else None
        )
        self.generation = 0
        self.observational = AutoresetMode.from_wire(contract.autoreset_mode).observational
        self.max_episodes = spec.max_episodes
        # The ports: the seams in array form. Message-form peers are seen through the ports of
        # message_form, the one place where the two forms convert.
        self.env: ArrayRuntimeEnv = (
            cast(ArrayRuntimeEnv, driver.env)
            if has_array_form(driver.env)
            else MessageEnvPort(
                cast(RuntimeEnv, driver.env),
                self.observation_codec,
                spec.num_envs,
                limits.env_reset_timeout_ms(),
                limits.env_step_timeout_ms(),
            )
        )
        self.model: ArrayRuntimeModel = (
            cast(ArrayRuntimeModel, driver.model)
            if has_array_form(driver.model)
            else MessageModelPort(
                cast(RuntimeModel, driver.model), self.action_codec, self.model_component_id
            )
        )
        self.env_inline = _runs_inline(self.env)
        self.model_inline = _runs_inline(self.model)
        self.reset_timeout = limits.env_reset_timeout
        self.step_timeout = limits.env_step_timeout
        self.predict_timeout = limits.model_predict_timeout
        self.reset_limit_ns = _limit_ns(limits.env_reset_timeout)
        self.step_limit_ns = _limit_ns(limits.env_step_timeout)
        self.predict_limit_ns = _limit_ns(limits.model_predict_timeout)
        self.close_timeout = limits.service_close_timeout
        self.timing = RuntimeTiming(self.env_component_id, self.model_component_id, perf_counter_ns())
        self.window_ns = round(limits.telemetry_window * 1e9) if limits.telemetry_window != math.inf else None
        self.model_ns = 0  # the last predict's duration, for the step's telemetry sample
        listeners = hooks.listeners
        self.on_episode_started = bool(listeners("episode_started"))
        self.on_episodes_completed = bool(listeners("episodes_completed"))
        self.on_episode_completed = bool(listeners("episode_completed"))
        self.on_action = bool(listeners("transform_action") or listeners("action_received"))
        self.on_observation = bool(listeners("transform_observation") or listeners("observation_emitted"))
        self.on_step_completed = bool(listeners("step_completed"))
        self.on_window = bool(listeners("telemetry_window"))
        self.on_summary = bool(listeners("telemetry_summary"))
        self.telemetry_on = self.on_window or self.on_summary
        self.closed = False
        self.failed_reported = False

    # -- the loop -------------------------------------------------------------------------------

    async def loop(self) -> RuntimeReport:
        """The session, phase by phase, in the order of docs/design/runtime.md#event-order."""
        state, token = self.state, self.token
        if self.hooks.listeners("session_started"):
            await self.hooks.fire(
                "session_started", SessionStartedEvent(self.session_id, self.route, self.spec.env_id)
            )
        observation, context = await self.cold_reset()
        while True:
            if token is not None and token.cancelled:
                raise RouteCancelledError(self.route_id, state.step, self.cancellation_reason)
            if self.stop_reason is not None:
                return await self.end(self.stop_reason)
            actions = await self.predict(observation, context)
            step = await self.step(actions)
            completed = step.completed
            if completed or state.episode_ids_changed(step.episode_ids):
                await self.settle_episodes(step)
                if completed and self.max_episodes is not None and state.total_episodes >= self.max_episodes:
                    return await self.end(COMPLETED_REQUESTED_EPISODES)
            if self.stop_reason is not None:
                return await self.end(self.stop_reason)
            # Next observation: the step's, unless DISABLED lanes finished their current episode.
            if self.observational or not completed or not (done_lanes := self.done_lanes(completed)):
                if self.on_observation:
                    observation, context = await self.emit_observation(
                        step.observation, _STEP_OBSERVATION, False
                    )
                else:
                    observation, context = step.observation, state.predict_context(_STEP_OBSERVATION)
            else:
                observation, context = await self.reset_finished_lanes(done_lanes)

    # -- phases ---------------------------------------------------------------------------------

    async def cold_reset(self) -> tuple[SpaceBatch | None, ArrayPredictContext]:
        """Reset every lane with the generation-0 seeds; the first observation and its context."""
        state, hooks = self.state, self.hooks
        reset = await self.reset((), self.seeds_for(0, range(self.num_envs)), 0)
        if hooks.listeners("log"):
            ready = sum(1 for episode_id in reset.episode_ids if episode_id)
            reset_ms = self.timing.reset.total_ns / 1e6  # the only reset so far
            message = f"env reset complete in {reset_ms:.0f}ms ({ready} episode(s) ready)"
            await hooks.fire("log", LogEvent(self.session_id, self.route, LogLevel.INFO, message, "runtime"))
        await self.started(state.start_episodes(reset.episode_ids, False))
        return await self.emit_observation(reset.observation, _RESET_OBSERVATION, True)

    async def predict(
        self, observation: SpaceBatch | None, context: ArrayPredictContext
    ) -> SpaceBatch | None:
        """Ask the model for the next actions; the actions after the action hooks."""
        started_ns = perf_counter_ns()
        try:
            if self.model_inline:
                prediction = await self.model.predict_arrays(observation, context)
            else:
                prediction = await self.guarded(
                    self.model.predict_arrays(observation, context), self.predict_timeout, _PREDICT
                )
        except RuntimeDriverError:
            raise
        except Exception as error:
            raise self.failure(_PREDICT, self.state.step, error) from _cause_of(error)
        except asyncio.CancelledError as error:
            if not self.model_inline:
                raise  # the task's own: a guarded peer's own CancelledError is OperationCancelled
            raise self.failure(_PREDICT, self.state.step, error) from error
        model_ns = self.model_ns = perf_counter_ns() - started_ns
        token = self.token
        if model_ns > self.predict_limit_ns or (token is not None and token.cancelled):
            raise self.refused(_PREDICT, self.state.step)
        if type(prediction) is not ModelActionBatch and not isinstance(prediction, ModelActionBatch):
            raise ProtocolError(
                f"model.predict_arrays returned {type(prediction).__name__}; expected ModelActionBatch"
            )
        timing = self.timing
        timing.model_wait.record(model_ns)
        if self.telemetry_on:
            timing.record_operation_telemetry(self.model_component_id, prediction.telemetry)
        if self.on_action:
            return await self.emit_action(prediction.action, self.state.step + 1)
        return prediction.action

    async def step(self, actions: SpaceBatch | None) -> EnvStepBatch:
        """Step the env with ``actions``, record the step and fire ``step_completed``."""
        state = self.state
        started_ns = perf_counter_ns()
        try:
            if self.env_inline:
                stepped = await self.env.step_arrays(actions)
            else:
                stepped = await self.guarded(self.env.step_arrays(actions), self.step_timeout, _STEP)
        except RuntimeDriverError:
            raise
        except Exception as error:
            raise self.failure(_STEP, state.step + 1, error) from _cause_of(error)
        except asyncio.CancelledError as error:
            if not self.env_inline:
                raise  # the task's own: a guarded peer's own CancelledError is OperationCancelled
            raise self.failure(_STEP, state.step + 1, error) from error
        env_ns = perf_counter_ns() - started_ns
        token = self.token
        if env_ns > self.step_limit_ns or (token is not None and token.cancelled):
            raise self.refused(_STEP, state.step + 1)
        if type(stepped) is not EnvStepBatch and not isinstance(stepped, EnvStepBatch):
            raise ProtocolError(f"env.step_arrays returned {type(stepped).__name__}; expected EnvStepBatch")
        timing = self.timing
        timing.env_step.record(env_ns)
        state.record_step()
        if self.telemetry_on:
            timing.record_operation_telemetry(self.env_component_id, stepped.telemetry)
            timing.record_step(self.model_ns, env_ns, _payload_size(actions), _step_size(stepped))
        if self.on_step_completed:
            await self.hooks.fire(
                "step_completed",
                LazyStepCompletedEvent(
                    self.session_id,
                    self.route,
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
        if self.telemetry_on and self.window_ns is not None:
            now_ns = perf_counter_ns()
            if timing.window_due(now_ns, self.window_ns):
                window = timing.flush_window(self.session_id, self.route, now_ns)
                if window is not None and self.on_window:
                    await self.hooks.fire("telemetry_window", window)
        return stepped

    async def settle_episodes(self, step: EnvStepBatch) -> None:
        """Adopt the step's episode ids (``episode_started`` for new ones), then count the
        completed episodes (``episodes_completed``, then ``episode_completed`` for each)."""
        if step.episode_ids:
            started = self.state.observe_episode_ids(step.episode_ids, self.on_episode_started)
            if started:
                await self.started(started)
        if step.completed:
            await self.completed(step.completed)

    async def reset_finished_lanes(
        self, done_lanes: list[int]
    ) -> tuple[SpaceBatch | None, ArrayPredictContext]:
        """DISABLED: reset the lanes whose current episode completed (every lane: a whole-vector
        reset) with the next generation's seeds; the reset observation and its context."""
        state = self.state
        self.generation += 1
        generation = self.generation
        if len(done_lanes) == self.num_envs:
            reset = await self.reset((), self.seeds_for(generation, range(self.num_envs)), state.step)
            started = state.start_episodes(reset.episode_ids, True)
        else:
            reset = await self.reset(done_lanes, self.seeds_for(generation, done_lanes), state.step)
            started = state.observe_episode_ids(reset.episode_ids)
        await self.started(started)
        return await self.emit_observation(reset.observation, _RESET_OBSERVATION, True)

    async def reset(self, env_indices: Sequence[int], seeds: list[int], step: int) -> EnvResetBatch:
        """One ``env.reset`` (every lane for empty ``env_indices``), timed."""
        token = self.token
        if token is not None and token.cancelled:  # a pre-cancelled run never calls env.reset
            raise RouteCancelledError(self.route_id, step, self.cancellation_reason)
        started_ns = perf_counter_ns()
        try:
            if self.env_inline:
                reset = await self.env.reset_arrays(env_indices, seeds)
            else:
                reset = await self.guarded(
                    self.env.reset_arrays(env_indices, seeds), self.reset_timeout, _RESET
                )
        except RuntimeDriverError:
            raise
        except Exception as error:
            raise self.failure(_RESET, step, error) from _cause_of(error)
        except asyncio.CancelledError as error:
            if not self.env_inline:
                raise  # the task's own: a guarded peer's own CancelledError is OperationCancelled
            raise self.failure(_RESET, step, error) from error
        elapsed_ns = perf_counter_ns() - started_ns
        if elapsed_ns > self.reset_limit_ns or (token is not None and token.cancelled):
            raise self.refused(_RESET, step)
        if type(reset) is not EnvResetBatch and not isinstance(reset, EnvResetBatch):
            raise ProtocolError(f"env.reset_arrays returned {type(reset).__name__}; expected EnvResetBatch")
        self.timing.reset.record(elapsed_ns)
        if self.telemetry_on:
            self.timing.record_operation_telemetry(self.env_component_id, reset.telemetry)
        return reset

    def seeds_for(self, generation: int, env_indices: Sequence[int]) -> list[int]:
        return self.seeds.seeds(generation, env_indices) if self.seeds is not None else []

    def done_lanes(self, completed: Sequence[CompletedEpisode]) -> list[int]:
        """The lanes to reset under DISABLED: sorted, deduplicated ``env_index`` of the completed
        episodes that are their lane's current episode (not one interrupted earlier)."""
        num_envs = self.num_envs
        current = self.state.episode_ids()
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

    # -- operations and their limits (docs/design/runtime.md#operations-and-their-limits) -------

    def guarded(self, operation: Awaitable[Any], timeout: float, name: str) -> Awaitable[Any]:
        """``operation`` of a peer that may suspend, raced against its limit and the token."""
        return await_guarded(operation, timeout, self.token, name)

    def refused(self, operation: str, step: int) -> RuntimeDriverError:
        """Why a returned result is refused: the token fired (it wins over the result), or the
        result came after the limit (an inline call cannot be interrupted while it runs)."""
        token = self.token
        if token is not None and token.cancelled:
            return RouteCancelledError(self.route_id, step, self.cancellation_reason)
        return self.timed_out(operation, step, self.timeout_of(operation))

    def failure(self, operation: str, step: int, error: BaseException) -> RuntimeDriverError:
        """The driver error for an operation that did not return a result (see :func:`_cause_of`)."""
        if type(error) is TokenFired:
            return RouteCancelledError(self.route_id, step, self.cancellation_reason)
        if type(error) is OperationTimedOut:
            return self.timed_out(operation, step, self.timeout_of(operation))
        cause = _cause_of(error)
        if operation == _PREDICT:
            return ModelRpcError.wrap(self.model_component_id, cause)  # type: ignore[arg-type]
        return EnvRpcError.wrap(operation.removeprefix("env."), step, cause)  # type: ignore[arg-type]

    def timeout_of(self, operation: str) -> float:
        return {_PREDICT: self.predict_timeout, _STEP: self.step_timeout, _RESET: self.reset_timeout}[
            operation
        ]

    def timed_out(self, operation: str, step: int, timeout: float) -> OperationTimeoutError:
        component = self.model_component_id if operation == _PREDICT else self.env_component_id
        return OperationTimeoutError(self.route_id, component, operation, step, timeout)

    # -- events ---------------------------------------------------------------------------------

    async def started(self, started: list[StartedEpisode]) -> None:
        if not self.on_episode_started or not started:
            return
        session_id, route = self.session_id, self.route
        await self.hooks.fire_each(
            "episode_started",
            [
                EpisodeStartedEvent(
                    session_id,
                    route,
                    episode.episode_id,
                    episode.record.record_id,
                    episode.record.index,
                    episode.record.env_index,
                    episode.record.started_from_auto_reset,
                )
                for episode in started
            ],
        )

    async def completed(self, completed: Sequence[CompletedEpisode]) -> None:
        names = self.state.complete_episodes([episode.episode_id for episode in completed])
        session_id, route = self.session_id, self.route
        if self.on_episodes_completed:
            # Tuples: the driver reads both lists again after the hooks.
            await self.hooks.fire(
                "episodes_completed",
                EpisodesCompletedEvent(session_id, route, tuple(completed), tuple(names)),
            )
        if not self.on_episode_completed:
            return
        await self.hooks.fire_each(
            "episode_completed",
            [
                LazyEpisodeCompletedEvent(
                    session_id,
                    route,
                    episode.episode_id,
                    record_id,
                    index,
                    episode.env_index,
                    episode.step_count,
                    episode.cumulative_reward,
                    episode.terminated,
                    episode.truncated,
                    episode.duration_ms,
                    episode,
                    episode_metadata,
                    final_info_message,
                )
                for episode, (record_id, index) in zip(completed, names, strict=True)
            ],
        )

    async def emit_action(self, actions: SpaceBatch | None, action_step: int) -> SpaceBatch | None:
        """Run the action hooks on the actions' bytes; the (transformed) actions."""
        state, hooks = self.state, self.hooks
        data = actions.data if actions is not None else None
        event = ActionReceivedEvent(
            self.session_id,
            self.route,
            state.episode_id,
            state.episode_record_id,
            state.episode_ids(),
            state.episode_record_ids(),
            action_step,
            0,
            self.action_space,
            data,
        )
        if hooks.listeners("transform_action"):
            await hooks.transform("transform_action", event)
        sent = event.action  # what the transforms left; observers only look
        await hooks.fire("action_received", event)
        if sent is data:
            return actions
        if sent is None:
            return None
        # Without a codec only message-form peers run, and they pass the bytes on undecoded.
        return SpaceBatch.from_bytes(self.action_codec, sent, self.num_envs)  # type: ignore[arg-type]

    async def emit_observation(
        self, observation: SpaceBatch | None, phase: str, is_reset: bool
    ) -> tuple[SpaceBatch | None, ArrayPredictContext]:
        """The next observation, after the observation hooks saw (and transformed) it, and the
        context of the predict that will take it (its request id is used up now)."""
        state = self.state
        context = state.predict_context(phase)
        if not self.on_observation:
            return observation, context
        hooks = self.hooks
        data = observation.data if observation is not None else None
        event = ObservationEmittedEvent(
            self.session_id,
            self.route,
            state.episode_id,
            state.episode_record_id,
            state.episode_ids(),
            state.episode_record_ids(),
            state.step,
            0,
            is_reset,
            self.num_envs,
            self.observation_space,
            data,
        )
        if hooks.listeners("transform_observation"):
            await hooks.transform("transform_observation", event)
        sent = event.observation  # what the transforms left; observers only look
        await hooks.fire("observation_emitted", event)
        if sent is not data:
            observation = (
                None if sent is None else SpaceBatch.from_bytes(self.observation_codec, sent, self.num_envs)  # type: ignore[arg-type]
            )
        return observation, context

    # -- endings (docs/design/runtime.md#normal-end-and-failure) --------------------------------

    async def end(self, reason: str) -> RuntimeReport:
        """The normal end: telemetry, closes, ``session_ended``, the report."""
        state, hooks, timing = self.state, self.hooks, self.timing
        if self.telemetry_on:
            now_ns = perf_counter_ns()
            window = timing.flush_window(self.session_id, self.route, now_ns)
            if window is not None and self.on_window:
                await hooks.fire("telemetry_window", window)
            summary = timing.summary(self.session_id, self.route, now_ns)
            if summary is not None and self.on_summary:
                await hooks.fire("telemetry_summary", summary)
        await self.close_endpoints(reason)
        if hooks.listeners("session_ended"):
            await hooks.fire(
                "session_ended",
                SessionEndedEvent(
                    self.session_id, self.route, reason, state.total_steps, state.total_episodes
                ),
            )
        _log.info(timing.summary_log_line(state.total_steps, state.total_episodes))
        return RuntimeReport(self.session_id, self.route_id, state.total_steps, state.total_episodes, reason)

    async def shutdown_after_failure(self, error: BaseException) -> None:
        """The failure path: close, then ``session_failed`` exactly once.

        If the task is cancelled (again) during the closes, ``session_failed`` still fires,
        then that cancellation propagates.
        """
        if self.failed_reported:
            return
        self.failed_reported = True
        reason = _reason_of(error)
        try:
            if not self.closed:
                await self.close_endpoints(reason)
        finally:
            await self.hooks.fire(
                "session_failed", SessionFailedEvent(self.session_id, self.spec.route_context(), reason)
            )

    async def close_endpoints(self, reason: str) -> None:
        """Close the model route and (if owned) the env, concurrently, each bounded; never raises."""
        self.closed = True
        closes = [self.close_model(self.state.close_route_request(reason), reason)]
        if self.spec.close_env_on_end:
            closes.append(self.close_env())
        else:
            _log.debug(
                "skipping environment close for route %s (%s); endpoint remains owned by the run",
                self.route_id,
                reason,
            )
        await asyncio.gather(*closes)

    async def close_env(self) -> None:
        close = getattr(self.env_peer, "close", None)
        if close is None:
            return
        timeout = self.close_timeout
        try:
            await _bounded(close, timeout)
        except OperationTimedOut:
            _log.warning(
                "environment close timed out during route shutdown; abandoning close (timeout_ms=%d)",
                round(timeout * 1000) if timeout != math.inf else -1,
            )
        except Exception as err:
            _log.warning("environment close failed during route shutdown: %s", err)

    async def close_model(self, request: model_pb2.CloseRouteRequest, reason: str) -> None:
        close_route = getattr(self.model_peer, "close_route", None)
        if close_route is None:
            return
        timeout = self.close_timeout
        try:
            await _bounded(close_route, timeout, request)
        except OperationTimedOut:
            _log.warning(
                "model route close timed out during route shutdown; relying on owner shutdown "
                "(timeout_ms=%d, reason=%s)",
                round(timeout * 1000) if timeout != math.inf else -1,
                reason,
            )
        except Exception as err:
            _log.warning(
                "model route close failed during route shutdown; relying on owner shutdown "
                "(error=%s, reason=%s)",
                err,
                reason,
            )


async def _bounded(close: Any, timeout: float, *args: object) -> None:
    """``close(*args, timeout)`` for at most ``timeout`` seconds (a plain function counts as done)."""
    result = close(*args, timeout)
    if inspect.isawaitable(result):
        await await_guarded(result, timeout, None, getattr(close, "__qualname__", "close"))
