"""The options of one evaluation, checked once: what :func:`~rlmesh_gym.evaluate` and
:func:`~rlmesh_gym.evaluate_async` take besides the env and the policy."""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, ParamSpec, TypeVar

from rlmesh_gym.evaluation._precision import check_precision_arguments
from rlmesh_gym.runtime import RuntimeHooks, RuntimeLimits

__all__ = ["EvaluationOptions", "check_run_arguments", "coroutine_twin"]

P = ParamSpec("P")
R = TypeVar("R")

# What only a fleet of env servers takes, and what the servers set themselves.
_FLEET_FAILURE_MODES = ("raise", "reassign")
_SERVER_SET = ("num_envs", "autoreset", "vectorization", "env_kwargs", "route_id")
_FLEET_PASSED = (
    "episodes",
    "seed",
    "on_server_failure",
    "hooks",
    "progress",
    "record",
    "limits",
    "session_id",
    "device",
    "deterministic",
    "allow_pickle",
    "max_steps",
)


def check_run_arguments(
    episodes: Any, seed: Any, max_steps: Any, hooks: Any, limits: Any
) -> tuple[RuntimeHooks, ...]:
    """Check the arguments every evaluation takes (one env or a fleet); return ``hooks`` as a tuple."""
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ValueError(f"episodes must be an int >= 1, got {episodes!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63):
        raise ValueError(f"seed must be None or an int in [0, 2**63), got {seed!r}")
    if max_steps is not None and (
        isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1
    ):
        raise ValueError(f"max_steps must be None or an int >= 1 (vector steps), got {max_steps!r}")
    if isinstance(hooks, RuntimeHooks):
        hooks = (hooks,)
    for hook in hooks:
        if not isinstance(hook, RuntimeHooks):
            raise TypeError(f"hooks must be RuntimeHooks instances, got {type(hook).__qualname__}")
    if limits is not None and not isinstance(limits, RuntimeLimits):
        raise TypeError(f"limits must be a RuntimeLimits, got {type(limits).__qualname__}")
    return tuple(hooks)


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EvaluationOptions:
    """:func:`~rlmesh_gym.evaluate`'s keyword arguments, checked on construction.

    The defaults are ``evaluate``'s (tests/evaluation/test_evaluation_options.py holds them equal).
    ``hooks`` is normalised to a tuple and ``max_episodes`` to the episode cap ``target_ci``
    uses (``None`` without a target). The checks that need the env or the policy (spaces,
    render mode) happen when those are resolved.
    """

    episodes: int = 10
    num_envs: int | None = None
    seed: int | None = None
    autoreset: str | None = None
    vectorization: str | None = None
    hooks: Sequence[RuntimeHooks] = ()
    progress: bool = True
    record: str | os.PathLike[str] | Any | None = None
    limits: RuntimeLimits | None = None
    session_id: str | None = None
    route_id: str | None = None
    device: str = "cpu"
    deterministic: bool = True
    allow_pickle: bool = False
    env_kwargs: dict[str, Any] | None = None
    max_steps: int | None = None
    on_server_failure: str = "raise"
    target_ci: float | None = None
    max_episodes: int | None = None

    def __post_init__(self) -> None:
        hooks = check_run_arguments(self.episodes, self.seed, self.max_steps, self.hooks, self.limits)
        object.__setattr__(self, "hooks", hooks)
        cap = check_precision_arguments(self.target_ci, self.max_episodes, self.episodes)
        object.__setattr__(self, "max_episodes", cap)
        if self.on_server_failure not in _FLEET_FAILURE_MODES:
            raise ValueError(
                f"on_server_failure must be one of {', '.join(map(repr, _FLEET_FAILURE_MODES))}, "
                f"got {self.on_server_failure!r}"
            )

    @property
    def effective_limits(self) -> RuntimeLimits:
        """``limits``, or the driver's defaults."""
        return self.limits if self.limits is not None else RuntimeLimits()

    def check_single_env(self) -> None:
        """``ValueError`` for an option that applies only to a fleet of env servers."""
        if self.on_server_failure != "raise":
            raise ValueError(
                f"on_server_failure={self.on_server_failure!r} applies only to a fleet (a list of env "
                "server addresses as env)"
            )

    def fleet_arguments(self) -> dict[str, Any]:
        """The fleet's share of the options (:func:`~rlmesh_gym.evaluation.evaluate_fleet`'s
        keyword arguments); ``ValueError`` for one the servers set or the fleet cannot honour."""
        given = [name for name in _SERVER_SET if getattr(self, name) is not None]
        if given:
            raise ValueError(
                f"{', '.join(given)} cannot be given for a fleet of env servers: each server sets its own "
                "lanes, autoreset mode and env (see serve-env)"
            )
        if self.target_ci is not None:
            raise ValueError(
                "target_ci and max_episodes apply to one session; a fleet evaluates a fixed number of "
                "episodes (choose it with target_ci on one server first)"
            )
        return {name: getattr(self, name) for name in _FLEET_PASSED}


def coroutine_twin(
    blocking: Callable[P, Any],
) -> Callable[[Callable[..., Coroutine[Any, Any, R]]], Callable[P, Coroutine[Any, Any, R]]]:
    """Give the decorated coroutine function ``blocking``'s signature (written once, on ``blocking``).

    The coroutine function is called with the arguments bound to that signature, defaults
    applied, as keyword arguments: a wrong argument gets Python's own ``TypeError``.
    """
    signature = inspect.signature(blocking)

    def decorate(coroutine: Callable[..., Coroutine[Any, Any, R]]) -> Callable[P, Coroutine[Any, Any, R]]:
        async def twin(*args: P.args, **kwargs: P.kwargs) -> R:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            return await coroutine(**bound.arguments)

        twin.__name__ = coroutine.__name__
        twin.__qualname__ = coroutine.__qualname__
        twin.__module__ = coroutine.__module__
        twin.__doc__ = coroutine.__doc__
        returns = inspect.signature(coroutine).return_annotation
        twin.__signature__ = signature.replace(return_annotation=returns)  # type: ignore[attr-defined]
        return twin

    return decorate
