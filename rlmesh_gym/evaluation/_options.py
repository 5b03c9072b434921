"""``EvaluationOptions``: what ``evaluate()``, ``compare()`` and ``evaluate_fleet()`` take
besides their everyday arguments, in one checked, frozen object."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from rlmesh_gym.runtime import RuntimeHooks, RuntimeLimits

__all__ = ["EvaluationOptions", "check_hooks", "check_options", "fields_set"]


def check_hooks(hooks: Any) -> tuple[RuntimeHooks, ...]:
    """``hooks`` as a tuple (one hook alone is accepted); ``TypeError`` for anything else."""
    if isinstance(hooks, RuntimeHooks):
        return (hooks,)
    if isinstance(hooks, (str, bytes)) or not isinstance(hooks, Sequence):
        raise TypeError(f"hooks must be a sequence of RuntimeHooks instances, got {type(hooks).__qualname__}")
    for hook in hooks:
        if not isinstance(hook, RuntimeHooks):
            raise TypeError(f"hooks must be RuntimeHooks instances, got {type(hook).__qualname__}")
    return tuple(hooks)


def _optional_text(name: str, value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ValueError(f"EvaluationOptions.{name} must be None or a non-empty str, got {value!r}")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EvaluationOptions:
    """The less common settings of an evaluation, passed as ``options=``; checked on construction.

    Args:
        hooks: extra :class:`~rlmesh_gym.runtime.RuntimeHooks` that see every event of the
            session(s) (one hook alone is accepted; stored as a tuple).
        max_steps: cap the session at this many vector steps; reaching it before every lane met
            its quota raises ``EvaluationError`` (its ``.partial`` holds the episodes counted).
            ``None``: no cap.
        max_episodes: with ``target_ci``, the most episodes pilot and estimate may use together
            (default ``100 * episodes``); an error without ``target_ci``.
        limits: the driver's :class:`~rlmesh_gym.runtime.RuntimeLimits` (timeouts, telemetry
            window); ``None``: its defaults.
        vectorization: ``"sync"`` (default) or ``"async"`` (one worker process per lane), for an
            env built from an id.
        env_kwargs: keyword arguments of ``gymnasium.make`` for an env built from an id (stored
            as a dict; recordings keep them, so a replay remakes the same env).
        allow_pickle: let a policy path load a whole pickled module (loading it runs code from
            the file).
        session_id, route_id: the runtime session and route ids; they feed the reset seeds, so
            other ids give other episodes. ``None``: ``default_ids(env_id, num_envs)``.

    Example:
        >>> EvaluationOptions(max_steps=10_000, env_kwargs={"max_episode_steps": 200}).max_steps
        10000
    """

    hooks: Sequence[RuntimeHooks] = ()
    max_steps: int | None = None
    max_episodes: int | None = None
    limits: RuntimeLimits | None = None
    vectorization: str | None = None
    env_kwargs: Mapping[str, Any] | None = None
    allow_pickle: bool = False
    session_id: str | None = None
    route_id: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "hooks", check_hooks(self.hooks))
        for name in ("max_steps", "max_episodes"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                unit = " (vector steps)" if name == "max_steps" else ""
                raise ValueError(f"{name} must be None or an int >= 1{unit}, got {value!r}")
        if self.limits is not None and not isinstance(self.limits, RuntimeLimits):
            raise TypeError(f"limits must be a RuntimeLimits, got {type(self.limits).__qualname__}")
        if self.vectorization is not None and not isinstance(self.vectorization, str):
            raise TypeError(
                f"EvaluationOptions.vectorization must be None, 'sync' or 'async', got {self.vectorization!r}"
            )
        if self.env_kwargs is not None:
            if not isinstance(self.env_kwargs, Mapping) or not all(
                isinstance(k, str) for k in self.env_kwargs
            ):
                raise TypeError(
                    "EvaluationOptions.env_kwargs must be a mapping of str keyword names, "
                    f"got {self.env_kwargs!r}"
                )
            object.__setattr__(self, "env_kwargs", dict(self.env_kwargs))
        if not isinstance(self.allow_pickle, bool):
            raise TypeError(f"EvaluationOptions.allow_pickle must be a bool, got {self.allow_pickle!r}")
        _optional_text("session_id", self.session_id)
        _optional_text("route_id", self.route_id)


def fields_set(options: EvaluationOptions, names: Sequence[str]) -> list[str]:
    """Which of the fields ``names`` of ``options`` differ from their defaults (what a caller set)."""
    defaults = EvaluationOptions()
    return [name for name in names if getattr(options, name) != getattr(defaults, name)]


def check_options(options: Any) -> EvaluationOptions:
    """``options``, or the defaults for ``None``; ``TypeError`` for anything else."""
    if options is None:
        return EvaluationOptions()
    if not isinstance(options, EvaluationOptions):
        raise TypeError(
            f"options must be an rlmesh_gym.EvaluationOptions (or None), got {type(options).__qualname__}"
        )
    return options
