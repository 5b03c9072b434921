"""Reset planning: what one reset request means for a vector env's lanes, decided without the env.

:func:`plan_reset` validates a reset (every lane, or ``env_indices`` under DISABLED), and
says which lanes start a new episode with which recorded seed, and what to pass to the env's
``reset(seed=..., options=...)``. It knows nothing about gymnasium beyond the shape of those
two arguments, so every rule is tested on its own (``tests/envs/test_reset_plan.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["EnvResetShape", "InvalidReset", "ResetPlan", "plan_reset"]


class InvalidReset(ValueError):
    """A reset request the env cannot honour; the message says why and what to do instead."""


@dataclass(frozen=True, slots=True)
class EnvResetShape:
    """What a reset depends on: lane count, whether the env takes one seed per lane and honours
    ``options["reset_mask"]`` (gymnasium's Sync/AsyncVectorEnv, or one env as a lane), whether it
    runs under DISABLED autoreset, and names for messages."""

    num_envs: int
    per_lane: bool
    disabled: bool
    mode_name: str
    env_name: str


@dataclass(frozen=True, slots=True)
class ResetPlan:
    """A validated reset.

    ``lanes`` start a new episode, with the seed at the same position in ``lane_seeds``
    (``None``: not recorded). ``seed`` and ``options`` are the env's reset arguments.
    ``single_seed`` is set when a custom vector env gets one int seed for all its lanes (so
    none is recorded), to warn about it.
    """

    lanes: list[int]
    lane_seeds: list[int | None]
    seed: Any
    options: dict[str, Any] | None
    single_seed: int | None = None


def plan_reset(
    shape: EnvResetShape,
    env_indices: Sequence[int],
    seeds: Sequence[int],
    options: Mapping[str, Any] | None,
) -> ResetPlan:
    """The reset of every lane (``env_indices`` empty) or of the listed lanes; ``InvalidReset`` if refused.

    >>> shape = EnvResetShape(3, per_lane=True, disabled=True, mode_name="DISABLED", env_name="SyncVectorEnv")
    >>> plan = plan_reset(shape, [2, 0], [7, 8], None)
    >>> plan.lanes, plan.lane_seeds, plan.seed, plan.options["reset_mask"].tolist()
    ([2, 0], [7, 8], [8, None, 7], [True, False, True])
    """
    n = shape.num_envs
    seeds = list(seeds)
    indices = list(env_indices)
    negative = [seed for seed in seeds if seed < 0]
    if negative:
        raise InvalidReset(f"seeds must be >= 0 (gymnasium refuses negative seeds), got {negative}")
    if options is not None:
        options = dict(options)
        if "reset_mask" in options:
            raise InvalidReset(
                "options['reset_mask'] is reserved: the adapter builds it from ResetRequest.env_indices; "
                "list the lanes to reset in env_indices instead"
            )
    if not indices:
        return _plan_whole(shape, seeds, options)

    if not shape.disabled:
        raise InvalidReset(
            f"partial reset (env_indices={indices}) needs DISABLED autoreset, but this env autoresets "
            f"{shape.mode_name} (gymnasium resets finished lanes itself); reset all lanes with empty "
            "env_indices, or build the env with autoreset='disabled'"
        )
    if not shape.per_lane:
        raise InvalidReset(
            f"partial reset (env_indices={indices}) is not supported for {shape.env_name}: "
            "only gymnasium's SyncVectorEnv/AsyncVectorEnv are known to honour options['reset_mask'] "
            "(a custom vector env may reset every lane instead); reset all lanes with empty env_indices, "
            'or build the env with gymnasium.make_vec(..., vectorization_mode="sync")'
        )
    bad = [index for index in indices if not 0 <= index < n]
    if bad:
        raise InvalidReset(f"partial reset: env_indices {bad} out of range; lanes are 0..{n - 1}")
    if len(set(indices)) != len(indices):
        duplicates = sorted({index for index in indices if indices.count(index) > 1})
        raise InvalidReset(f"partial reset: duplicate env_index {duplicates}")
    if seeds and len(seeds) != len(indices):
        raise InvalidReset(
            f"partial reset: expected no seeds or one seed per env_indices entry ({len(indices)}), "
            f"got {len(seeds)} seeds"
        )
    lane_seeds: list[int | None] = list(seeds) if seeds else [None] * len(indices)
    full_seeds: list[int | None] = [None] * n
    mask = np.zeros(n, dtype=np.bool_)
    for index, seed in zip(indices, lane_seeds, strict=True):
        full_seeds[index] = seed
        mask[index] = True
    # gymnasium pops "reset_mask" out of the dict it is given: always a fresh dict.
    partial_options = dict(options or {})
    partial_options["reset_mask"] = mask
    return ResetPlan(indices, lane_seeds, full_seeds, partial_options)


def _plan_whole(shape: EnvResetShape, seeds: list[int], options: dict[str, Any] | None) -> ResetPlan:
    n = shape.num_envs
    if seeds and len(seeds) != n:
        raise InvalidReset(f"expected no seeds or one seed per lane ({n}), got {len(seeds)} seeds")
    lanes = list(range(n))
    lane_seeds: list[int | None] = list(seeds) if seeds else [None] * n
    if seeds and not shape.per_lane:
        # One RNG for all lanes: which seed a lane got is unknown, so none is recorded.
        return ResetPlan(lanes, [None] * n, seeds[0], options, single_seed=seeds[0])
    return ResetPlan(lanes, lane_seeds, list(seeds) if seeds else None, options)
