"""Telemetry: phase timers, percentiles, reservoirs, windows and the summary.

The rules: docs/design/runtime.md#telemetry-statistics.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlmesh_gym.proto import core_pb2
from rlmesh_gym.runtime.events import MetricKind, RuntimeRouteContext, TimingSummary
from rlmesh_gym.runtime.telemetry import PhaseTimer, Reservoir, RuntimeTiming, XorShift64Star, percentile

MS = 1_000_000
ROUTE = RuntimeRouteContext("route-a", "env-a", "model-a")


def telemetry(operation: str, component: str, **metrics: float) -> core_pb2.OperationTelemetry:
    message = core_pb2.OperationTelemetry(operation=operation, component_id=component)
    for name, (kind, amount) in metrics.items():
        metric = message.metrics.add(name=name)
        setattr(metric, kind, amount)
    return message


def test_phase_timer() -> None:
    timer = PhaseTimer()
    for ms in (10, 30, 20):
        timer.record(ms * MS)
    assert (timer.count, timer.total_ns, timer.min_ns, timer.max_ns) == (3, 60 * MS, 10 * MS, 30 * MS)
    assert timer.avg_ms == 20.0
    assert PhaseTimer().avg_ms == 0.0


def test_percentiles() -> None:
    ordered = sorted([10, 30, 20, 40])
    assert (percentile(ordered, 0.95), percentile(ordered, 0.50), percentile(ordered, 0.99)) == (40, 30, 40)
    assert [percentile([7], p) for p in (0.5, 0.95, 0.99)] == [7, 7, 7]
    assert percentile([], 0.5) is None
    # ceil((n - 1) * p) with float maths: n=21, p=0.95 -> ceil(19.0) = 19
    assert percentile(list(range(21)), 0.95) == 19


def reference_xorshift(count: int) -> list[int]:
    """xorshift64* written with numpy's wrapping uint64 arithmetic, independently."""
    with np.errstate(over="ignore"):
        state = np.uint64(0x9E3779B97F4A7C15)
        out = []
        for _ in range(count):
            state ^= state >> np.uint64(12)
            state ^= state << np.uint64(25)
            state ^= state >> np.uint64(27)
            out.append(int(state * np.uint64(0x2545F4914F6CDD1D)))
    return out


def test_xorshift64_star_sequence() -> None:
    rng = XorShift64Star()
    assert [rng.next_u64() for _ in range(50)] == reference_xorshift(50)


def test_reservoir_keeps_everything_below_capacity() -> None:
    reservoir = Reservoir(capacity=8)
    for sample in range(8):
        reservoir.push(sample)
    assert reservoir.items == list(range(8)) and reservoir.seen == 8


def test_reservoir_is_bounded_and_counts_every_push() -> None:
    reservoir = Reservoir(capacity=4)
    for sample in range(10_000):
        reservoir.push(float(sample))
    assert len(reservoir.items) == 4 and reservoir.seen == 10_000


def test_reservoir_follows_algorithm_r_with_the_seeded_generator() -> None:
    capacity, pushes = 5, 200
    draws = iter(reference_xorshift(pushes))
    expected: list[int] = []
    for seen, sample in enumerate(range(pushes), start=1):
        if len(expected) < capacity:
            expected.append(sample)
        elif (slot := next(draws) % seen) < capacity:
            expected[slot] = sample
    reservoir = Reservoir(capacity)
    for sample in range(pushes):
        reservoir.push(sample)
    assert reservoir.items == expected


def test_reservoir_refuses_a_non_positive_capacity() -> None:
    with pytest.raises(ValueError, match="reservoir capacity must be positive; got 0"):
        Reservoir(0)


def test_window_merges_operation_telemetry_with_step_samples() -> None:
    timing = RuntimeTiming("env-a", "model-a", now_ns=0)
    timing.record_operation_telemetry(
        "model-a", telemetry("model.predict", "", **{"endpoint.total": ("duration_ns", 2 * MS)})
    )
    timing.record_step(10 * MS, 20 * MS, request_bytes=8, response_bytes=16)
    window = timing.flush_window("session", ROUTE, now_ns=2_000_000_000)
    assert window is not None
    assert [(t.operation, t.component_id, t.name, t.sample_count, t.avg_ms) for t in window.timings] == [
        ("env.step", "env-a", "rpc.total", 1, 20.0),
        ("model.predict", "model-a", "endpoint.total", 1, 2.0),
        ("model.predict", "model-a", "rpc.total", 1, 10.0),
    ]
    assert (window.window_seconds, window.sample_count) == (2, 1)
    assert (window.steps_per_second, window.request_bytes_per_second, window.response_bytes_per_second) == (
        0.5,
        4.0,
        8.0,
    )
    assert (window.env_latency_ms_avg, window.model_latency_ms_p99, window.round_trip_ms_p50) == (
        20.0,
        10.0,
        30.0,
    )
    assert (window.reconnects, window.drops, window.metrics) == (0, 0, [])
    assert window.route == ROUTE and window.session_id == "session"


