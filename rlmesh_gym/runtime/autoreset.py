"""The autoreset mode of an env: the one type, with its wire value and its user spelling.

An env's contract says how its lanes start the next episode after one ends
(docs/design/runtime.md#autoreset):

* ``next_step``: the step after the last one resets the lane (its reward is not an episode's);
* ``same_step``: the last step's observation is already the next episode's first;
* ``disabled``: the driver resets finished lanes itself.

:class:`AutoresetMode` is that vocabulary for the whole package: ``.value`` is the spelling
users write (``evaluate(autoreset=...)``, ``--autoreset``, results, recording headers),
``.wire`` is the ``env_pb2.AutoresetMode`` number of the contract. Gymnasium's own
``gymnasium.vector.AutoresetMode`` is translated at the gymnasium edge
(:func:`rlmesh_gym.envs.parse_autoreset_mode`); this module never imports gymnasium.
"""

from __future__ import annotations

import enum
from typing import Any

from rlmesh_gym.proto import env_pb2

__all__ = ["AutoresetMode"]


class AutoresetMode(enum.Enum):
    """How an env's lanes autoreset; ``.value`` is the user spelling, ``.wire`` the contract's number.

    >>> AutoresetMode.parse("Same_Step"), AutoresetMode.parse("NextStep").value
    (<AutoresetMode.SAME_STEP: 'same_step'>, 'next_step')
    >>> AutoresetMode.from_wire(0) is AutoresetMode.DISABLED  # UNSPECIFIED means DISABLED
    True
    """

    NEXT_STEP = "next_step"
    SAME_STEP = "same_step"
    DISABLED = "disabled"

    @property
    def wire(self) -> env_pb2.AutoresetMode:
        """The ``env_pb2.AutoresetMode`` value an ``EnvContract`` carries for this mode."""
        return _WIRE[self]

    @property
    def observational(self) -> bool:
        """Whether the env resets finished lanes itself (NEXT_STEP, SAME_STEP), not the driver."""
        return self is not AutoresetMode.DISABLED

    @classmethod
    def spellings(cls) -> tuple[str, ...]:
        """The user spellings, in declaration order (the choices of ``--autoreset``)."""
        return tuple(mode.value for mode in cls)

    @classmethod
    def parse(cls, value: Any) -> AutoresetMode:
        """The mode ``value`` names: an ``AutoresetMode``, a spelling (``"next_step"``, ``"NEXT_STEP"``,
        ``"next-step"``, gymnasium's ``"NextStep"``; case-insensitive) or gymnasium's enum member.

        Raises:
            ValueError: ``value`` names no mode (the message lists the accepted spellings).
        """
        if isinstance(value, AutoresetMode):
            return value
        # gymnasium.vector.AutoresetMode members carry gymnasium's spelling as their value.
        text = value.value if isinstance(value, enum.Enum) else value
        if isinstance(text, str):
            mode = _SPELLINGS.get(text.strip().lower())
            if mode is not None:
                return mode
        raise ValueError(
            f"unknown autoreset mode {value!r}; expected 'next_step', 'same_step' or 'disabled' "
            "(case-insensitive) or a gymnasium.vector.AutoresetMode"
        )

    @classmethod
    def from_wire(cls, value: int) -> AutoresetMode:
        """The mode of a contract's ``autoreset_mode``; UNSPECIFIED is DISABLED, as the driver runs it.

        Raises:
            ValueError: ``value`` is no ``env_pb2.AutoresetMode`` this build knows.
        """
        if value == env_pb2.AUTORESET_MODE_UNSPECIFIED:
            return cls.DISABLED
        for mode, wire in _WIRE.items():
            if wire == value:
                return mode
        raise ValueError(
            f"unknown autoreset mode {value} on the wire; this build supports UNSPECIFIED, "
            "NEXT_STEP, SAME_STEP, DISABLED only"
        )


_WIRE: dict[AutoresetMode, env_pb2.AutoresetMode] = {
    AutoresetMode.NEXT_STEP: env_pb2.AUTORESET_MODE_NEXT_STEP,
    AutoresetMode.SAME_STEP: env_pb2.AUTORESET_MODE_SAME_STEP,
    AutoresetMode.DISABLED: env_pb2.AUTORESET_MODE_DISABLED,
}
_SPELLINGS = {
    spelling: mode
    for mode in AutoresetMode
    for spelling in (mode.value, mode.value.replace("_", "-"), mode.value.replace("_", ""))
}
