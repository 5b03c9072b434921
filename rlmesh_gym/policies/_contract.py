"""Where a policy's spaces come from: an ``EnvContract`` or an ``(observation, action)`` SpaceSpec pair."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

from rlmesh_gym.proto import env_pb2, spaces_pb2
from rlmesh_gym.spaces.kinds import describe_space, kind_of
from rlmesh_gym.spaces.limits import check_space_spec

__all__ = ["ContractOrSpaces", "PolicySpaces", "resolve_spaces"]

ContractOrSpaces: TypeAlias = env_pb2.EnvContract | tuple[spaces_pb2.SpaceSpec, spaces_pb2.SpaceSpec]


@dataclass(frozen=True, slots=True)
class PolicySpaces:
    """The per-lane observation and action spaces a policy serves (private copies)."""

    observation: spaces_pb2.SpaceSpec
    action: spaces_pb2.SpaceSpec

    def same_as(self, other: PolicySpaces) -> bool:
        """Whether both spaces are identical field for field."""
        return self.observation == other.observation and self.action == other.action

    def describe(self) -> str:
        """``observation <desc>, action <desc>``."""
        return f"observation {describe_space(self.observation)}, action {describe_space(self.action)}"


def _copy(spec: spaces_pb2.SpaceSpec) -> spaces_pb2.SpaceSpec:
    copy = spaces_pb2.SpaceSpec()
    copy.CopyFrom(spec)
    return copy


def resolve_spaces(contract_or_spaces: object, owner: str) -> PolicySpaces:
    """The spaces of an ``EnvContract`` or of an ``(observation_spec, action_spec)`` pair.

    Raises:
        TypeError: anything else (the message names what was given and what is accepted).
        ValueError: a contract without both spaces, a spec with no kind set, or a declared size
            the space limits refuse (``rlmesh_gym.spaces.limits``), before anything is allocated.
    """
    if isinstance(contract_or_spaces, env_pb2.EnvContract):
        for field in ("observation_space", "action_space"):
            if not contract_or_spaces.HasField(field):
                raise ValueError(f"{owner}: the EnvContract has no {field}; a policy needs both spaces")
        observation, action = contract_or_spaces.observation_space, contract_or_spaces.action_space
    elif (
        isinstance(contract_or_spaces, (tuple, list))
        and len(contract_or_spaces) == 2
        and all(isinstance(spec, spaces_pb2.SpaceSpec) for spec in contract_or_spaces)
    ):
        observation, action = contract_or_spaces
    else:
        raise TypeError(
            f"{owner}: expected an EnvContract or an (observation_spec, action_spec) pair of SpaceSpec "
            f"messages, got {_describe_arg(contract_or_spaces)}"
        )
    for role, spec in (("observation", observation), ("action", action)):
        try:
            kind_of(spec)
            check_space_spec(spec, name=f"{role}_space")
        except ValueError as error:
            raise ValueError(f"{owner}: the {role} space is unusable: {error}") from None
    return PolicySpaces(_copy(observation), _copy(action))


def _describe_arg(value: object) -> str:
    if isinstance(value, (tuple, list)):
        items = ", ".join(type(item).__name__ for item in value)
        return f"a {type(value).__name__} of {len(value)} items ({items})"
    return f"{type(value).__name__} {value!r:.80}"
