"""The events the driver hands to :class:`~rlmesh_gym.runtime.hooks.RuntimeHooks`.

Every event carries upstream's fields with upstream's meaning (docs/design/runtime.md#events).
Single-valued lane fields (``episode_id``, ``episode_record_id``, ``step``, ``env_index``)
describe **lane 0**, as upstream. Extensions are added after upstream's fields, with
defaults, and never change an upstream field:

* :class:`EpisodeCompletedEvent` ``.metadata``: the env's whole ``EpisodeMetadata`` (``seed``,
  timestamps included), and ``.episode``, the same in array form
  (:class:`~rlmesh_gym.runtime.seams.CompletedEpisode`);
* :class:`StepCompletedEvent` ``.response`` (the env's whole ``StepResponse``),
  ``.episode_ids`` and ``.episode_record_ids`` (every lane, taken after the step was recorded
  and before episode ids rolled, so they name the episodes the step belonged to), and
  ``.result``, the same step in array form (``EnvStepBatch``).

Payloads (``observation``, ``action``) are the raw message bytes (``bytes``), or ``None`` when
there is none. Protobuf fields (``action_space``, ``observation_space``, ``metadata``,
``response``, ``final_info``) are the driver's own messages, shared, not copied. One event
object goes to every hook in turn (plain slotted dataclasses: a frozen one costs about 1 us
more to build per event), so treat events as read-only; only the transform hooks' return
values change what is sent.

Messages an event carries are built the first time a hook reads them: the driver runs on
arrays in-process (:mod:`rlmesh_gym.runtime.seams`), so ``StepCompletedEvent.response`` and
``EpisodeCompletedEvent.metadata`` / ``.final_info`` cost nothing unless read. Such an event is
an instance of a private subclass of the documented class; its fields read the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import TYPE_CHECKING, Any

from rlmesh_gym.proto import env_pb2, spaces_pb2

if TYPE_CHECKING:
    from rlmesh_gym.runtime.seams import CompletedEpisode, EnvStepBatch

__all__ = [
    "ActionReceivedEvent",
    "EnvConnectedEvent",
    "EpisodeCompletedEvent",
    "EpisodeStartedEvent",
    "EpisodesCompletedEvent",
    "LogEvent",
    "LogLevel",
    "MetricKind",
    "MetricSummary",
    "ModelConnectedEvent",
    "ObservationEmittedEvent",
    "RuntimeRouteContext",
    "SessionEndedEvent",
    "SessionFailedEvent",
    "SessionStartedEvent",
    "StepCompletedEvent",
    "TelemetrySummaryEvent",
    "TelemetryWindowEvent",
    "TimingSummary",
]


@dataclass(frozen=True, slots=True)
class RuntimeRouteContext:
    """The ``route`` of every event: route id and the two endpoint ids."""

    route_id: str = ""
    env_component_id: str = ""
    model_component_id: str = ""


class LogLevel(Enum):
    """Level of a :class:`LogEvent`."""

    DEBUG = "debug"
    INFO = "info"
    WARN = "warn"
    ERROR = "error"


class MetricKind(Enum):
    """Kind of a non-duration operation metric; ``BYTE_COUNT`` sorts before ``NUMBER``."""

    BYTE_COUNT = 0
    NUMBER = 1


@dataclass(slots=True)
class EnvConnectedEvent:
    """The owner connected the env (the driver never fires this)."""

    session_id: str
    route: RuntimeRouteContext
    env_id: str


@dataclass(slots=True)
class ModelConnectedEvent:
    """The owner connected the model (the driver never fires this)."""

    session_id: str
    route: RuntimeRouteContext


@dataclass(slots=True)
class SessionStartedEvent:
    """First event of a run, before the cold reset."""

    session_id: str
    route: RuntimeRouteContext
    env_id: str


@dataclass(slots=True)
class SessionEndedEvent:
    """The run ended normally (``max_episodes`` reached, or a requested stop)."""

    session_id: str
    route: RuntimeRouteContext
    reason: str
    total_steps: int
    total_episodes: int


@dataclass(slots=True)
class SessionFailedEvent:
    """The run failed after validation; ``reason`` is the error's text."""

    session_id: str
    route: RuntimeRouteContext
    reason: str


@dataclass(slots=True)
class LogEvent:
    """A log line for the hooks (the driver sends one, after the cold reset)."""

    session_id: str
    route: RuntimeRouteContext
    level: LogLevel
    message: str
    source: str | None = None


@dataclass(slots=True)
class EpisodeStartedEvent:
    """An episode id the route had not seen before appeared on a lane."""

    session_id: str
    route: RuntimeRouteContext
    episode_id: str
    episode_record_id: str
    """``ep-000001``-style id, unique within the route."""
    episode_index: int
    """Route-global counter, from 1."""
    env_index: int
    """The lane (position in the env's ``episode_ids``)."""
    started_from_auto_reset: bool
    """False only for the cold reset's episodes (true for driver-issued DISABLED resets too)."""


