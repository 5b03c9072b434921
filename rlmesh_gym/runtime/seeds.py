"""Deterministic per-lane reset seeds, bit for bit upstream's ``deterministic_reset_seed``.

Why and when: docs/design/runtime.md#reset-seeds.

A seed is 64-bit FNV-1a over ``base_seed`` (8 bytes, little-endian, signed), ``0xFF``,
``session_id`` (UTF-8), ``0xFE``, ``route_id`` (UTF-8), ``0xFD``, ``reset_generation``
(8 bytes, little-endian, unsigned), ``0xFC``, ``env_index`` (8 bytes, little-endian,
unsigned), with the top bit of the hash cleared, so it is always a non-negative int64 that
``gymnasium`` accepts as a seed.

>>> reset_seed(1234, "session-1", "route-1", 0, 0)
8552392209508998990
>>> reset_seed(1234, "session-1", "route-1", 1, 0)
7706257071820558593
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["INT64_MAX", "INT64_MIN", "ResetSeeds", "reset_seed"]

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
_UINT64_MAX = (1 << 64) - 1
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x00000100000001B3
_MASK64 = _UINT64_MAX


def _update(state: int, data: bytes) -> int:
    for byte in data:
        state = ((state ^ byte) * _FNV_PRIME) & _MASK64
    return state


def _check_int(name: str, value: object, low: int, high: int, expected: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int ({expected}); got {type(value).__name__} {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be {expected}; got {value}")
    return value


def _check_str(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str; got {type(value).__name__} {value!r}")
    return value


class ResetSeeds:
    """The seeds of one route: hashes the constant prefix (base seed, session, route) once.

    ``seeds(generation, env_indices)`` gives one seed per index, aligned by position; it is
    what the driver puts in ``ResetRequest.seeds``.
    """

    __slots__ = ("_prefix",)

    def __init__(self, base_seed: int, session_id: str, route_id: str) -> None:
        base_seed = _check_int("base_seed", base_seed, INT64_MIN, INT64_MAX, "a signed 64-bit integer")
        session = _check_str("session_id", session_id).encode("utf-8")
        route = _check_str("route_id", route_id).encode("utf-8")
        state = _update(_FNV_OFFSET, base_seed.to_bytes(8, "little", signed=True))
        state = _update(state, b"\xff" + session + b"\xfe" + route + b"\xfd")
        self._prefix = state

    def seed(self, reset_generation: int, env_index: int) -> int:
        """The seed of lane ``env_index`` (``0 <= env_index < 2**64``) at reset ``reset_generation``."""
        _check_int("env_index", env_index, 0, _UINT64_MAX, "in 0..2**64-1")
        return self.seeds(reset_generation, (env_index,))[0]

    def seeds(self, reset_generation: int, env_indices: Iterable[int]) -> list[int]:
        """One seed per entry of ``env_indices``, in the same order.

        An index is widened to 64 bits as upstream does (``index as usize``), so a negative
        lane index an env reported wraps instead of failing here; the env refuses the lane.
        """
        generation = _check_int("reset_generation", reset_generation, 0, _UINT64_MAX, "in 0..2**64-1")
        state = _update(self._prefix, generation.to_bytes(8, "little") + b"\xfc")
        return [_update(state, (index & _MASK64).to_bytes(8, "little")) & INT64_MAX for index in env_indices]


def reset_seed(base_seed: int, session_id: str, route_id: str, reset_generation: int, env_index: int) -> int:
    """The deterministic seed of lane ``env_index`` at the ``reset_generation``-th driver reset.

    ``base_seed`` must fit a signed 64-bit integer; ``reset_generation`` and ``env_index``
    must be non-negative (and below ``2**64``). Raises ``TypeError`` / ``ValueError`` naming
    the bad argument otherwise.
    """
    return ResetSeeds(base_seed, session_id, route_id).seed(reset_generation, env_index)
