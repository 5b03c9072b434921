"""SAME_STEP stepping of the sub-envs of a ``SyncVectorEnv`` that :meth:`GymVectorEnv.make` built.

gymnasium's ``SyncVectorEnv.step`` under SAME_STEP batches each finished lane's terminal
observation and info into ``infos["final_obs"]``/``infos["final_info"]`` (object arrays and
masks built lane by lane), then copies its observation, reward and done buffers for the caller.
The adapter only unbatches those again, one finished episode at a time, into the episode's
``final_info``. :class:`SameStepLanes` runs the same loop over the same sub-envs and hands each
finished lane's terminal observation and info over directly, in fresh arrays that need no copy:
on short episodes (CartPole under a weak policy) that is about a fifth of the vector step.

What the adapter gets is what it would make of gymnasium's own step: the same observations,
rewards, masks and infos (``final_*`` keys aside, which the adapter removes anyway), built with
gymnasium's own ``iterate``, ``concatenate`` and ``_add_info`` (the observation batch of a Box,
Discrete, MultiBinary or MultiDiscrete space with one ``np.array`` when the lanes' observations
already have its dtype and shape: the array gymnasium's ``np.stack`` would make, for a third of
the cost); each finished lane's ``final_info`` is the terminal info as gymnasium's batching
then :func:`~._infos.lane_info` would give it, plus ``"final_obs"``.
tests/envs/test_same_step_lanes.py holds the two side by side. Only an env built by ``make`` is
stepped this way: a vector env a user passes in keeps its own ``step``.

Being its own loop, it can also leave lanes out: a lane marked with :meth:`SameStepLanes.retire`
plays out its next episode (the running one, or the one a reset starts) and is then
**retired**: not reset when that episode ends (the step reports its terminal observation), and
not stepped again until the next reset, each step reporting that observation, reward 0, not
done and no info. ``evaluate()`` marks a lane when its next episode is the last one it counts
there, so the lanes that finish their share early do not play episodes nobody counts while
the slowest lane catches up.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from gymnasium.spaces import Box, Discrete, MultiBinary, MultiDiscrete
from gymnasium.vector import SyncVectorEnv
from gymnasium.vector.utils import concatenate, create_empty_array, iterate

from rlmesh_gym.envs._infos import lane_info

__all__ = ["SameStepLanes"]

# Spaces whose batch gymnasium's concatenate makes with one np.stack into an empty array.
_STACKED_SPACES = (Box, Discrete, MultiBinary, MultiDiscrete)


class SameStepLanes:
    """The SAME_STEP step of ``vector``'s sub-envs, with each finished lane's final info kept aside.

    ``step(actions)`` returns ``(observations, rewards, terminated, truncated, infos)`` as
    ``vector.step`` would, without the ``final_*`` keys and with arrays private to the step;
    :meth:`finished_lanes` are then the lanes that finished and :meth:`final_info` a finished
    lane's terminal info and observation.
    """

    __slots__ = (
        "_vector",
        "_envs",
        "_action_space",
        "_observation_space",
        "_num_envs",
        "_iterate",
        "_concatenate",
        "_empty_batch",
        "_final_observations",
        "_final_infos",
        "_batched_final_infos",
        "_stacked_shape",
        "_stepped",
        "_observations",
        "_retiring",
    )

    def __init__(self, vector: SyncVectorEnv) -> None:
        self._vector = vector
        self._envs = vector.envs
        self._action_space = vector.action_space
        self._observation_space = vector.single_observation_space
        self._num_envs = vector.num_envs
        # gymnasium's own functions for these spaces, looked up once instead of every step.
        self._iterate = iterate.dispatch(type(self._action_space))
        self._concatenate = concatenate.dispatch(type(self._observation_space))
        self._empty_batch = create_empty_array.dispatch(type(self._observation_space))
        self._final_observations: dict[int, Any] = {}
        self._final_infos: dict[int, dict[str, Any]] = {}  # the non-empty ones, in lane order
        self._batched_final_infos: dict[str, Any] | None = None
        # The batch shape of a space gymnasium concatenates with one np.stack (None for others;
        # a subclass may register its own concatenate).
        space = self._observation_space
        shape = space.shape if type(space) in _STACKED_SPACES else None
        self._stacked_shape = None if shape is None else (self._num_envs, *shape)
        self._stepped = list(enumerate(self._envs))  # (lane, sub-env) of the lanes not retired
        self._observations: list[Any] = []  # each lane's observation after the last step
        self._retiring: set[int] = set()  # lanes that retire when their next episode ends

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One step of every lane not retired; a finished lane is reset within it (its reset
        observation and info are what the step reports for it) unless it retires."""
        n = self._num_envs
        # Python lists, made arrays once: a numpy item assignment per lane and mask costs more.
        rewards: list[Any] = [0.0] * n
        terminated: list[Any] = [False] * n
        truncated: list[Any] = [False] * n
        observations: list[Any] = [None] * n
        infos: dict[str, Any] = {}
        final_observations = self._final_observations = {}
        final_infos = self._final_infos = {}
        self._batched_final_infos = None
        add_info = self._vector._add_info
        lane_actions: Any = self._iterate(self._action_space, actions)
        stepped, retiring = self._stepped, self._retiring
        if len(stepped) < n:  # a retired lane repeats its last observation and takes no action
            observations = list(self._observations)
            every_action = list(lane_actions)
            lane_actions = [every_action[lane] for lane, _ in stepped]
        for (lane, env), action in zip(stepped, lane_actions, strict=True):
            observation, rewards[lane], ended, cut, info = env.step(action)
            if ended or cut:
                terminated[lane], truncated[lane] = ended, cut
                final_observations[lane] = observation
                if info:
                    final_infos[lane] = info
                if lane in retiring:
                    info = {}  # not reset: its terminal observation stays, its info is the final one
                else:
                    observation, info = env.reset()
            observations[lane] = observation
            if info:
                infos = add_info(infos, info, lane)
        self._observations = observations
        if retiring and not retiring.isdisjoint(final_observations):
            retired = retiring.intersection(final_observations)
            retiring -= retired
            self._stepped = [(lane, env) for lane, env in stepped if lane not in retired]
        space = self._observation_space
        stacked = self._stacked(observations)
        batch = (
            stacked
            if stacked is not None
            else self._concatenate(space, observations, self._empty_batch(space, n))
        )
        return (
            batch,
            np.array(rewards, dtype=np.float64),
            np.array(terminated, dtype=np.bool_),
            np.array(truncated, dtype=np.bool_),
            infos,
        )

    def _stacked(self, observations: list[Any]) -> np.ndarray | None:
        """The lanes' observations as one fresh array, or ``None`` when gymnasium's concatenate
        must make it (another space kind, or observations not already of the space's dtype and
        shape, which it casts or refuses).

        For these the two arrays are equal in values, dtype and shape; ``np.array`` makes it at
        about a third of ``np.stack``'s cost into an empty batch.
        """
        if self._stacked_shape is None:
            return None
        try:
            batch = np.array(observations)
        except (ValueError, TypeError):
            return None  # ragged or odd observations: gymnasium's concatenate says what is wrong
        if batch.dtype != self._observation_space.dtype or batch.shape != self._stacked_shape:
            return None
        return batch

    def retire(self, lanes: Iterable[int]) -> None:
        """Let each of ``lanes`` play out its next episode and then retire (see the module
        docstring) until :meth:`reset_lanes`."""
        self._retiring.update(lanes)

    def reset_lanes(self) -> None:
        """Every lane is stepped again (the vector env was reset); marks not used yet stay."""
        self._stepped = list(enumerate(self._envs))

    def finished_lanes(self) -> list[int]:
        """The lanes that finished on the last step, in lane order."""
        return list(self._final_observations)

    def final_info(self, lane: int) -> dict[str, Any]:
        """The terminal info of ``lane``, finished on the last step, with its ``"final_obs"``."""
        final: dict[str, Any] = {}
        if lane in self._final_infos:
            batched = self._batched_final_infos
            if batched is None:
                # Batched over the step's finished lanes as gymnasium batches them (the first
                # lane to report a key sets its array's dtype), then sliced back out.
                batched = {}
                for finished, info in self._final_infos.items():
                    batched = self._vector._add_info(batched, info, finished)
                self._batched_final_infos = batched
            final = lane_info(batched, lane)
        final["final_obs"] = self._final_observations[lane]
        return final