def test_window_seconds_are_whole_and_at_least_one() -> None:
    timing = RuntimeTiming("e", "m", now_ns=0)
    timing.record_step(MS, MS, 0, 0)
    assert timing.flush_window("s", ROUTE, now_ns=1_500).window_seconds == 1
    timing.record_step(MS, MS, 0, 0)
    assert timing.flush_window("s", ROUTE, now_ns=1_500 + 3_900_000_000).window_seconds == 3


def test_empty_or_zero_length_windows_emit_nothing_and_clear() -> None:
    timing = RuntimeTiming("e", "m", now_ns=100)
    assert timing.flush_window("s", ROUTE, now_ns=5_000) is None  # no steps
    timing.record_step(MS, MS, 0, 0)
    assert timing.flush_window("s", ROUTE, now_ns=5_000) is None  # zero elapsed: cleared
    timing.record_step(2 * MS, 2 * MS, 0, 0)
    window = timing.flush_window("s", ROUTE, now_ns=6_000)
    assert window.sample_count == 1 and window.model_latency_ms_avg == 2.0


def test_window_due() -> None:
    timing = RuntimeTiming("e", "m", now_ns=1_000)
    assert not timing.window_due(1_000 + 999, 1_000)
    assert timing.window_due(2_000, 1_000)


def test_summary_is_bounded_but_counts_every_sample() -> None:
    timing = RuntimeTiming("env-a", "model-a", now_ns=0)
    endpoint = telemetry("model.predict", "model-a", **{"endpoint.total": ("duration_ns", 2 * MS)})
    for _ in range(100_000):
        timing.record_operation_telemetry("model-a", endpoint)
        timing.record_step(10 * MS, 20 * MS, 0, 0)
    summary = timing.summary("s", ROUTE, now_ns=4_000_000_000)
    assert summary.sample_count == 100_000 and summary.total_seconds == 4
    assert {t.name: t.sample_count for t in summary.timings if t.operation == "model.predict"} == {
        "endpoint.total": 100_000,
        "rpc.total": 100_000,
    }
    assert (
        len(timing._pairs.models) <= 8192
        and len(timing._timings[("model.predict", "model-a", "endpoint.total")].items) <= 8192
    )


def test_byte_count_and_number_metrics() -> None:
    timing = RuntimeTiming("env-a", "model-a", now_ns=0)
    timing.record_operation_telemetry(
        "env-a", telemetry("env.step", "", bytes=("byte_count", 2048), fps=("number", 8.0))
    )
    timing.record_step(MS, MS, 0, 0)
    window = timing.flush_window("s", ROUTE, now_ns=10)
    assert [(m.name, m.kind, m.sample_count, m.avg, m.p50) for m in window.metrics] == [
        ("bytes", MetricKind.BYTE_COUNT, 1, 2048.0, 2048.0),
        ("fps", MetricKind.NUMBER, 1, 8.0, 8.0),
    ]
    summary = timing.summary("s", ROUTE, now_ns=10)
    assert [(m.kind, m.sample_count, m.avg) for m in summary.metrics] == [
        (MetricKind.BYTE_COUNT, 1, 2048.0),
        (MetricKind.NUMBER, 1, 8.0),
    ]


def test_metric_ordering_puts_byte_count_before_number_for_one_name() -> None:
    timing = RuntimeTiming("e", "m", now_ns=0)
    timing.record_operation_telemetry("e", telemetry("op", "c", x=("number", 1.0)))
    timing.record_operation_telemetry("e", telemetry("op", "c", x=("byte_count", 3)))
    timing.record_operation_telemetry("e", telemetry("a-op", "c", x=("number", 1.0)))
    timing.record_step(MS, MS, 0, 0)
    keys = [(m.operation, m.name, m.kind) for m in timing.summary("s", ROUTE, 10).metrics]
    assert keys == [
        ("a-op", "x", MetricKind.NUMBER),
        ("op", "x", MetricKind.BYTE_COUNT),
        ("op", "x", MetricKind.NUMBER),
    ]