@dataclass(slots=True)
class EpisodeCompletedEvent:
    """One ``StepResponse.completed_episodes`` entry."""

    session_id: str
    route: RuntimeRouteContext
    episode_id: str
    episode_record_id: str
    """``""`` if the route never saw this episode start."""
    episode_index: int
    """0 if the route never saw this episode start."""
    env_index: int
    """From the env's metadata."""
    step_count: int
    cumulative_reward: float
    terminated: bool
    truncated: bool
    duration_ms: int
    final_info: spaces_pb2.MetaMap | None
    metadata: env_pb2.EpisodeMetadata | None = None
    """Extension: the env's whole ``EpisodeMetadata`` (its ``seed`` in particular)."""
    episode: CompletedEpisode | None = None
    """Extension: the same episode in array form (``final_info`` as the env returned it)."""


@dataclass(slots=True)
class EpisodesCompletedEvent:
    """Extension: every episode one step completed, at once (the step's ``completed_episodes``,
    in the env's order), for a hook that handles them together.

    Fired once per step that completed episodes, before that step's
    :class:`EpisodeCompletedEvent` events. Upstream has no such event.
    """

    session_id: str
    route: RuntimeRouteContext
    episodes: Sequence[CompletedEpisode]
    """The completed episodes in array form (``final_info`` as the env returned it)."""
    records: Sequence[tuple[str, int]]
    """Each episode's ``(episode_record_id, episode_index)``, aligned with ``episodes``:
    ``("", 0)`` for an episode the route never saw start."""


@dataclass(slots=True)
class ActionReceivedEvent:
    """The model's action for one driver step (fields from the snapshot before predict)."""

    session_id: str
    route: RuntimeRouteContext
    episode_id: str
    episode_record_id: str
    episode_ids: list[str]
    """Every lane's episode id (``""`` for none)."""
    episode_record_ids: list[str]
    step: int
    """Lane 0's step before predict + 1."""
    env_index: int
    action_space: spaces_pb2.SpaceSpec
    action: bytes | None
    """Raw action bytes; after ``transform_action``, the transformed ones."""


@dataclass(slots=True)
class StepCompletedEvent:
    """One driver step finished (lane fields after the step was recorded, before rolls)."""

    session_id: str
    route: RuntimeRouteContext
    episode_id: str
    episode_record_id: str
    step: int
    env_index: int
    rewards: list[float]
    response: env_pb2.StepResponse | None = None
    """Extension: the env's whole ``StepResponse``."""
    episode_ids: list[str] = field(default_factory=list)
    """Extension: every lane's episode id the step belonged to."""
    episode_record_ids: list[str] = field(default_factory=list)
    """Extension: every lane's episode record id the step belonged to."""
    result: EnvStepBatch | None = None
    """Extension: the env's step result in array form (rewards and masks as arrays)."""


@dataclass(slots=True)
class ObservationEmittedEvent:
    """An observation about to be sent to the model (snapshot at emission)."""

    session_id: str
    route: RuntimeRouteContext
    episode_id: str
    episode_record_id: str
    episode_ids: list[str]
    episode_record_ids: list[str]
    step: int
    env_index: int
    is_reset: bool
    """True for the cold reset and every driver-issued (DISABLED-path) reset."""
    num_envs: int
    observation_space: spaces_pb2.SpaceSpec
    observation: bytes | None
    """Raw observation bytes; after ``transform_observation``, exactly what the model gets."""


@dataclass(frozen=True, slots=True)
class TimingSummary:
    """Duration statistics of one (operation, component, name) key, in milliseconds."""

    operation: str
    component_id: str
    name: str
    sample_count: int
    avg_ms: float | None
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None


@dataclass(frozen=True, slots=True)
class MetricSummary:
    """Statistics of one non-duration operation metric."""

    operation: str
    component_id: str
    name: str
    kind: MetricKind
    sample_count: int
    avg: float | None
    p50: float | None
    p95: float | None
    p99: float | None


@dataclass(slots=True)
class TelemetryWindowEvent:
    """Telemetry of the steps since the previous window (at most one per ``telemetry_window``)."""

    session_id: str
    route: RuntimeRouteContext
    window_seconds: int
    """Whole seconds the window was open, at least 1."""
    sample_count: int
    """Driver steps in the window."""
    steps_per_second: float | None
    request_bytes_per_second: float | None
    response_bytes_per_second: float | None
    timings: list[TimingSummary]
    metrics: list[MetricSummary]
    env_latency_ms_avg: float | None
    env_latency_ms_p50: float | None
    env_latency_ms_p95: float | None
    env_latency_ms_p99: float | None
    model_latency_ms_avg: float | None
    model_latency_ms_p50: float | None
    model_latency_ms_p95: float | None
    model_latency_ms_p99: float | None
    round_trip_ms_avg: float | None
    round_trip_ms_p50: float | None
    round_trip_ms_p95: float | None
    round_trip_ms_p99: float | None
    reconnects: int = 0
    drops: int = 0


