"""Hooks: how callers observe (and transform) a running session.

Subclass :class:`RuntimeHooks` and override the methods you need; every method is ``async``
and takes one event (:mod:`rlmesh_gym.runtime.events`). Hooks are awaited inline, one after
another, with no timeout; a slow hook slows the route.

* **Best-effort** hooks (everything but the two transforms): an exception is logged at
  warning level on the ``rlmesh_gym.runtime`` logger as ``runtime hook <method> failed:
  <err>`` and the route keeps going.
* **Fatal** hooks, ``transform_action`` and ``transform_observation``: they return the payload
  to send on (default: the event's payload unchanged). An exception is logged the same way
  and fails the session with :class:`~rlmesh_gym.runtime.errors.HookFailedError`.

Several hook objects combine with :class:`CompositeHooks` (or by passing a sequence to the
driver): calls fan out in order, and transforms chain (each sees the previous result).

The driver calls only the methods a hooks object overrides, and builds an event only if
some hook listens to it, so an unused hook costs nothing per step.

>>> class CountEpisodes(RuntimeHooks):
...     def __init__(self):
...         self.returns = []
...     async def episode_completed(self, event):
...         self.returns.append(event.cumulative_reward)
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any

from rlmesh_gym.runtime.errors import HookError, HookFailedError
from rlmesh_gym.runtime.events import (
    ActionReceivedEvent,
    EnvConnectedEvent,
    EpisodeCompletedEvent,
    EpisodesCompletedEvent,
    EpisodeStartedEvent,
    LogEvent,
    LogLevel,
    MetricKind,
    MetricSummary,
    ModelConnectedEvent,
    ObservationEmittedEvent,
    RuntimeRouteContext,
    SessionEndedEvent,
    SessionFailedEvent,
    SessionStartedEvent,
    StepCompletedEvent,
    TelemetrySummaryEvent,
    TelemetryWindowEvent,
    TimingSummary,
)

__all__ = [
    "HOOK_METHODS",
    "TRANSFORM_HOOKS",
    "ActionReceivedEvent",
    "CompositeHooks",
    "EnvConnectedEvent",
    "EpisodeCompletedEvent",
    "EpisodeStartedEvent",
    "EpisodesCompletedEvent",
    "HookError",
    "HookTable",
    "LogEvent",
    "LogLevel",
    "MetricKind",
    "MetricSummary",
    "ModelConnectedEvent",
    "NoopRuntimeHooks",
    "ObservationEmittedEvent",
    "RuntimeHooks",
    "RuntimeRouteContext",
    "SessionEndedEvent",
    "SessionFailedEvent",
    "SessionStartedEvent",
    "StepCompletedEvent",
    "TelemetrySummaryEvent",
    "TelemetryWindowEvent",
    "TimingSummary",
]

_log = logging.getLogger("rlmesh_gym.runtime")

HOOK_METHODS = (
    "env_connected",
    "model_connected",
    "session_started",
    "episode_started",
    "episodes_completed",
    "episode_completed",
    "action_received",
    "transform_action",
    "step_completed",
    "observation_emitted",
    "transform_observation",
    "telemetry_window",
    "telemetry_summary",
    "session_ended",
    "session_failed",
    "log",
)
"""Every hook method name, in upstream's order (``episodes_completed``, this port's addition,
where it fires: before the step's ``episode_completed`` events)."""

TRANSFORM_HOOKS = ("transform_action", "transform_observation")
"""The fatal hooks; the others are best-effort."""


