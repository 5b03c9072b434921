"""Gymnasium environments as rlmesh runtime envs.

:class:`GymVectorEnv` wraps a ``gymnasium.vector.VectorEnv`` (Sync, Async or custom) or a single
``gymnasium.Env`` as an array-form runtime env (what the driver calls), in all three gymnasium
autoreset modes; :class:`LaneEpisodes` is its per-lane episode book-keeping. For the message
form, wrap it in :class:`~rlmesh_gym.runtime.message_form.MessageFormEnv`.
"""

from __future__ import annotations

from rlmesh_gym.envs.episodes import LaneEpisodes
from rlmesh_gym.envs.gym_vector import GymVectorEnv, parse_autoreset_mode
from rlmesh_gym.runtime.autoreset import AutoresetMode

__all__ = ["AutoresetMode", "GymVectorEnv", "LaneEpisodes", "parse_autoreset_mode"]