@dataclass(slots=True)
class TelemetrySummaryEvent:
    """Telemetry of the whole session, sent once on the normal end."""

    session_id: str
    route: RuntimeRouteContext
    total_seconds: int
    """Whole seconds since the session's timing began, at least 1."""
    sample_count: int
    """Driver steps of the session."""
    steps_per_second: float | None
    request_bytes_per_second: float | None
    response_bytes_per_second: float | None
    timings: list[TimingSummary]
    metrics: list[MetricSummary]
    env_latency_ms_avg: float | None
    env_latency_ms_p50: float | None
    env_latency_ms_p95: float | None
    env_latency_ms_p99: float | None
    model_latency_ms_avg: float | None
    model_latency_ms_p50: float | None
    model_latency_ms_p95: float | None
    model_latency_ms_p99: float | None
    round_trip_ms_avg: float | None
    round_trip_ms_p50: float | None
    round_trip_ms_p95: float | None
    round_trip_ms_p99: float | None
    reconnects: int = 0
    drops: int = 0


# -- events whose messages are built on first read -----------------------------------------------


def _built_on_read(slot: Any, builder: str, argument: str | None = None) -> property:
    """A property over the dataclass slot ``slot``, set on first read by calling the builder kept
    in the attribute ``builder`` (with the attribute ``argument``, if named); a write wins."""

    def read(self: Any) -> Any:
        build = getattr(self, builder)
        if build is not None:
            setattr(self, builder, None)
            slot.__set__(self, build() if argument is None else build(getattr(self, argument)))
        return slot.__get__(self)

    def write(self: Any, value: Any) -> None:
        setattr(self, builder, None)
        slot.__set__(self, value)

    return property(read, write)


def _as_public(event: Any, public: type) -> tuple[type, tuple[Any, ...]]:
    """``__reduce__`` of a lazy event: the documented class with every field read (built)."""
    return public, tuple(getattr(event, item.name) for item in fields(public))


class LazyStepCompletedEvent(StepCompletedEvent):
    """A :class:`StepCompletedEvent` whose ``response`` is built by ``build()`` on first read.

    It takes the documented class's arguments plus ``build``; pickling or copying it gives a
    plain :class:`StepCompletedEvent`.
    """

    __slots__ = ("_build_response",)

    response = _built_on_read(StepCompletedEvent.response, "_build_response")  # type: ignore[misc]

    def __init__(
        self, *args: Any, build: Callable[[], env_pb2.StepResponse] | None = None, **kwargs: Any
    ) -> None:
        StepCompletedEvent.__init__(self, *args, **kwargs)
        if build is not None:
            self._build_response = build

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:
        return _as_public(self, StepCompletedEvent)


class LazyEpisodeCompletedEvent(EpisodeCompletedEvent):
    """An :class:`EpisodeCompletedEvent` whose ``metadata`` and ``final_info`` are built from
    ``episode`` on first read, by ``build_metadata(episode)`` and ``build_final_info(episode)``.

    It takes the documented class's arguments but ``final_info`` and ``metadata``, then the two
    builders; pickling or copying it gives a plain :class:`EpisodeCompletedEvent`.
    """

    __slots__ = ("_build_metadata", "_build_final_info")

    metadata = _built_on_read(EpisodeCompletedEvent.metadata, "_build_metadata", "episode")  # type: ignore[misc]
    final_info = _built_on_read(EpisodeCompletedEvent.final_info, "_build_final_info", "episode")  # type: ignore[misc]

    def __init__(
        self,
        session_id: str,
        route: RuntimeRouteContext,
        episode_id: str,
        episode_record_id: str,
        episode_index: int,
        env_index: int,
        step_count: int,
        cumulative_reward: float,
        terminated: bool,
        truncated: bool,
        duration_ms: int,
        episode: CompletedEpisode,
        build_metadata: Callable[[CompletedEpisode], env_pb2.EpisodeMetadata],
        build_final_info: Callable[[CompletedEpisode], spaces_pb2.MetaMap | None],
    ) -> None:
        # The fields set one by one (the driver makes one per finished episode): metadata and
        # final_info stay unset until read, when their builders fill them.
        self.session_id = session_id
        self.route = route
        self.episode_id = episode_id
        self.episode_record_id = episode_record_id
        self.episode_index = episode_index
        self.env_index = env_index
        self.step_count = step_count
        self.cumulative_reward = cumulative_reward
        self.terminated = terminated
        self.truncated = truncated
        self.duration_ms = duration_ms
        self.episode = episode
        self._build_metadata = build_metadata
        self._build_final_info = build_final_info

    def __reduce__(self) -> tuple[type, tuple[Any, ...]]:
        return _as_public(self, EpisodeCompletedEvent)


# They are the documented events to every reader (names, reprs, isinstance), built lazily.
for _lazy, _public in (
    (LazyStepCompletedEvent, StepCompletedEvent),
    (LazyEpisodeCompletedEvent, EpisodeCompletedEvent),
):
    _lazy.__name__ = _public.__name__
    _lazy.__qualname__ = _public.__qualname__
