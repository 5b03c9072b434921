"""The runtime error hierarchy, one class per variant of the ``RuntimeError`` of upstream
rlmesh-runtime 0.1.0-rc.1 (docs/design/runtime.md#errors).

The base class is :class:`RuntimeDriverError` (never shadow the builtin ``RuntimeError``).
Every message is upstream's display text, so logs read the same on both sides
(docs/design/runtime.md#errors). Errors that
wrap an underlying exception (:class:`EnvRpcError`, :class:`ModelRpcError`) keep it as
``__cause__``.
"""

from __future__ import annotations

__all__ = [
    "EnvRpcError",
    "HookError",
    "HookFailedError",
    "InvalidSpecError",
    "ModelRouteMismatchError",
    "ModelRpcError",
    "OperationTimeoutError",
    "ProtocolError",
    "RouteCancelledError",
    "RuntimeDriverError",
    "format_duration",
]


def format_duration(seconds: float) -> str:
    """Format a duration the way Rust's ``Debug`` prints ``std::time::Duration``.

    >>> [format_duration(s) for s in (0.005, 300, 1.5, 7e-6, 0, 1.000000001)]
    ['5ms', '300s', '1.5s', '7µs', '0ns', '1.000000001s']
    """
    total_ns = max(0, round(seconds * 1_000_000_000))
    secs, nanos = divmod(total_ns, 1_000_000_000)
    if secs:
        whole, fraction, digits, unit = secs, nanos, 9, "s"
    elif nanos >= 1_000_000:
        (whole, fraction), digits, unit = divmod(nanos, 1_000_000), 6, "ms"
    elif nanos >= 1_000:
        (whole, fraction), digits, unit = divmod(nanos, 1_000), 3, "µs"
    else:
        return f"{nanos}ns"
    text = f"{fraction:0{digits}d}".rstrip("0")
    return f"{whole}.{text}{unit}" if text else f"{whole}{unit}"


class RuntimeDriverError(Exception):
    """Base of every error a :class:`~rlmesh_gym.runtime.RuntimeDriver` run can end with."""

    @property
    def recoverable(self) -> bool:
        """Whether retrying the operation may succeed (only RPC errors can say yes)."""
        return False


class InvalidSpecError(RuntimeDriverError):
    """The session spec failed validation; nothing was started, nothing needs closing."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(f"invalid runtime session spec: {message}")


class OperationTimeoutError(RuntimeDriverError):
    """``env.reset``, ``env.step`` or ``model.predict`` did not answer within its limit."""

    def __init__(self, route_id: str, component_id: str, operation: str, step: int, timeout: float) -> None:
        self.route_id = route_id
        self.component_id = component_id
        self.operation = operation
        self.step = step
        self.timeout = timeout
        super().__init__(
            f"{operation} timed out on route {route_id} component {component_id} "
            f"at runtime step {step} after {format_duration(timeout)}"
        )


class RouteCancelledError(RuntimeDriverError):
    """The caller cancelled the run; ``reason`` says why."""

    def __init__(self, route_id: str, step: int, reason: str) -> None:
        self.route_id = route_id
        self.step = step
        self.reason = reason
        super().__init__(f"route {route_id} cancelled at runtime step {step}: {reason}")


class EnvRpcError(RuntimeDriverError):
    """The environment failed an operation (``reset``, ``step``, ...).

    Upstream's message always ends with a hint about a closed connection to an env server; it
    is added here only when the failure is that one (the ``message`` names a transport error),
    so an env failing in-process reads as what it is.

    >>> str(EnvRpcError("env.step", 3, "env.step raised ValueError: bad action"))
    'environment env.step failed at runtime step 3: env.step raised ValueError: bad action'
    """

    def __init__(self, operation: str, step: int, message: str, *, recoverable: bool = False) -> None:
        self.operation = operation
        self.step = step
        self.message = message
        self._recoverable = recoverable
        text = f"environment {operation} failed at runtime step {step}: {message}"
        if "transport error" in message:
            text += (
                ". If the source is 'transport error: connection closed', the environment server "
                "exited, crashed, or received SIGTERM before replying; inspect the environment "
                "container logs immediately before the runtime error timestamp"
            )
        super().__init__(text)

    @property
    def recoverable(self) -> bool:
        return self._recoverable

    @classmethod
    def wrap(
        cls, operation: str, step: int, error: BaseException, *, recoverable: bool = False
    ) -> EnvRpcError:
        """An ``EnvRpcError`` whose message is ``str(error)`` and whose ``__cause__`` is ``error``."""
        wrapped = cls(operation, step, str(error) or type(error).__name__, recoverable=recoverable)
        wrapped.__cause__ = error
        return wrapped


class ModelRpcError(RuntimeDriverError):
    """The model endpoint failed a request."""

    def __init__(self, component_id: str, message: str, *, recoverable: bool = False) -> None:
        self.component_id = component_id
        self.message = message
        self._recoverable = recoverable
        super().__init__(f"model endpoint {component_id} request failed: {message}")

    @property
    def recoverable(self) -> bool:
        return self._recoverable

    @classmethod
    def wrap(cls, component_id: str, error: BaseException, *, recoverable: bool = False) -> ModelRpcError:
        """A ``ModelRpcError`` whose message is ``str(error)`` and whose ``__cause__`` is ``error``."""
        wrapped = cls(component_id, str(error) or type(error).__name__, recoverable=recoverable)
        wrapped.__cause__ = error
        return wrapped


class ModelRouteMismatchError(RuntimeDriverError):
    """The model answered with a context that is not exactly the request's."""

    def __init__(self, component_id: str, request_id: str) -> None:
        self.component_id = component_id
        self.request_id = request_id
        super().__init__(
            f"model endpoint {component_id} returned mismatched route identity for request {request_id}"
        )


class ProtocolError(RuntimeDriverError):
    """A peer sent something the protocol does not allow (raised by adapters, not the driver)."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(f"protocol error: {message}")


class HookError(Exception):
    """Raised by a hook implementation; its text is the whole message."""


class HookFailedError(RuntimeDriverError):
    """A fatal hook (``transform_action`` / ``transform_observation``) raised."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        super().__init__(f"runtime hook failed: {error}")
        self.__cause__ = error