class RuntimeHooks:
    """Base class of session hooks: every method is a no-op until overridden."""

    async def env_connected(self, event: EnvConnectedEvent) -> None:
        """The owner connected the env (never fired by the driver)."""

    async def model_connected(self, event: ModelConnectedEvent) -> None:
        """The owner connected the model (never fired by the driver)."""

    async def session_started(self, event: SessionStartedEvent) -> None:
        """Once, first thing in a run."""

    async def episode_started(self, event: EpisodeStartedEvent) -> None:
        """For each episode id the route sees for the first time, in lane order."""

    async def episodes_completed(self, event: EpisodesCompletedEvent) -> None:
        """Once per step that completed episodes, with all of them, before their
        ``episode_completed`` events (this port's addition: one call per step instead of one
        per episode, for a hook that counts many short episodes)."""

    async def episode_completed(self, event: EpisodeCompletedEvent) -> None:
        """For each ``completed_episodes`` entry of a step, in the env's order."""

    async def action_received(self, event: ActionReceivedEvent) -> None:
        """Once per step, with the (transformed) action about to be sent to the env."""

    async def transform_action(self, event: ActionReceivedEvent) -> bytes | None:
        """Return the action bytes to send to the env (fatal on error). Default: unchanged."""
        return event.action

    async def step_completed(self, event: StepCompletedEvent) -> None:
        """Once per driver step, after ``env.step`` returned."""

    async def observation_emitted(self, event: ObservationEmittedEvent) -> None:
        """Once per observation sent to the model, with the transformed payload."""

    async def transform_observation(self, event: ObservationEmittedEvent) -> bytes | None:
        """Return the observation bytes to send to the model (fatal on error). Default: unchanged."""
        return event.observation

    async def telemetry_window(self, event: TelemetryWindowEvent) -> None:
        """At most once per ``limits.telemetry_window``, plus a final flush on the normal end."""

    async def telemetry_summary(self, event: TelemetrySummaryEvent) -> None:
        """Once, on the normal end."""

    async def session_ended(self, event: SessionEndedEvent) -> None:
        """Once, on the normal end, after env and model were closed."""

    async def session_failed(self, event: SessionFailedEvent) -> None:
        """Once, when a run fails after validation, after env and model were closed."""

    async def log(self, event: LogEvent) -> None:
        """A log line (the driver sends one, after the cold reset)."""


class NoopRuntimeHooks(RuntimeHooks):
    """Hooks that do nothing (the default of a driver built with ``hooks=None``)."""


class CompositeHooks(RuntimeHooks):
    """Several hook objects as one: each call fans out to them in order.

    Best-effort calls log and skip a failing member so the others still run; transforms
    chain, each member seeing the previous member's result, and the first failure raises.
    """

    def __init__(self, *hooks: RuntimeHooks) -> None:
        self.hooks: tuple[RuntimeHooks, ...] = hooks
        self._table = HookTable(hooks)

    def _fan_out(self, name: str, event: object) -> Awaitable[None]:
        return self._table.fire(name, event)

    async def env_connected(self, event: EnvConnectedEvent) -> None:
        await self._fan_out("env_connected", event)

    async def model_connected(self, event: ModelConnectedEvent) -> None:
        await self._fan_out("model_connected", event)

    async def session_started(self, event: SessionStartedEvent) -> None:
        await self._fan_out("session_started", event)

    async def episode_started(self, event: EpisodeStartedEvent) -> None:
        await self._fan_out("episode_started", event)

    async def episodes_completed(self, event: EpisodesCompletedEvent) -> None:
        await self._fan_out("episodes_completed", event)

    async def episode_completed(self, event: EpisodeCompletedEvent) -> None:
        await self._fan_out("episode_completed", event)

    async def action_received(self, event: ActionReceivedEvent) -> None:
        await self._fan_out("action_received", event)

    async def transform_action(self, event: ActionReceivedEvent) -> bytes | None:
        for method in self._table.listeners("transform_action"):
            event.action = await method(event)
        return event.action

    async def step_completed(self, event: StepCompletedEvent) -> None:
        await self._fan_out("step_completed", event)

    async def observation_emitted(self, event: ObservationEmittedEvent) -> None:
        await self._fan_out("observation_emitted", event)

    async def transform_observation(self, event: ObservationEmittedEvent) -> bytes | None:
        for method in self._table.listeners("transform_observation"):
            event.observation = await method(event)
        return event.observation

    async def telemetry_window(self, event: TelemetryWindowEvent) -> None:
        await self._fan_out("telemetry_window", event)

    async def telemetry_summary(self, event: TelemetrySummaryEvent) -> None:
        await self._fan_out("telemetry_summary", event)

    async def session_ended(self, event: SessionEndedEvent) -> None:
        await self._fan_out("session_ended", event)

    async def session_failed(self, event: SessionFailedEvent) -> None:
        await self._fan_out("session_failed", event)

    async def log(self, event: LogEvent) -> None:
        await self._fan_out("log", event)


