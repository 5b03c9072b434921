"""A single ``gymnasium.Env`` seen as a vector env of one lane.

:class:`GymVectorEnv` drives every env through the calls of a gymnasium vector env (batched
observations and actions, per-lane seeds, ``options["reset_mask"]``, one frame per lane).
:class:`OneLaneVector` gives a single env those calls once, at construction, so the adapter
has no single-env branches on its hot path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import gymnasium
import numpy as np
from gymnasium.spaces import Dict as DictSpace
from gymnasium.spaces import Discrete, Space
from gymnasium.spaces import Tuple as TupleSpace

__all__ = ["OneLaneVector"]


class OneLaneVector:
    """``env`` with the vector-env calls the adapter makes, for one lane.

    ``batch_observation`` turns one observation into a batch of one (the codec's
    ``batch_of_one``, which also checks its structure). The lane's info is the env's own info
    dict, not gymnasium's vectorised info layout.
    """

    num_envs = 1

    def __init__(self, env: gymnasium.Env, batch_observation: Callable[[Any], Any]) -> None:
        self.env = env
        self._action_space = env.action_space
        self._batch = batch_observation

    def reset(self, *, seed: list[int | None] | None, options: Mapping[str, Any] | None) -> tuple[Any, Any]:
        """``env.reset`` with the lane's seed; a ``reset_mask`` (there is one lane) is dropped."""
        if options is not None and "reset_mask" in options:
            options = {key: value for key, value in options.items() if key != "reset_mask"} or None
        kept = None if options is None else dict(options)
        observation, info = self.env.reset(seed=None if seed is None else seed[0], options=kept)
        return self._batch(observation), info

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, Any]:
        """``env.step`` with the lane's action; the results as batches of one."""
        observation, reward, terminated, truncated, info = self.env.step(
            _lane_zero(self._action_space, actions)
        )
        return (
            self._batch(observation),
            np.array([reward], dtype=np.float64),
            np.array([terminated], dtype=np.bool_),
            np.array([truncated], dtype=np.bool_),
            info,
        )

    def render(self) -> list[Any]:
        """The env's frame as a list of one."""
        return [self.env.render()]

    def close(self) -> None:
        self.env.close()


def lane_zero_info(infos: Mapping[str, Any], lane: int) -> dict[str, Any]:
    """The info of the one lane (the env's own dict, copied)."""
    return dict(infos)


def _lane_zero(space: Space, values: Any) -> Any:
    """Lane 0's value out of a batch of one (Discrete values as ``int``)."""
    if isinstance(space, DictSpace):
        return {key: _lane_zero(subspace, values[key]) for key, subspace in space.spaces.items()}
    if isinstance(space, TupleSpace):
        return tuple(
            _lane_zero(subspace, column) for subspace, column in zip(space.spaces, values, strict=True)
        )
    if isinstance(space, Discrete):
        return int(values[0])
    return values[0]
