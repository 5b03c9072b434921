"""User ``gymnasium.Space`` subclasses mapped to a supported ``SpaceSpec`` (``register_space``).

A registered converter takes an instance of the user's space and returns the space it stands
for on the wire: a standard gymnasium space (Box, Discrete, MultiBinary, MultiDiscrete, Text,
Dict, Tuple) or a ``SpaceSpec``. Going back, ``gym_space(spec)`` gives that standard space. The
env's values must be values of it as they are (minigrid's missions are ``str``, values of Text).

MiniGrid's ``MissionSpace`` is known out of the box (as Text) whenever minigrid is installed;
this module never imports minigrid to know it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TypeAlias

import gymnasium as gym

from rlmesh_gym.proto import spaces_pb2

__all__ = ["SpaceConverter", "converter_for", "register_space", "unregister_space"]

SpaceConverter: TypeAlias = Callable[[gym.Space], "gym.Space | spaces_pb2.SpaceSpec"]

_REGISTRY: dict[type, SpaceConverter] = {}


def register_space(space_type: type[gym.Space], to_spec: SpaceConverter) -> None:
    """Teach ``space_spec`` (and so ``GymVectorEnv``, recordings and servers) a Space subclass.

    Args:
        space_type: a ``gymnasium.Space`` subclass; its own subclasses use the entry too unless
            they have one of their own. Registering a type again replaces its converter.
        to_spec: ``to_spec(space)`` returns a supported gymnasium space or a ``SpaceSpec`` that
            describes ``space``'s values. A result the codec cannot encode is refused with a
            ``ValueError`` naming the converter when a space of this type is converted.

    Example:
        >>> import gymnasium as gym
        >>> from rlmesh_gym.spaces import register_space, space_spec
        >>> class Word(gym.Space):  # a user space whose values are short strings
        ...     def contains(self, x): return isinstance(x, str) and len(x) <= 8
        >>> register_space(Word, lambda space: gym.spaces.Text(8))
        >>> space_spec(Word()).WhichOneof("spec")
        'text'
    """
    if not (isinstance(space_type, type) and issubclass(space_type, gym.Space)):
        raise TypeError(f"register_space: space_type must be a gymnasium.Space subclass, got {space_type!r}")
    if space_type in _STANDARD:
        raise ValueError(f"register_space: {space_type.__name__} is a standard space; it needs no entry")
    if not callable(to_spec):
        raise TypeError(f"register_space: to_spec must be callable, got {to_spec!r}")
    _REGISTRY[space_type] = to_spec


def unregister_space(space_type: type[gym.Space]) -> None:
    """Forget the entry of ``space_type`` (a no-op when it has none)."""
    _REGISTRY.pop(space_type, None)


def converter_for(space: gym.Space) -> SpaceConverter | None:
    """The converter for ``space``'s type: its own entry, an ancestor's, or a built-in one."""
    for cls in type(space).__mro__:
        if cls in _STANDARD or cls is gym.Space:
            return None
        converter = _REGISTRY.get(cls) or _BUILT_IN.get(f"{cls.__module__}.{cls.__qualname__}")
        if converter is not None:
            return converter
    return None


_STANDARD = frozenset(
    (
        gym.spaces.Box,
        gym.spaces.Discrete,
        gym.spaces.MultiBinary,
        gym.spaces.MultiDiscrete,
        gym.spaces.Text,
        gym.spaces.Dict,
        gym.spaces.Tuple,
    )
)

# Missions longer than this are not expected from a MissionSpace that cannot be enumerated.
_MISSION_MAX_LENGTH = 1024
_MISSION_ENUMERATION_LIMIT = 10_000


def _mission_text(space: gym.Space) -> spaces_pb2.SpaceSpec:
    """minigrid's ``MissionSpace`` as an unrestricted Text as long as its longest mission."""
    placeholders = getattr(space, "ordered_placeholders", None)
    mission_func = space.mission_func  # type: ignore[attr-defined]
    if placeholders is None:
        longest = len(mission_func())
    else:
        count = 1
        for options in placeholders:
            count *= len(options)
        if count > _MISSION_ENUMERATION_LIMIT:
            longest = _MISSION_MAX_LENGTH
        else:
            longest = max(len(mission_func(*combo)) for combo in itertools.product(*placeholders))
    return spaces_pb2.SpaceSpec(
        dtype=spaces_pb2.D_TYPE_UINT8,
        # min_length 1: missions are never empty, and rlmesh 0.1.0b3 refuses a Text of min_length 0.
        text=spaces_pb2.TextSpec(min_length=1, max_length=max(longest, 1), charset=""),
    )


_BUILT_IN: dict[str, SpaceConverter] = {"minigrid.core.mission.MissionSpace": _mission_text}
