"""Python info/metadata objects <-> rlmesh ``MetaMap`` / ``MetaValue`` messages (wire.md §4).

Used for env metadata, reset/step ``infos``, reset ``options`` and episode ``final_info``.
Conversion follows upstream rlmesh: each value is first normalized (``_asdict()``, else
``tolist()``, else ``item()``), so numpy arrays become nested lists and numpy scalars become
Python scalars; an array's dtype and shape do not survive (the wire has no field for them).

Unlike upstream, nothing is lost silently: an int outside int64, a set, a custom object or a
non-str dict key raises ``MetaConversionError`` naming the key path, e.g.
``infos['final_info'][2]['x']``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
    """The Python dict of a ``MetaMap`` (lists come back as lists, never tuples)."""
    return {key: from_meta_value(item) for key, item in meta_map.entries.items()}


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
