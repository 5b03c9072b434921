"""What a gymnasium env declares, as the rlmesh ``EnvContract`` a ``GymVectorEnv`` offers.

:func:`autoreset_mode_of` decides the mode the lanes run under (the env's metadata, or the
caller's word for a custom vector env); :func:`build_contract` writes the per-lane spaces, the
metadata, render mode, lane count and autoreset mode into the contract.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import gymnasium
from gymnasium.spaces import Space
from gymnasium.vector import AutoresetMode as GymAutoresetMode
from gymnasium.vector import VectorEnv

from rlmesh_gym.envs.env_ids import contract_env_id
from rlmesh_gym.proto import env_pb2, spaces_pb2
from rlmesh_gym.runtime.autoreset import AutoresetMode
from rlmesh_gym.spaces import space_spec
from rlmesh_gym.spaces.meta import MetaConversionError, to_meta_map

__all__ = ["autoreset_mode_of", "build_contract", "parse_autoreset_mode"]


def parse_autoreset_mode(value: GymAutoresetMode | AutoresetMode | str) -> GymAutoresetMode:
    """The gymnasium autoreset mode ``value`` names (see :meth:`AutoresetMode.parse` for the spellings).

    >>> parse_autoreset_mode("same_step"), parse_autoreset_mode("NextStep")
    (<AutoresetMode.SAME_STEP: 'SameStep'>, <AutoresetMode.NEXT_STEP: 'NextStep'>)
    """
    return GymAutoresetMode[AutoresetMode.parse(value).name]


def autoreset_mode_of(
    env: VectorEnv | gymnasium.Env, vector: bool, override: GymAutoresetMode | AutoresetMode | str | None
) -> GymAutoresetMode:
    """The mode ``env`` runs under: its ``metadata["autoreset_mode"]``, else ``override``
    (required for a vector env without one); DISABLED for a single env."""
    requested = None if override is None else parse_autoreset_mode(override)
    metadata = getattr(env, "metadata", None)
    declared = metadata.get("autoreset_mode") if isinstance(metadata, Mapping) else None
    if declared is not None:
        try:
            mode = parse_autoreset_mode(declared)
        except ValueError as error:
            raise ValueError(f"env.metadata['autoreset_mode'] is invalid: {error}") from None
        if requested is not None and requested is not mode:
            raise ValueError(
                f"autoreset_mode={requested.name} disagrees with env.metadata['autoreset_mode']={mode.name}"
            )
    elif not vector:
        mode = requested or GymAutoresetMode.DISABLED
    elif requested is None:
        raise ValueError(
            f"the vector env {type(env).__name__} has no metadata['autoreset_mode']; pass "
            "GymVectorEnv(env, autoreset_mode=...) to say how it autoresets"
        )
    else:
        mode = requested
    if not vector and mode is not GymAutoresetMode.DISABLED:
        raise ValueError(
            f"a single gymnasium.Env has no autoreset, so it runs under DISABLED, not {mode.name}; "
            "wrap it in a vector env (gymnasium.vector.SyncVectorEnv([lambda: env], autoreset_mode=...)) "
            "for autoreset"
        )
    return mode


def build_contract(
    env: VectorEnv | gymnasium.Env,
    num_envs: int,
    mode: GymAutoresetMode,
    observation_space: Space,
    action_space: Space,
) -> env_pb2.EnvContract:
    """The ``EnvContract`` of ``env``: id, per-lane spaces, metadata, render mode, lanes, mode."""
    contract = env_pb2.EnvContract(
        id=contract_env_id(env),
        render_mode=getattr(env, "render_mode", None) or "",
        num_envs=num_envs,
        autoreset_mode=AutoresetMode.parse(mode).wire,
    )
    contract.observation_space.CopyFrom(space_spec(observation_space, name="observation_space"))
    contract.action_space.CopyFrom(space_spec(action_space, name="action_space"))
    metadata = getattr(env, "metadata", None)
    if metadata is not None:
        contract.metadata.CopyFrom(_metadata_map(metadata))
    return contract


def _metadata_map(metadata: Mapping[str, Any]) -> spaces_pb2.MetaMap:
    """``env.metadata`` as a MetaMap; an entry MetaValue cannot hold is left out with a warning."""
    try:
        return to_meta_map(dict(metadata))
    except (MetaConversionError, TypeError, ValueError):
        pass
    converted = spaces_pb2.MetaMap()
    for key, value in metadata.items():
        try:
            entry = to_meta_map({key: value})
        except (MetaConversionError, TypeError, ValueError) as error:
            warnings.warn(
                f"env.metadata[{key!r}] ({type(value).__name__}) cannot be sent as rlmesh metadata "
                f"and is left out of the contract: {error}",
                RuntimeWarning,
                stacklevel=4,
            )
            continue
        for name, meta_value in entry.entries.items():
            converted.entries[name].CopyFrom(meta_value)
    return converted