HookMethod = Callable[[Any], Awaitable[Any]]


def _flatten(hooks: object) -> list[object]:
    if hooks is None:
        return []
    if isinstance(hooks, CompositeHooks):
        return [leaf for member in hooks.hooks for leaf in _flatten(member)]
    if isinstance(hooks, RuntimeHooks) or isinstance(hooks, str | bytes) or not isinstance(hooks, Iterable):
        return [hooks]
    return [leaf for member in hooks for leaf in _flatten(member)]


def _overrides(hooks: object, name: str) -> HookMethod | None:
    """The bound method ``name`` of ``hooks`` if it does something, else ``None``."""
    method = getattr(hooks, name, None)
    if isinstance(hooks, RuntimeHooks):
        if not callable(method):
            raise TypeError(
                f"{type(hooks).__name__}.{name} is a {type(method).__name__}, which hides the {name} hook "
                "method; rename that attribute"
            )
        inherited = getattr(type(hooks), name, None) is getattr(RuntimeHooks, name)
        if inherited and name not in getattr(hooks, "__dict__", {}):
            return None
    return method if callable(method) else None


class HookTable:
    """For each hook method, the bound methods that override it, in call order.

    Built once from a hooks object, a (nested) sequence of them, or ``None``;
    :class:`CompositeHooks` members are flattened. An object that is not a
    :class:`RuntimeHooks` subclass contributes every hook method it has.
    """

    __slots__ = ("_methods",)

    def __init__(self, hooks: RuntimeHooks | Iterable[RuntimeHooks] | None) -> None:
        leaves = _flatten(hooks)
        for leaf in leaves:
            if not any(callable(getattr(leaf, name, None)) for name in HOOK_METHODS):
                raise TypeError(
                    f"hooks must be RuntimeHooks objects (or a sequence of them); got {type(leaf).__name__}"
                )
        self._methods: dict[str, tuple[HookMethod, ...]] = {
            name: tuple(method for leaf in leaves if (method := _overrides(leaf, name)) is not None)
            for name in HOOK_METHODS
        }

    def listeners(self, name: str) -> tuple[HookMethod, ...]:
        """The methods to call for hook ``name`` (empty: nobody listens)."""
        return self._methods[name]

    def fire(self, name: str, event: object) -> Coroutine[Any, Any, None]:
        """Call a best-effort hook on every listener; log failures, never raise them (await it)."""
        return self.fire_each(name, (event,))

    async def fire_each(self, name: str, events: Iterable[object]) -> None:
        """:meth:`fire` for each of ``events`` in turn (e.g. the episodes one step completed)."""
        methods = self._methods[name]
        for event in events:
            for method in methods:
                try:
                    await method(event)
                except Exception as err:
                    _log.warning("runtime hook %s failed: %s", name, err)

    async def transform(
        self, name: str, event: ActionReceivedEvent | ObservationEmittedEvent
    ) -> bytes | None:
        """Chain a transform hook through every listener; raise :class:`HookFailedError` on error."""
        attribute = "action" if name == "transform_action" else "observation"
        payload = getattr(event, attribute)
        for method in self._methods[name]:
            try:
                payload = await method(event)
            except Exception as err:
                _log.warning("runtime hook %s failed: %s", name, err)
                raise HookFailedError(err) from err
            if payload is not None and not isinstance(payload, bytes):
                if not isinstance(payload, bytearray | memoryview):
                    wrong = HookError(f"{name} must return bytes or None; got {type(payload).__name__}")
                    _log.warning("runtime hook %s failed: %s", name, wrong)
                    raise HookFailedError(wrong)
                payload = bytes(payload)
            setattr(event, attribute, payload)
        return payload
