"""One lane's values out of batched message bytes, as numpy arrays (docs/design/wire.md#message-bytes).

For the raw kinds (Box, Discrete, MultiBinary, MultiDiscrete) a batch is N fixed-size lane
slices back to back, so a lane's steps are its slices joined, which is itself a raw batch the
codec views without copying. Text, Dict and Tuple batches are decoded with the space codec (once per
step, shared by every lane) and the lane's values stacked per leaf: a Dict becomes a dict of
arrays, a Tuple a tuple of arrays, Text a numpy ``str`` array.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from rlmesh_gym.proto import spaces_pb2
from rlmesh_gym.spaces.codec import SpaceCodec

__all__ = ["LaneValues", "concat_values", "tuples_from_lists"]


class LaneValues:
    """Gathers one lane's values of a space from a run of batched payloads."""

    def __init__(self, spec: spaces_pb2.SpaceSpec, num_envs: int, name: str) -> None:
        self._spec = spec
        self._num_envs = num_envs
        self._name = name
        self._codec = SpaceCodec(spec)
        self._raw = self._codec.raw
        self._size = self._codec.lane_nbytes
        # Decoded composite batches by global step index, shared by the lanes of that step.
        self._decoded: dict[int, Any] = {}

    def gather(self, payloads: Sequence[bytes | None], first_index: int, stride: int, lane: int) -> Any:
        """The lane's values of ``payloads`` (global step indices ``first_index, +stride, ...``).

        Returns an array of shape ``(len(payloads), *shape)`` for raw kinds, the stacked tree for
        composite kinds, or ``None`` when some step carried no payload.
        """
        if any(payload is None for payload in payloads):
            return None
        payloads = cast("Sequence[bytes]", payloads)
        if self._raw:
            low = lane * self._size
            high = low + self._size
            joined = b"".join([payload[low:high] for payload in payloads])
            if len(joined) != self._size * len(payloads):
                raise ValueError(
                    f"{self._name} payload too short for lane {lane}: expected {self._num_envs} lanes of "
                    f"{self._size} bytes per step"
                )
            # The lane's steps form a raw batch of their own: the codec views it (bfloat16 widened).
            return self._codec.decode_batch(joined, len(payloads))
        values = []
        for offset, payload in enumerate(payloads):
            index = first_index + offset * stride
            batch = self._decoded.get(index)
            if batch is None:
                batch = self._codec.decode_batch(payload, self._num_envs)
                self._decoded[index] = batch
            values.append(_lane_value(batch, self._spec, lane))
        return _stack(values, self._spec)

    def forget_before(self, index: int) -> None:
        """Drop decoded batches of global steps before ``index`` (no lane needs them any more)."""
        if not self._decoded:
            return
        stale = [key for key in self._decoded if key < index]
        for key in stale:
            del self._decoded[key]

    def clear(self) -> None:
        """Drop every decoded batch."""
        self._decoded.clear()


def _lane_value(batch: Any, spec: spaces_pb2.SpaceSpec, lane: int) -> Any:
    kind = spec.WhichOneof("spec")
    if kind == "dict":
        return {
            key: _lane_value(batch[key], child, lane)
            for key, child in zip(spec.dict.keys, spec.dict.spaces, strict=True)
        }
    if kind == "tuple":
        return tuple(_lane_value(batch[i], child, lane) for i, child in enumerate(spec.tuple.spaces))
    return batch[lane]


def _stack(values: list[Any], spec: spaces_pb2.SpaceSpec) -> Any:
    kind = spec.WhichOneof("spec")
    if kind == "dict":
        return {
            key: _stack([value[key] for value in values], child)
            for key, child in zip(spec.dict.keys, spec.dict.spaces, strict=True)
        }
    if kind == "tuple":
        return tuple(
            _stack([value[i] for value in values], child) for i, child in enumerate(spec.tuple.spaces)
        )
    if kind == "text":
        return np.array(values, dtype=np.str_) if values else np.zeros(0, dtype="<U1")
    return np.stack([np.asarray(value) for value in values])


def concat_values(parts: list[Any]) -> Any:
    """Join the per-chunk trees of one episode along the step axis (``None`` if any is missing)."""
    if not parts or any(part is None for part in parts):
        return None
    first = parts[0]
    if len(parts) == 1:
        return first
    if isinstance(first, dict):
        return {key: concat_values([part[key] for part in parts]) for key in first}
    if isinstance(first, tuple):
        return tuple(concat_values([part[i] for part in parts]) for i in range(len(first)))
    return np.concatenate(parts)


def tuples_from_lists(value: Any) -> Any:
    """A loaded tree with msgpack lists turned back into tuples (the Tuple space nodes)."""
    if isinstance(value, list):
        return tuple(tuples_from_lists(item) for item in value)
    if isinstance(value, dict):
        return {key: tuples_from_lists(item) for key, item in value.items()}
    return value
