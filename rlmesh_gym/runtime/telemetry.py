"""Runtime telemetry: phase timers, telemetry windows and the session summary.

Semantics: docs/design/runtime.md#telemetry-statistics.

Three sources feed it: one *step sample* per driver step (model wait, env step, request and
response bytes), the endpoints' ``OperationTelemetry`` (durations become timing samples,
byte counts and numbers become metric samples), and three *phase timers* (reset, model wait,
env step) that only feed the ``runtime timing summary`` log line.

Statistics follow upstream rlmesh-runtime 0.1.0-rc.1: percentiles pick index
``ceil((n - 1) * p)`` of the sorted samples; whole-session series and every metric series are
bounded reservoirs (capacity 8192, Vitter's Algorithm R, each with its own xorshift64* generator
seeded ``0x9E3779B97F4A7C15``), so percentiles match upstream's past 8192 samples. Durations
are kept as integer nanoseconds; averages are computed from their exact sum (upstream sums float
milliseconds, which can differ in the last bit).

The step-fed whole-session series (model wait, env step, round trip and the two
``rpc.total`` timing keys) all receive one push per step, so their reservoirs draw the same
random numbers: they are kept as one paired reservoir (one draw per step) and split on
demand. If operation telemetry reports under one of the ``rpc.total`` keys, that key is split
off into its own reservoir first, with the same contents and generator state, so the result
equals upstream's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rlmesh_gym.proto import core_pb2
from rlmesh_gym.runtime.events import (
    MetricKind,
    MetricSummary,
    RuntimeRouteContext,
    TelemetrySummaryEvent,
    TelemetryWindowEvent,
    TimingSummary,
)

__all__ = [
    "RESERVOIR_CAPACITY",
    "EndpointTelemetry",
    "PhaseTimer",
    "Reservoir",
    "RuntimeTiming",
    "XorShift64Star",
    "percentile",
]

RESERVOIR_CAPACITY = 8192
_RNG_SEED = 0x9E3779B97F4A7C15
_RNG_MULTIPLIER = 0x2545F4914F6CDD1D
_MASK64 = (1 << 64) - 1

TimingKey = tuple[str, str, str]
"""(operation, component_id, name)."""


class XorShift64Star:
    """The reservoirs' generator: xorshift64* with shifts 12/25/27.

    See docs/design/runtime.md#telemetry-statistics.
    """

    __slots__ = ("state",)

    def __init__(self, state: int = _RNG_SEED) -> None:
        self.state = state

    def next_u64(self) -> int:
        """Advance and return the next 64-bit output."""
        x = self.state
        x ^= x >> 12
        x ^= (x << 25) & _MASK64
        x ^= x >> 27
        self.state = x
        return (x * _RNG_MULTIPLIER) & _MASK64


class Reservoir:
    """A bounded uniform sample of a stream (Algorithm R); ``seen`` counts every push."""

    __slots__ = ("capacity", "items", "seen", "rng")

    def __init__(self, capacity: int = RESERVOIR_CAPACITY) -> None:
        if capacity <= 0:
            raise ValueError(f"reservoir capacity must be positive; got {capacity}")
        self.capacity = capacity
        self.items: list = []
        self.seen = 0
        self.rng = XorShift64Star()

    def push(self, value: float) -> None:
        """Offer one sample."""
        self.seen += 1
        items = self.items
        if len(items) < self.capacity:
            items.append(value)
            return
        slot = self.rng.next_u64() % self.seen
        if slot < self.capacity:
            items[slot] = value


class _PairedReservoir:
    """Two lock-step reservoirs (model wait, env step) sharing one draw per push."""

    __slots__ = ("capacity", "models", "envs", "seen", "rng")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.models: list[int] = []
        self.envs: list[int] = []
        self.seen = 0
        self.rng = XorShift64Star()

    def push(self, model_ns: int, env_ns: int) -> None:
        seen = self.seen = self.seen + 1
        if seen <= self.capacity:
            self.models.append(model_ns)
            self.envs.append(env_ns)
            return
        slot = self.rng.next_u64() % seen
        if slot < self.capacity:
            self.models[slot] = model_ns
            self.envs[slot] = env_ns

    def split(self, column: list[int]) -> Reservoir:
        """A standalone reservoir in exactly the state ``column``'s own reservoir would be in."""
        reservoir = Reservoir(self.capacity)
        reservoir.items = list(column)
        reservoir.seen = self.seen
        reservoir.rng.state = self.rng.state
        return reservoir


