"""Gymnasium environments as rlmesh runtime envs.

:class:`GymVectorEnv` wraps a ``gymnasium.vector.VectorEnv`` (Sync, Async or custom) or a single
``gymnasium.Env`` as an array-form runtime env (what the driver calls), in all three gymnasium
autoreset modes; :class:`LaneEpisodes` is its per-lane episode book-keeping. For the message
form, wrap it in :class:`~rlmesh_gym.runtime.message_form.MessageFormEnv`.

The way back: :class:`RlmeshVectorEnv` is any rlmesh env (an in-process ``RuntimeEnv`` or a
connected client) as a ``gymnasium.vector.VectorEnv``, and :class:`RlmeshEnv` a one-lane one as
a ``gymnasium.Env``, for the libraries that take gymnasium envs.
"""

from __future__ import annotations

from rlmesh_gym.envs.episodes import LaneEpisodes
from rlmesh_gym.envs.gym_vector import GymVectorEnv, parse_autoreset_mode
from rlmesh_gym.envs.rlmesh_env import EnvSource, RlmeshEnv, RlmeshVectorEnv
from rlmesh_gym.runtime.autoreset import AutoresetMode

__all__ = [
    "AutoresetMode",
    "EnvSource",
    "GymVectorEnv",
    "LaneEpisodes",
    "RlmeshEnv",
    "RlmeshVectorEnv",
    "parse_autoreset_mode",
]
