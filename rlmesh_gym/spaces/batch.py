"""``SpaceBatch``: one batch of values of a space, held as values, as message bytes, or both.

In-process, observations and actions travel between an env and a model as the values the
env produced or the policy computed (numpy arrays in ``batch_space`` layout); at a process
edge they travel as message bytes. A ``SpaceBatch`` holds whichever form it was made from and
derives the other on first use, through its :class:`~rlmesh_gym.spaces.codec.SpaceCodec`, so
neither side pays for a form it never reads::

    batch = SpaceBatch.from_values(codec, observations, n)   # checked, no bytes yet
    batch.values                                             # the arrays themselves
    batch.data                                               # encoded now, once

Values made with :meth:`from_values` are normalised as the wire would (``decode_batch`` of
``encode_batch``): the same dtypes, shapes and errors, without the bytes; an ndarray already in
that form is kept, not copied, so a producer that reuses its buffers copies before it hands a
batch on (``GymVectorEnv`` does: each step's observation batch is its own).
"""

from __future__ import annotations

from typing import Any, cast

from rlmesh_gym.spaces.codec import SpaceCodec

__all__ = ["SpaceBatch"]

_UNSET: Any = object()


class SpaceBatch:
    """``rows`` values of ``codec``'s space, as values (:attr:`values`) and/or bytes (:attr:`data`)."""

    __slots__ = ("codec", "rows", "_values", "_data")

    def __init__(self, codec: SpaceCodec, rows: int, values: Any = _UNSET, data: bytes | None = None) -> None:
        self.codec = codec
        self.rows = rows
        self._values = values
        self._data = data

    @classmethod
    def from_values(cls, codec: SpaceCodec, values: Any, rows: int) -> SpaceBatch:
        """A batch of ``values`` (``batch_space`` layout), normalised as the wire would.

        Raises :class:`~rlmesh_gym.spaces.codec.CodecError` for values the codec cannot encode.
        """
        return cls(codec, rows, codec.normalize_batch(values, rows))

    @classmethod
    def from_normalized(cls, codec: SpaceCodec, values: Any, rows: int) -> SpaceBatch:
        """A batch of values already in the codec's decoded form (no check, no copy)."""
        return cls(codec, rows, values)

    @classmethod
    def from_bytes(cls, codec: SpaceCodec, data: bytes, rows: int) -> SpaceBatch:
        """A batch of message bytes, decoded on first use of :attr:`values`."""
        return cls(codec, rows, data=data)

    @property
    def values(self) -> Any:
        """The values (decoded from :attr:`data` on first use; raises ``CodecError`` if they do not)."""
        values = self._values
        if values is _UNSET:
            # A batch holds at least one form: without values, the bytes are there.
            values = self._values = self.codec.decode_batch(cast(bytes, self._data), self.rows)
        return values

    @property
    def data(self) -> bytes:
        """The message bytes (encoded from :attr:`values` on first use)."""
        data = self._data
        if data is None:
            data = self._data = self.codec.encode_batch(self._values, self.rows)
        return data

    @property
    def has_values(self) -> bool:
        """Whether the value form is at hand (reading :attr:`values` decodes nothing)."""
        return self._values is not _UNSET

    @property
    def nbytes(self) -> int:
        """The size of the message bytes, computed without encoding where the layout allows it."""
        if self._data is None and self.codec.lane_nbytes:
            return self.rows * self.codec.lane_nbytes
        return len(self.data)

    def __repr__(self) -> str:
        held = (
            "values and bytes"
            if self._data is not None and self.has_values
            else ("bytes" if self._data is not None else "values")
        )
        return f"SpaceBatch({self.codec.name}: {self.rows} row(s), {held})"
