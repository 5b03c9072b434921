"""``EvaluationSettings``: everything one evaluation was asked for, in one checked object.

``evaluate()``'s everyday arguments and its :class:`EvaluationOptions`, flattened: what the
session code reads (one session, a fleet's sessions, the runs of ``compare``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from rlmesh_gym.evaluation._options import EvaluationOptions, check_hooks, check_options
from rlmesh_gym.evaluation._precision import check_precision_arguments
from rlmesh_gym.runtime import RuntimeHooks, RuntimeLimits

__all__ = ["EvaluationSettings"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EvaluationSettings:
    """One evaluation's settings, checked on construction (internal: users pass ``evaluate``'s
    arguments and an :class:`EvaluationOptions`).

    ``hooks`` is normalised to a tuple and ``max_episodes`` to the episode cap ``target_ci``
    uses (``None`` without a target). The checks that need the env or the policy (spaces,
    render mode) happen when those are resolved.
    """

    episodes: int = 10
    num_envs: int | None = None
    seed: int | None = None
    autoreset: str | None = None
    deterministic: bool = True
    device: str = "cpu"
    record: str | os.PathLike[str] | Any | None = None
    progress: bool = True
    target_ci: float | None = None
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
        episodes, seed = self.episodes, self.seed
        if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
            raise ValueError(f"episodes must be an int >= 1, got {episodes!r}")
        if seed is not None and (
            isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63
        ):
            raise ValueError(f"seed must be None or an int in [0, 2**63), got {seed!r}")
        object.__setattr__(self, "hooks", check_hooks(self.hooks))
        cap = check_precision_arguments(self.target_ci, self.max_episodes, episodes)
        object.__setattr__(self, "max_episodes", cap)

    @classmethod
    def of(cls, options: EvaluationOptions | None, **arguments: Any) -> EvaluationSettings:
        """The settings of a call: its ``arguments`` (``evaluate``'s, by name) and its ``options``."""
        checked = check_options(options)
        fields = {field.name: getattr(checked, field.name) for field in dataclasses.fields(EvaluationOptions)}
        return cls(**arguments, **fields)

    @property
    def effective_limits(self) -> RuntimeLimits:
        """``limits``, or the driver's defaults."""
        return self.limits if self.limits is not None else RuntimeLimits()
