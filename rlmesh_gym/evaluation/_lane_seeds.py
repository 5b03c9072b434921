"""Reset seeds that depend on the lane and the lane's episode count only, so that every policy
compared on an env plays the same episodes.

The driver seeds DISABLED resets by *reset generation*: the n-th driver reset of the session,
counted over all lanes. Which generation resets lane ``i`` for its k-th episode depends on when
the other lanes' episodes ended, and so on the policy: two policies would get different seeds
for lane ``i``'s second episode onwards. :class:`LaneOrdinalSeeds` wraps the env and replaces
each lane's seed with ``reset_seed(base, session, route, k, i)`` for its k-th episode (k from 0):
the driver's own seed function with the lane's episode ordinal in place of the generation.
Generation-0 seeds (the cold reset) are unchanged, and each recorded episode keeps the seed it
was really reset with, so it replays alone.

``first_lane`` numbers the env's lanes from there: lane ``j`` is seeded as lane
``first_lane + j`` of a wider vector env. A Ray shard holding lanes ``a .. a + n - 1`` of an
evaluation of N lanes uses it (with the N-lane run's session and route ids), so its cold reset
gives each lane the seed the same lane gets in-process.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rlmesh_gym.proto import env_pb2
from rlmesh_gym.runtime.seams import passing_through
from rlmesh_gym.runtime.seeds import ResetSeeds

__all__ = ["LaneOrdinalSeeds", "lane_ordinal_seeds"]

_CAPABILITIES = ("drain_episodes", "render_frames", "episode_ids", "num_envs", "runs_inline")


def lane_ordinal_seeds(
    env: Any, num_envs: int, base_seed: int, session_id: str, route_id: str, first_lane: int = 0
) -> LaneOrdinalSeeds:
    """``env`` with lane-ordinal reset seeds, in the same form (array or message) as ``env``;
    its lane ``j`` is seeded as lane ``first_lane + j``."""
    wrapper = _ArrayLaneOrdinalSeeds if callable(getattr(env, "reset_arrays", None)) else LaneOrdinalSeeds
    # The env's capabilities as real members, which isinstance checks see on every Python.
    wrapper = passing_through(wrapper, env, _CAPABILITIES)
    return wrapper(env, num_envs, base_seed, session_id, route_id, first_lane)


class LaneOrdinalSeeds:
    """A ``RuntimeEnv`` that forwards everything to ``env`` except the reset seeds (see the
    module docstring). Make one per session: the ordinals start at 0 with its cold reset."""

    wrapped_attribute = "_env"

    def __init__(
        self, env: Any, num_envs: int, base_seed: int, session_id: str, route_id: str, first_lane: int = 0
    ) -> None:
        if isinstance(first_lane, bool) or not isinstance(first_lane, int) or first_lane < 0:
            raise ValueError(f"first_lane must be an int >= 0, got {first_lane!r}")
        self._env = env
        self._seeds = ResetSeeds(base_seed, session_id, route_id)
        self._num_envs = num_envs
        self._first_lane = first_lane
        self._episodes = [0] * num_envs

    def _lane_seeds(self, env_indices: Sequence[int]) -> list[int]:
        lanes = list(env_indices) or range(self._num_envs)
        seeds = []
        for lane in lanes:
            seeds.append(self._seeds.seed(self._episodes[lane], self._first_lane + lane))
            self._episodes[lane] += 1
        return seeds

    @property
    def contract(self) -> env_pb2.EnvContract:
        """The wrapped env's contract."""
        return self._env.contract

    async def reset(self, request: env_pb2.ResetRequest) -> Any:
        """The wrapped env's message-form reset, with the lanes' ordinal seeds."""
        seeded = env_pb2.ResetRequest()
        seeded.CopyFrom(request)
        if request.seeds:
            del seeded.seeds[:]
            seeded.seeds.extend(self._lane_seeds(request.env_indices))
        return await self._env.reset(seeded)

    async def step(self, request: env_pb2.StepRequest) -> Any:
        """The wrapped env's step."""
        return await self._env.step(request)

    def __getattr__(self, name: str) -> Any:
        # close and the rest: the wrapped env's own (its capabilities are real members too, see
        # lane_ordinal_seeds). Guarded: copy and pickle look attributes up before __init__ ran.
        if name == "_env":
            raise AttributeError(name)
        return getattr(self._env, name)


class _ArrayLaneOrdinalSeeds(LaneOrdinalSeeds):
    """:class:`LaneOrdinalSeeds` of an array-form env (the driver then calls ``reset_arrays``)."""

    async def reset_arrays(
        self, env_indices: Sequence[int], seeds: Sequence[int], options: Mapping[str, Any] | None = None
    ) -> Any:
        """The wrapped env's array-form reset, with the lanes' ordinal seeds."""
        if seeds:
            seeds = self._lane_seeds(env_indices)
        return await self._env.reset_arrays(env_indices, seeds, options)