def percentile(sorted_values: list, p: float) -> float | None:
    """The ``ceil((n - 1) * p)``-th of ascending ``sorted_values`` (``None`` if empty).

    >>> percentile([10, 20, 30, 40], 0.95), percentile([10, 20, 30, 40], 0.50)
    (40, 30)
    """
    return _nth(sorted_values, p) if sorted_values else None


def _nth(sorted_values: list, p: float) -> Any:
    """:func:`percentile` of a non-empty list."""
    return sorted_values[min(len(sorted_values) - 1, math.ceil((len(sorted_values) - 1) * p))]


def _duration_stats(samples_ns: list[int]) -> tuple[float | None, float | None, float | None, float | None]:
    """avg, p50, p95, p99 in milliseconds."""
    if not samples_ns:
        return None, None, None, None
    ordered = sorted(samples_ns)
    return (
        sum(ordered) / len(ordered) / 1e6,
        _nth(ordered, 0.50) / 1e6,
        _nth(ordered, 0.95) / 1e6,
        _nth(ordered, 0.99) / 1e6,
    )


def _value_stats(samples: list[float]) -> tuple[float | None, float | None, float | None, float | None]:
    if not samples:
        return None, None, None, None
    ordered = sorted(samples)
    total = 0.0
    for value in samples:  # insertion order, as upstream
        total += value
    return (
        total / len(samples),
        percentile(ordered, 0.50),
        percentile(ordered, 0.95),
        percentile(ordered, 0.99),
    )


@dataclass(slots=True)
class PhaseTimer:
    """Count, total, min and max of one phase's latencies (nanoseconds)."""

    count: int = 0
    total_ns: int = 0
    min_ns: int = 0
    max_ns: int = 0

    def record(self, elapsed_ns: int) -> None:
        """Add one latency."""
        if self.count == 0 or elapsed_ns < self.min_ns:
            self.min_ns = elapsed_ns
        if elapsed_ns > self.max_ns:
            self.max_ns = elapsed_ns
        self.count += 1
        self.total_ns += elapsed_ns

    @property
    def avg_ms(self) -> float:
        """Average latency in milliseconds (0 when empty)."""
        return self.total_ns / self.count / 1e6 if self.count else 0.0

    def log_fields(self, prefix: str) -> str:
        return (
            f"{prefix}_count={self.count} {prefix}_avg_ms={self.avg_ms:.3f} "
            f"{prefix}_min_ms={self.min_ns / 1e6:.3f} {prefix}_max_ms={self.max_ns / 1e6:.3f} "
            f"{prefix}_total_ms={self.total_ns / 1e6:.3f}"
        )


MetricKey = tuple[str, str, str, MetricKind]


def _metric_summaries(metrics: dict[MetricKey, Reservoir]) -> list[MetricSummary]:
    summaries = []
    for key in sorted(metrics, key=lambda item: (item[0], item[1], item[2], item[3].value)):
        reservoir = metrics[key]
        summaries.append(MetricSummary(*key, reservoir.seen, *_value_stats(reservoir.items)))
    return summaries


