"""The ``OperationTelemetry`` an endpoint attaches to each reply (docs/design/wire.md#env-session)."""

from __future__ import annotations

import time

from rlmesh_gym.proto import core_pb2

__all__ = ["endpoint_telemetry"]


def endpoint_telemetry(operation: str, started_ns: int) -> core_pb2.OperationTelemetry:
    """Upstream's form: the operation plus one ``endpoint.total`` metric, the handler wall time."""
    duration = max(0, time.perf_counter_ns() - started_ns)
    return core_pb2.OperationTelemetry(
        operation=operation,
        metrics=[core_pb2.OperationMetric(name="endpoint.total", duration_ns=duration)],
    )
