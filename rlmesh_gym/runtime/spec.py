"""What one driver session runs: :class:`RuntimeSessionSpec`, its :class:`RuntimeLimits`, and
the :class:`RuntimeReport` a successful run returns.

:meth:`RuntimeSessionSpec.validate` applies upstream's rules in upstream's order with upstream's
sentences (docs/design/runtime.md#session-spec), with two deliberate extensions and a few additions:

Extensions (rules upstream has and this port relaxes):

* **SAME_STEP is accepted** (upstream's rule 11 refuses it). The driver runs it on the
  observational path, exactly like NEXT_STEP: the env adapter rolls a lane's episode id in the
  same step response that completes it, so no lane stalls.
* **DISABLED and UNSPECIFIED are accepted with** ``num_envs > 1`` (upstream's rule 12 refuses
  them). gymnasium >= 1.1 resets a subset of lanes (``options={"reset_mask": ...}``), so the
  driver's partial-reset branch (``ResetRequest.env_indices`` with position-aligned seeds) is
  live. It is the mode in which every episode of every lane gets an exact driver seed.

Additions (checked after upstream's rules, so upstream's first-failure order is unchanged):

* ``num_envs`` must equal ``env_contract.num_envs`` when the contract states a lane count
  (non-zero). A contract with ``num_envs == 0`` states nothing (proto3 default) and is
  accepted with any positive ``num_envs``.
* ``limits`` must be a :class:`RuntimeLimits` (whose fields are non-negative, non-NaN
  seconds; ``math.inf`` means no limit).
* ``base_seed`` must fit a signed 64-bit integer; ``max_episodes`` and ``num_envs`` must be
  integers.

Upstream's ``num_envs == 0`` and ``max_episodes == 0`` rules also catch negative values here
(upstream's unsigned types cannot hold them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from rlmesh_gym.proto import env_pb2, spaces_pb2
from rlmesh_gym.runtime.autoreset import AutoresetMode
from rlmesh_gym.runtime.errors import InvalidSpecError
from rlmesh_gym.runtime.events import RuntimeRouteContext
from rlmesh_gym.runtime.seeds import INT64_MAX, INT64_MIN

__all__ = [
    "CURRENT_WORKFLOW_EDITION",
    "RuntimeLimits",
    "RuntimeReport",
    "RuntimeSessionSpec",
]

CURRENT_WORKFLOW_EDITION = "2026.06"
"""The workflow edition this driver implements (``rlmesh_proto::CURRENT_WORKFLOW_EDITION``)."""

COMPLETED_REQUESTED_EPISODES = "completed requested episodes"
"""The reason of a session that ended because ``max_episodes`` episodes completed."""

_UINT64_MAX = (1 << 64) - 1


def _seconds_to_ms(seconds: float, ceiling: int) -> int:
    """Whole milliseconds of a duration, truncated like ``Duration::as_millis``, saturating."""
    if seconds == math.inf:
        return ceiling
    return min(ceiling, round(seconds * 1_000_000_000) // 1_000_000)


@dataclass(frozen=True, slots=True)
class RuntimeLimits:
    """Timeouts and the telemetry window, in float seconds (``math.inf``: no limit).

    JSON form (:meth:`to_json` / :meth:`from_json`): camelCase keys ending in ``Ms`` holding
    whole milliseconds, e.g. ``{"envStepTimeoutMs": 300000}``; missing keys take the defaults,
    unknown keys are rejected.
    """

    env_reset_timeout: float = 300.0
    """Guard around every ``env.reset``; also sent as ``ResetRequest.timeout_ms``."""
    model_predict_timeout: float = 300.0
    """Guard around every ``model.predict``."""
    env_step_timeout: float = 300.0
    """Guard around every ``env.step``; also sent as ``StepRequest.timeout_ms``."""
    service_close_timeout: float = 5.0
    """Limit of each of env ``close`` and model ``close_route`` at shutdown (also passed to them)."""
    telemetry_window: float = 1.0
    """Shortest interval between two ``telemetry_window`` events."""
    env_connect_timeout: float = 60.0
    """For the owner that connects the env; the driver does not use it."""
    model_connect_timeout: float = 600.0
    """For the owner that connects the model; the driver does not use it."""
    configure_route_timeout: float = 600.0
    """For the owner that configures the model route; the driver does not use it."""

    def __post_init__(self) -> None:
        for spec_field in fields(self):
            value = getattr(self, spec_field.name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(
                    f"RuntimeLimits.{spec_field.name} must be a number of seconds; "
                    f"got {type(value).__name__} {value!r}"
                )
            if math.isnan(value) or value < 0:
                raise ValueError(
                    f"RuntimeLimits.{spec_field.name} must be a non-negative number of seconds "
                    f"(math.inf for no limit); got {value!r}"
                )
            object.__setattr__(self, spec_field.name, float(value))

    def env_step_timeout_ms(self) -> int:
        """``env_step_timeout`` in whole milliseconds, saturating at the int64 maximum."""
        return _seconds_to_ms(self.env_step_timeout, INT64_MAX)

    def env_reset_timeout_ms(self) -> int:
        """``env_reset_timeout`` in whole milliseconds, saturating at the int64 maximum."""
        return _seconds_to_ms(self.env_reset_timeout, INT64_MAX)

    def to_json(self) -> dict[str, int]:
        """The camelCase JSON object: every limit in whole milliseconds (saturating at u64 max)."""
        return {key: _seconds_to_ms(getattr(self, name), _UINT64_MAX) for name, key in _JSON_KEYS.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, object] | str | bytes) -> RuntimeLimits:
        """Read the JSON form (a mapping, or JSON text of an object).

        Raises ``ValueError`` naming the key for an unknown key or a value that is not a
        non-negative integer number of milliseconds below ``2**64``.
        """
        if isinstance(data, str | bytes):
            data = json.loads(data)
        if not isinstance(data, Mapping):
            raise ValueError(f"runtime limits JSON must be an object; got {type(data).__name__}")
        names = {key: name for name, key in _JSON_KEYS.items()}
        values: dict[str, float] = {}
        for key, value in data.items():
            if key not in names:
                expected = ", ".join(f"`{known}`" for known in names)
                raise ValueError(f"unknown field `{key}` in runtime limits, expected one of {expected}")
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _UINT64_MAX:
                raise ValueError(
                    f"runtime limits field `{key}` must be a non-negative integer number of "
                    f"milliseconds; got {value!r}"
                )
            values[names[key]] = value / 1000
        return cls(**values)


_JSON_KEYS = {
    "env_connect_timeout": "envConnectTimeoutMs",
    "model_connect_timeout": "modelConnectTimeoutMs",
    "configure_route_timeout": "configureRouteTimeoutMs",
    "env_reset_timeout": "envResetTimeoutMs",
    "model_predict_timeout": "modelPredictTimeoutMs",
    "env_step_timeout": "envStepTimeoutMs",
    "service_close_timeout": "serviceCloseTimeoutMs",
    "telemetry_window": "telemetryWindowMs",
}


@dataclass(frozen=True, slots=True)
class RuntimeReport:
    """What a run that ended normally returns."""

    session_id: str
    route_id: str
    total_steps: int
    """Driver (whole-vector) steps, not multiplied by ``num_envs``."""
    total_episodes: int
    """``StepResponse.completed_episodes`` entries seen."""
    reason: str = COMPLETED_REQUESTED_EPISODES
    """Why the session ended (extension): the ``max_episodes`` reason, or the reason given to
    :meth:`RuntimeDriver.request_stop`."""


def _rust_debug_str(text: str) -> str:
    """``text`` double-quoted with escapes, the way Rust's ``{:?}`` prints a ``&str``."""
    escapes = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0"}
    out = []
    for char in text:
        if char in escapes:
            out.append(escapes[char])
        elif not char.isprintable():
            out.append(f"\\u{{{ord(char):x}}}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _is_blank(value: object) -> bool:
    return not isinstance(value, str) or not value.strip()


@dataclass(slots=True)
class RuntimeSessionSpec:
    """One route of one session: identities, the served env's contract, lane count, limits.

    Not validated on construction; :meth:`validate` (called by the driver before anything
    runs) raises :class:`~rlmesh_gym.runtime.errors.InvalidSpecError`.
    """

    session_id: str
    """Session identity: in request ids, seeds and every event."""
    route_id: str
    """Route identity within the session: in request ids, seeds, errors and the report."""
    env_contract: env_pb2.EnvContract
    """Spaces, metadata, lane count and autoreset mode of the served env."""
    num_envs: int
    """Lanes the driver tracks (slots, seeds); must be > 0."""
    env_component_id: str = "env"
    """Env endpoint id: in errors, telemetry fallback and the route context."""
    model_component_id: str = "model"
    """Model endpoint id: in errors, telemetry fallback and the route context."""
    env_id: str = ""
    """Env name (e.g. a gym id); only reported in ``SessionStartedEvent``."""
    workflow_edition: str = CURRENT_WORKFLOW_EDITION
    """Edition negotiated with the env; must equal ``"2026.06"``."""
    base_seed: int | None = None
    """If set, every driver reset sends deterministic per-lane seeds; else ``seeds`` is empty."""
    max_episodes: int | None = None
    """End normally once this many episodes completed (checked after each step)."""
    close_env_on_end: bool = True
    """Whether shutdown also closes the env (false: the owner keeps the env endpoint)."""
    limits: RuntimeLimits = field(default_factory=RuntimeLimits)
    """Timeouts and the telemetry window."""

    def route_context(self) -> RuntimeRouteContext:
        """The ``route`` field of every hook event."""
        return RuntimeRouteContext(self.route_id, self.env_component_id, self.model_component_id)

    def observation_space(self) -> spaces_pb2.SpaceSpec | None:
        """The contract's observation space, or ``None`` if it has none."""
        contract = self.env_contract
        return contract.observation_space if contract.HasField("observation_space") else None

    def action_space(self) -> spaces_pb2.SpaceSpec | None:
        """The contract's action space, or ``None`` if it has none."""
        contract = self.env_contract
        return contract.action_space if contract.HasField("action_space") else None

    def validate(self) -> None:
        """Raise :class:`InvalidSpecError` with the first rule this spec breaks (module docstring)."""
        message = self._first_violation()
        if message is not None:
            raise InvalidSpecError(message)

    def _first_violation(self) -> str | None:
        for name in ("session_id", "route_id", "env_component_id", "model_component_id"):
            if _is_blank(getattr(self, name)):
                return f"runtime {name} must not be empty"
        num_envs = self.num_envs
        if isinstance(num_envs, bool) or not isinstance(num_envs, int):
            return (
                f"runtime num_envs must be an integer lane count; got {type(num_envs).__name__} {num_envs!r}"
            )
        if num_envs <= 0:
            return "runtime num_envs must be greater than zero"
        contract = self.env_contract
        if not isinstance(contract, env_pb2.EnvContract):
            return f"runtime env_contract must be an EnvContract message; got {type(contract).__name__}"
        if not contract.HasField("observation_space"):
            return "runtime env_contract is missing observation_space"
        if not contract.HasField("action_space"):
            return "runtime env_contract is missing action_space"
        max_episodes = self.max_episodes
        if max_episodes is not None:
            if isinstance(max_episodes, bool) or not isinstance(max_episodes, int):
                return (
                    "runtime max_episodes must be an integer or None; "
                    f"got {type(max_episodes).__name__} {max_episodes!r}"
                )
            if max_episodes <= 0:
                return "runtime max_episodes must be greater than zero when set"
        if self.workflow_edition != CURRENT_WORKFLOW_EDITION:
            given = self.workflow_edition
            shown = _rust_debug_str(given) if isinstance(given, str) else repr(given)
            return (
                f"runtime cannot drive workflow edition {shown}; this build implements "
                f"{_rust_debug_str(CURRENT_WORKFLOW_EDITION)}"
            )
        try:
            AutoresetMode.from_wire(contract.autoreset_mode)
        except ValueError as error:
            return str(error)
        # Upstream rlmesh-runtime 0.1.0-rc.1's rules 11 (SAME_STEP) and 12 (vectorised
        # DISABLED/UNSPECIFIED) are the two deliberate extensions: both are accepted (module docstring).
        if contract.num_envs and contract.num_envs != num_envs:
            return (
                f"runtime num_envs ({num_envs}) does not match env_contract.num_envs "
                f"({contract.num_envs}); the driver tracks one slot per env lane, so build the "
                "spec with num_envs equal to the contract's lane count"
            )
        if not isinstance(self.limits, RuntimeLimits):
            return f"runtime limits must be a RuntimeLimits; got {type(self.limits).__name__}"
        base_seed = self.base_seed
        if base_seed is not None:
            if isinstance(base_seed, bool) or not isinstance(base_seed, int):
                shown = f"{type(base_seed).__name__} {base_seed!r}"
                return f"runtime base_seed must be an integer or None; got {shown}"
            if not INT64_MIN <= base_seed <= INT64_MAX:
                return f"runtime base_seed must fit a signed 64-bit integer; got {base_seed}"
        return None
