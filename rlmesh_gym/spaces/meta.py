"""Python info/metadata objects <-> rlmesh ``MetaMap`` / ``MetaValue`` messages.

Format and rules: docs/spaces.md, "Infos and metadata".

Used for env metadata, reset/step ``infos``, reset ``options`` and episode ``final_info``.
Conversion follows upstream rlmesh: each value is first normalized (``_asdict()``, else
``tolist()``, else ``item()``), so numpy arrays become nested lists and numpy scalars become
Python scalars; an array's dtype and shape do not survive (the wire has no field for them).

Numeric numpy arrays (bool, int, float up to 64 bits) of 64 elements or more take a vectorised
path that writes the same bytes as the element-by-element conversion, then parses them once (a
210x160x3 uint8 frame in about 20-40 ms on the development machine instead of about 0.5 s).

Unlike upstream, nothing is lost silently: an int outside int64, a set, a custom object or a
non-str dict key raises ``MetaConversionError`` naming the key path, e.g.
``infos['final_info'][2]['x']``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rlmesh_gym._wire import (
    META_LIST_ITEMS,
    META_VALUE_BOOL,
    META_VALUE_FLOAT,
    META_VALUE_INT,
    META_VALUE_LIST,
    length_delimited,
)
from rlmesh_gym.proto import spaces_pb2

__all__ = ["MetaConversionError", "from_meta_map", "from_meta_value", "to_meta_map", "to_meta_value"]

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_SUPPORTED = (
    "None, bool, int (int64 range), float, str, bytes, list/tuple, dict with str keys, "
    "numpy arrays and scalars, namedtuples, Enums"
)


class MetaConversionError(TypeError):
    """A value cannot be represented as a ``MetaValue``; the message names its key path and type."""


def to_meta_map(mapping: Mapping[str, Any], *, name: str = "meta") -> spaces_pb2.MetaMap:
    """The ``MetaMap`` of a dict with str keys (e.g. an env's info dict).

    Raises:
        MetaConversionError: ``mapping`` is not a mapping, or some key or value is not representable.

    Example:
        >>> to_meta_map({"int": 7}).SerializeToString().hex()
        '0a090a03696e7412020807'
    """
    result = spaces_pb2.MetaMap()
    if hasattr(mapping, "_asdict") and not isinstance(mapping, Mapping):
        mapping = mapping._asdict()
    if not isinstance(mapping, Mapping):
        raise MetaConversionError(f"{name}: expected a dict with str keys, got {type(mapping).__name__}")
    _fill_map(result, mapping, name, set())
    return result


def to_meta_value(value: Any, *, name: str = "value") -> spaces_pb2.MetaValue:
    """The ``MetaValue`` of one Python value (``None`` gives a MetaValue with no arm set)."""
    result = spaces_pb2.MetaValue()
    _fill_value(result, value, name, set())
    return result


def _fill_map(target: spaces_pb2.MetaMap, mapping: Mapping[Any, Any], path: str, active: set[int]) -> None:
    if id(mapping) in active:
        raise MetaConversionError(f"{path}: the value contains itself (a reference cycle)")
    active.add(id(mapping))
    for key, item in mapping.items():
        if not isinstance(key, str):
            raise MetaConversionError(
                f"{path}: dict key {key!r} of type {type(key).__name__} is not a str; "
                "metadata keys must be str"
            )
        _fill_value(target.entries[key], item, f"{path}[{key!r}]", active)
    active.discard(id(mapping))


def _fill_value(target: spaces_pb2.MetaValue, value: Any, path: str, active: set[int]) -> None:
    if type(value) is np.ndarray and value.size >= _VECTORISED_MIN_SIZE:
        encoded = array_meta_value_bytes(value)
        if encoded is not None:
            target.MergeFromString(encoded)
            return
    # Upstream's normalization order: namedtuple-likes, then numpy arrays/scalars, then .item().
    if hasattr(value, "_asdict"):
        value = value._asdict()
    elif hasattr(value, "tolist"):
        value = value.tolist()
    elif hasattr(value, "item"):
        value = value.item()

    if value is None:
        target.Clear()
    elif isinstance(value, (bytes, bytearray)):
        target.bytes = bytes(value)
    elif isinstance(value, Mapping):
        target.map.SetInParent()
        _fill_map(target.map, value, path, active)
    elif isinstance(value, (list, tuple)):
        if id(value) in active:
            raise MetaConversionError(f"{path}: the value contains itself (a reference cycle)")
        active.add(id(value))
        target.list.SetInParent()
        for i, item in enumerate(value):
            _fill_value(target.list.items.add(), item, f"{path}[{i}]", active)
        active.discard(id(value))
    elif isinstance(value, bool):
        target.bool = value
    elif isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise MetaConversionError(
                f"{path}: int {value} is outside the int64 range of the wire; "
                "send it as a str (or a float if precision loss is acceptable)"
            )
        target.int = int(value)
    elif isinstance(value, float):
        target.float = float(value)
    elif isinstance(value, str):
        target.str = str.__str__(value)  # the text itself, also for (str, Enum) members
    elif hasattr(value, "value"):  # Enum members carry their payload in .value
        _fill_value(target, value.value, path, active)
    elif isinstance(getattr(value, "name", None), str):
        target.str = value.name
    else:
        raise MetaConversionError(
            f"{path}: value of type {type(value).__name__} is not supported in rlmesh metadata; "
            f"supported: {_SUPPORTED}"
        )


def from_meta_map(meta_map: spaces_pb2.MetaMap) -> dict[str, Any]:
    """The Python dict of a ``MetaMap``, keys in sorted order (lists come back as lists, never tuples).

    Sorted because a protobuf map has no order of its own: its iteration order differs between
    processes, and a dict users print or compare should not.
    """
    return {key: from_meta_value(meta_map.entries[key]) for key in sorted(meta_map.entries)}


def from_meta_value(meta_value: spaces_pb2.MetaValue) -> Any:
    """The Python value of a ``MetaValue`` (no arm set gives ``None``)."""
    kind = meta_value.WhichOneof("kind")
    if kind is None:
        return None
    if kind == "list":
        return [from_meta_value(item) for item in meta_value.list.items]
    if kind == "map":
        return from_meta_map(meta_value.map)
    return getattr(meta_value, kind)


# -- numeric arrays, vectorised ---------------------------------------------------------------

_VECTORISED_MIN_SIZE = 64  # below this the element-by-element path is as fast
_U64 = np.dtype(np.uint64)
(_ITEM_TAG,), (_INT_TAG,), (_FLOAT_TAG,), (_BOOL_TAG,), (_LIST_TAG,) = (
    META_LIST_ITEMS,
    META_VALUE_INT,
    META_VALUE_FLOAT,
    META_VALUE_BOOL,
    META_VALUE_LIST,
)


def _varint_lengths(values: np.ndarray) -> np.ndarray:
    """Bytes of each value's varint (``values`` uint64)."""
    lengths = np.ones(values.shape, dtype=np.int64)
    for k in range(1, 10):
        lengths += values >= np.uint64(1 << (7 * k))
    return lengths


def _write_varints(out: np.ndarray, column: int, values: np.ndarray, lengths: np.ndarray) -> None:
    """Write each value's varint into ``out[:, column:column + lengths.max()]``."""
    for k in range(int(lengths.max())):
        group = ((values >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        out[:, column + k] = group | np.where(k < lengths - 1, 0x80, 0).astype(np.uint8)


def array_meta_value_bytes(array: np.ndarray) -> bytes | None:
    """The serialized ``MetaValue`` of a numeric array, as the element-by-element conversion
    writes it (nested lists of ints, floats or bools), or ``None`` when that path must decide
    (zero-size or 0-d arrays, other dtypes and wider than 64-bit ones, uint64 values beyond
    int64: it raises for those).
    """
    kind = array.dtype.kind
    if array.ndim == 0 or array.size == 0 or kind not in "biuf" or array.dtype.itemsize > 8:
        return None
    flat = np.ascontiguousarray(array).reshape(-1)
    count = flat.size
    # Each element as a MetaList item: item tag, item length, then the MetaValue of the scalar.
    if kind == "f":
        items = np.empty((count, 11), dtype=np.uint8)
        items[:, 0], items[:, 1], items[:, 2] = _ITEM_TAG, 9, _FLOAT_TAG
        items[:, 3:] = flat.astype("<f8").view(np.uint8).reshape(count, 8)
        data, lengths = items.reshape(-1), np.full(count, 11, dtype=np.int64)
    elif kind == "b":
        items = np.empty((count, 4), dtype=np.uint8)
        items[:, 0], items[:, 1], items[:, 2] = _ITEM_TAG, 2, _BOOL_TAG
        items[:, 3] = flat.view(np.uint8)
        data, lengths = items.reshape(-1), np.full(count, 4, dtype=np.int64)
    else:
        if kind == "u" and flat.dtype.itemsize == 8 and int(flat.max()) > 2**63 - 1:
            return None
        values = flat.astype(np.int64).view(_U64)  # two's complement, as protobuf writes int64
        varint_lengths = _varint_lengths(values)
        items = np.zeros((count, 13), dtype=np.uint8)
        items[:, 0], items[:, 2] = _ITEM_TAG, _INT_TAG
        items[:, 1] = 1 + varint_lengths
        _write_varints(items, 3, values, varint_lengths)
        lengths = 3 + varint_lengths
        data = items[np.arange(13) < lengths[:, None]]
    # Bottom-up: each row of the next axis becomes a MetaValue{list} wrapped as an item.
    for size in reversed(array.shape[1:]):
        content = lengths.reshape(-1, size).sum(axis=1)  # each row's MetaList bytes
        content_lengths = _varint_lengths(content.astype(_U64))
        value_size = 1 + content_lengths + content  # MetaValue{list}: tag, length, content
        value_lengths = _varint_lengths(value_size.astype(_U64))
        headers = np.zeros((content.size, 12), dtype=np.uint8)
        headers[:, 0] = _ITEM_TAG
        _write_varints(headers, 1, value_size.astype(_U64), value_lengths)
        header_lengths = 2 + value_lengths + content_lengths
        # Move the list tag and content length right after each row's item length.
        keep = np.zeros((content.size, 12), dtype=bool)
        keep[:, 0] = True
        keep[:, 1:6] = np.arange(5) < value_lengths[:, None]
        keep[:, 6] = True
        keep[:, 7:12] = np.arange(5) < content_lengths[:, None]
        headers[:, 6] = _LIST_TAG
        _write_varints(headers, 7, content.astype(_U64), content_lengths)
        row_starts = np.zeros(content.size, dtype=np.int64)
        np.cumsum(content[:-1], out=row_starts[1:])
        data = np.insert(data, np.repeat(row_starts, header_lengths), headers[keep])
        lengths = header_lengths + content
    return length_delimited(META_VALUE_LIST, data.tobytes())