def test_fallback_names_and_valueless_metrics() -> None:
    timing = RuntimeTiming("e", "m", now_ns=0)
    message = core_pb2.OperationTelemetry()
    message.metrics.add(duration_ns=5 * MS)
    message.metrics.add(name="skipped")  # no value
    timing.record_operation_telemetry("fallback", message)
    timing.record_operation_telemetry("fallback", None)
    timing.record_step(MS, MS, 0, 0)
    timings = timing.flush_window("s", ROUTE, 10).timings
    assert ("unknown", "fallback", "unspecified", 1, 5.0) in [
        (t.operation, t.component_id, t.name, t.sample_count, t.avg_ms) for t in timings
    ]
    assert len(timings) == 3


def test_summary_keeps_samples_across_window_flushes() -> None:
    timing = RuntimeTiming("e", "m", now_ns=0)
    timing.record_step(10 * MS, 20 * MS, 0, 0)
    assert timing.flush_window("s", ROUTE, now_ns=5) is not None
    timing.record_step(30 * MS, 40 * MS, 0, 0)
    summary = timing.summary("s", ROUTE, now_ns=10)
    assert (summary.env_latency_ms_avg, summary.model_latency_ms_avg, summary.round_trip_ms_avg) == (
        30.0,
        20.0,
        50.0,
    )
    assert summary.sample_count == 2


def test_summary_is_none_without_steps() -> None:
    timing = RuntimeTiming("e", "m", now_ns=0)
    timing.record_operation_telemetry("e", telemetry("env.reset", "e", t=("duration_ns", MS)))
    assert timing.summary("s", ROUTE, now_ns=10) is None


def reference_summary_timings(steps, collide_at: int, capacity: int) -> list[TimingSummary]:
    """Upstream's layout: one plain reservoir per timing key."""
    from rlmesh_gym.runtime.telemetry import _duration_stats

    reservoirs: dict[tuple[str, str, str], Reservoir] = {}

    def push(key, sample):
        reservoirs.setdefault(key, Reservoir(capacity)).push(sample)

    for index, (model_ns, env_ns) in enumerate(steps):
        if index >= collide_at:
            push(("env.step", "env-a", "rpc.total"), 7 * MS + index)
        push(("model.predict", "model-a", "rpc.total"), model_ns)
        push(("env.step", "env-a", "rpc.total"), env_ns)
    return [TimingSummary(*key, r.seen, *_duration_stats(r.items)) for key, r in sorted(reservoirs.items())]


@pytest.mark.parametrize("collide_at", [0, 30, 150, 10**9])
def test_paired_step_reservoir_equals_one_reservoir_per_key(collide_at: int) -> None:
    # The step series share one draw per step; a key that operation telemetry also reports
    # under is split off with the same state, so the result is upstream's, sample for sample.
    capacity = 16
    rng = np.random.default_rng(3)
    steps = [(int(a), int(b)) for a, b in rng.integers(1, 10**7, size=(200, 2))]
    timing = RuntimeTiming("env-a", "model-a", now_ns=0, capacity=capacity)
    for index, (model_ns, env_ns) in enumerate(steps):
        if index >= collide_at:
            timing.record_operation_telemetry(
                "env-a", telemetry("env.step", "env-a", **{"rpc.total": ("duration_ns", 7 * MS + index)})
            )
        timing.record_step(model_ns, env_ns, 0, 0)
    summary = timing.summary("s", ROUTE, now_ns=10)
    assert summary.timings == reference_summary_timings(steps, collide_at, capacity)
    # The latency series stay the step samples only.
    reference_models = Reservoir(capacity)
    for model_ns, _ in steps:
        reference_models.push(model_ns)
    assert summary.model_latency_ms_p95 == percentile(sorted(reference_models.items), 0.95) / 1e6


def test_summary_log_line() -> None:
    timing = RuntimeTiming("e", "m", now_ns=0)
    timing.reset.record(2 * MS)
    timing.model_wait.record(3 * MS)
    line = timing.summary_log_line(total_steps=1, total_episodes=1)
    assert line.startswith(
        "runtime timing summary total_steps=1 total_episodes=1 reset_count=1 reset_avg_ms=2.000"
    )
    assert "model_wait_max_ms=3.000" in line and "env_step_count=0" in line