class RuntimeTiming:
    """The telemetry accumulators of one run: phase timers, the open window and the session.

    Times are ``time.perf_counter_ns()`` readings supplied by the caller, so the driver
    reads the clock once per measurement and the accumulators are testable.
    """

    __slots__ = (
        "reset",
        "model_wait",
        "env_step",
        "_capacity",
        "_model_key",
        "_env_key",
        "_window_started",
        "_window_models",
        "_window_envs",
        "_window_request_bytes",
        "_window_response_bytes",
        "_window_timings",
        "_window_metrics",
        "_started",
        "_request_bytes",
        "_response_bytes",
        "_pairs",
        "_timings",
        "_split_keys",
        "_metrics",
    )

    def __init__(
        self, env_component_id: str, model_component_id: str, now_ns: int, capacity: int = RESERVOIR_CAPACITY
    ) -> None:
        self.reset = PhaseTimer()
        self.model_wait = PhaseTimer()
        self.env_step = PhaseTimer()
        self._capacity = capacity
        self._model_key: TimingKey = ("model.predict", model_component_id, "rpc.total")
        self._env_key: TimingKey = ("env.step", env_component_id, "rpc.total")
        self._clear_window(now_ns)
        self._started = now_ns
        self._request_bytes = 0
        self._response_bytes = 0
        self._pairs = _PairedReservoir(capacity)
        self._timings: dict[TimingKey, Reservoir] = {}
        self._split_keys: tuple[TimingKey, ...] = ()
        self._metrics: dict[MetricKey, Reservoir] = {}

    def _clear_window(self, now_ns: int) -> None:
        self._window_started = now_ns
        self._window_models: list[int] = []
        self._window_envs: list[int] = []
        self._window_request_bytes = 0
        self._window_response_bytes = 0
        self._window_timings: dict[TimingKey, list[int]] = {}
        self._window_metrics: dict[MetricKey, Reservoir] = {}

    # -- recording ------------------------------------------------------------------------

    def record_operation_telemetry(
        self, fallback_component_id: str, telemetry: core_pb2.OperationTelemetry | None
    ) -> None:
        """Add an endpoint's metrics (empty operation/component/name fall back as upstream)."""
        if telemetry is None:
            return
        operation = telemetry.operation or "unknown"
        component = telemetry.component_id or fallback_component_id
        for metric in telemetry.metrics:
            which = metric.WhichOneof("value")
            if which is None:
                continue
            name = metric.name or "unspecified"
            if which == "duration_ns":
                key = (operation, component, name)
                self._window_timings.setdefault(key, []).append(metric.duration_ns)
                self._session_timing(key).push(metric.duration_ns)
                continue
            if which == "byte_count":
                metric_key = (operation, component, name, MetricKind.BYTE_COUNT)
                value = float(metric.byte_count)
            else:
                metric_key = (operation, component, name, MetricKind.NUMBER)
                value = metric.number
            window_reservoir = self._window_metrics.get(metric_key)
            if window_reservoir is None:
                window_reservoir = self._window_metrics[metric_key] = Reservoir(self._capacity)
            window_reservoir.push(value)
            session_reservoir = self._metrics.get(metric_key)
            if session_reservoir is None:
                session_reservoir = self._metrics[metric_key] = Reservoir(self._capacity)
            session_reservoir.push(value)

    def _session_timing(self, key: TimingKey) -> Reservoir:
        reservoir = self._timings.get(key)
        if reservoir is None:
            if key == self._model_key:
                reservoir = self._pairs.split(self._pairs.models)
            elif key == self._env_key:
                reservoir = self._pairs.split(self._pairs.envs)
            else:
                reservoir = Reservoir(self._capacity)
            if key in (self._model_key, self._env_key):
                self._split_keys += (key,)
            self._timings[key] = reservoir
        return reservoir

    def record_step(
        self, model_wait_ns: int, env_step_ns: int, request_bytes: int, response_bytes: int
    ) -> None:
        """One driver step's sample."""
        self._window_models.append(model_wait_ns)
        self._window_envs.append(env_step_ns)
        self._window_request_bytes += request_bytes
        self._window_response_bytes += response_bytes
        self._request_bytes += request_bytes
        self._response_bytes += response_bytes
        self._pairs.push(model_wait_ns, env_step_ns)
        for key in self._split_keys:
            self._timings[key].push(model_wait_ns if key == self._model_key else env_step_ns)

    # -- windows and summary ----------------------------------------------------------------

    def window_due(self, now_ns: int, window_ns: int) -> bool:
        """Whether the window has been open at least ``window_ns``."""
        return now_ns - self._window_started >= window_ns

    def flush_window(
        self, session_id: str, route: RuntimeRouteContext, now_ns: int
    ) -> TelemetryWindowEvent | None:
        """Close the window: its event (``None`` if empty or zero-length), and open a new one."""
        elapsed_ns = now_ns - self._window_started
        models, envs = self._window_models, self._window_envs
        event = None
        if elapsed_ns > 0 and models:
            seconds = elapsed_ns / 1e9
            timings = dict(self._window_timings)
            timings[self._model_key] = timings.get(self._model_key, []) + models
            timings[self._env_key] = timings.get(self._env_key, []) + envs
            event = TelemetryWindowEvent(
                session_id,
                route,
                max(1, elapsed_ns // 1_000_000_000),
                len(models),
                len(models) / seconds,
                self._window_request_bytes / seconds,
                self._window_response_bytes / seconds,
                [
                    TimingSummary(*key, len(timings[key]), *_duration_stats(timings[key]))
                    for key in sorted(timings)
                ],
                _metric_summaries(self._window_metrics),
                *_duration_stats(envs),
                *_duration_stats(models),
                *_duration_stats([model + env for model, env in zip(models, envs, strict=True)]),
            )
        self._clear_window(now_ns)
        return event

    def summary(
        self, session_id: str, route: RuntimeRouteContext, now_ns: int
    ) -> TelemetrySummaryEvent | None:
        """The whole session's telemetry (``None`` if no step was recorded)."""
        pairs = self._pairs
        if not pairs.seen:
            return None
        elapsed_ns = max(1, now_ns - self._started)
        seconds = elapsed_ns / 1e9
        timing_series: dict[TimingKey, tuple[int, list[int]]] = {
            key: (reservoir.seen, reservoir.items) for key, reservoir in self._timings.items()
        }
        timing_series.setdefault(self._model_key, (pairs.seen, pairs.models))
        timing_series.setdefault(self._env_key, (pairs.seen, pairs.envs))
        return TelemetrySummaryEvent(
            session_id,
            route,
            max(1, elapsed_ns // 1_000_000_000),
            pairs.seen,
            pairs.seen / seconds,
            self._request_bytes / seconds,
            self._response_bytes / seconds,
            [
                TimingSummary(*key, timing_series[key][0], *_duration_stats(timing_series[key][1]))
                for key in sorted(timing_series)
            ],
            _metric_summaries(self._metrics),
            *_duration_stats(pairs.envs),
            *_duration_stats(pairs.models),
            *_duration_stats([model + env for model, env in zip(pairs.models, pairs.envs, strict=True)]),
        )

    def summary_log_line(self, total_steps: int, total_episodes: int) -> str:
        """The ``runtime timing summary`` log line: totals, then each phase timer."""
        return (
            f"runtime timing summary total_steps={total_steps} total_episodes={total_episodes} "
            f"{self.reset.log_fields('reset')} {self.model_wait.log_fields('model_wait')} "
            f"{self.env_step.log_fields('env_step')}"
        )


class EndpointTelemetry:
    """The ``OperationTelemetry`` an in-process endpoint reports for one operation: the metric
    ``endpoint.total`` with the call's duration.

    One message per operation, updated in place by :meth:`stamp`: an array-form result's
    telemetry is read by the driver right away, so a fresh message per call would be wasted
    work. Whoever keeps one past the endpoint's next call takes a copy (the adapters' message
    forms do).
    """

    __slots__ = ("message", "_metric")

    def __init__(self, operation: str) -> None:
        self.message = core_pb2.OperationTelemetry(operation=operation)
        self._metric = self.message.metrics.add(name="endpoint.total", duration_ns=0)

    def stamp(self, duration_ns: int) -> core_pb2.OperationTelemetry:
        """The message, now saying ``duration_ns``."""
        self._metric.duration_ns = duration_ns
        return self.message
