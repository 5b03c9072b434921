"""Sanity rules for a declared ``SpaceSpec``, checked before anything is allocated for it.

A spec comes from a peer or a file, and its numbers are only declarations: a 238-byte message can
declare a 16000 x 16000 Box. ``check_space_spec`` walks the spec's fields (never its values) and
refuses, naming the field and the rule:

* a negative dimension, or a count that is negative or zero where the kind forbids it
  (``Discrete.n``, MultiDiscrete ``nvec`` entries, Text lengths);
* an element count or a byte length of one value that overflows int64;
* a value of more than ``max_space_elements()`` elements in total (array elements of every leaf
  plus Text characters), so that building bounds, samplers or buffers of the declared size stays
  bounded.

The element limit is process-wide: ``DEFAULT_MAX_SPACE_ELEMENTS`` unless the environment variable
``RLMESH_GYM_MAX_SPACE_ELEMENTS`` or ``set_max_space_elements`` (the servers' ``--max-space-elements``
flag) says otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from rlmesh_gym._audience import fix
from rlmesh_gym.proto import spaces_pb2
from rlmesh_gym.spaces._dtypes import WIRE_DTYPES

__all__ = [
    "DEFAULT_MAX_SPACE_ELEMENTS",
    "MAX_SPACE_ELEMENTS_ENV",
    "SpaceSpecError",
    "check_space_spec",
    "max_space_elements",
    "set_max_space_elements",
]

DEFAULT_MAX_SPACE_ELEMENTS = 1 << 25
"""33,554,432 elements per value: a 4K RGB frame (3840 x 2160 x 3) fits, with room to spare."""

MAX_SPACE_ELEMENTS_ENV = "RLMESH_GYM_MAX_SPACE_ELEMENTS"

_INT64_MAX = (1 << 63) - 1
_limit: int | None = None


class SpaceSpecError(ValueError):
    """A declared ``SpaceSpec`` breaks a sanity rule; the message names the field and the rule."""


def max_space_elements() -> int:
    """The largest number of elements one value of a declared space may hold."""
    if _limit is not None:
        return _limit
    raw = os.environ.get(MAX_SPACE_ELEMENTS_ENV)
    if raw is None or not raw.strip():
        return DEFAULT_MAX_SPACE_ELEMENTS
    try:
        return _valid_limit(int(raw), MAX_SPACE_ELEMENTS_ENV)
    except ValueError:
        raise ValueError(
            f"{MAX_SPACE_ELEMENTS_ENV}={raw!r}: expected a positive integer number of elements"
        ) from None


def set_max_space_elements(limit: int | None) -> None:
    """Set the process-wide element limit; ``None`` goes back to the environment variable or default."""
    global _limit
    _limit = None if limit is None else _valid_limit(limit, "max_space_elements")


def _valid_limit(limit: int, name: str) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= _INT64_MAX:
        raise ValueError(f"{name}: expected a positive integer number of elements, got {limit!r}")
    return limit


def check_space_spec(spec: spaces_pb2.SpaceSpec, *, name: str = "spec") -> int:
    """The number of elements of one value of ``spec``, after checking every declared size.

    Raises:
        SpaceSpecError: a rule is broken; the message names the field (``name.shape[1]``,
            ``name['key'].discrete.n``, ...), the value and the rule.
    """
    limit = max_space_elements()
    total = _elements(spec, name)
    if total > limit:
        raise SpaceSpecError(
            f"{name}: one value declares {total:,} elements, more than the limit of {limit:,} "
            f"(raise it with {fix('set_max_space_elements(N)', '--max-space-elements N (servers)')} or "
            f"${MAX_SPACE_ELEMENTS_ENV} if this space is real)"
        )
    return total


def _elements(spec: spaces_pb2.SpaceSpec, path: str) -> int:
    kind = spec.WhichOneof("spec")
    if kind == "dict":
        return sum(
            _elements(child, f"{path}[{key!r}]")
            for key, child in zip(spec.dict.keys, spec.dict.spaces, strict=False)
        )
    if kind == "tuple":
        return sum(_elements(child, f"{path}[{i}]") for i, child in enumerate(spec.tuple.spaces))
    if kind == "text":
        text = spec.text
        if text.min_length < 0:
            raise SpaceSpecError(f"{path}.text.min_length = {text.min_length}: a length must be >= 0")
        if text.max_length < text.min_length:
            raise SpaceSpecError(
                f"{path}.text.max_length = {text.max_length}: must be >= min_length = {text.min_length}"
            )
        return int(text.max_length)
    count = _count(spec.shape, f"{path}.shape")
    if kind == "discrete":
        discrete = spec.discrete
        if discrete.n < 1:
            raise SpaceSpecError(f"{path}.discrete.n = {discrete.n}: a Discrete space needs n >= 1")
        if discrete.start + discrete.n - 1 > _INT64_MAX:
            raise SpaceSpecError(
                f"{path}.discrete: start {discrete.start} + n {discrete.n} - 1 overflows int64"
            )
        count = 1
    elif kind == "multi_binary":
        mb = spec.multi_binary
        if mb.WhichOneof("n") == "dims":
            count = max(count, _count(mb.dims.data, f"{path}.multi_binary.dims"))
        elif mb.WhichOneof("n") == "size":
            count = max(count, _count([mb.size], f"{path}.multi_binary.size"))
    elif kind == "multi_discrete":
        md = spec.multi_discrete
        rows = [row.data for row in md.shaped.data] if md.WhichOneof("nvec") == "shaped" else [md.flat.data]
        for row in rows:
            for entry in row:
                if entry < 1:
                    raise SpaceSpecError(
                        f"{path}.multi_discrete nvec entry {entry}: every entry must be >= 1"
                    )
    entry = WIRE_DTYPES.get(spec.dtype)
    if entry is not None and count * entry[1].itemsize > _INT64_MAX:
        raise SpaceSpecError(
            f"{path}.shape {list(spec.shape)}: {count} elements of {entry[1].itemsize} bytes is "
            f"{count * entry[1].itemsize} bytes, past the int64 byte-length limit 2**63 - 1"
        )
    return count


def _count(dims: Iterable[int], field: str) -> int:
    """The product of ``dims`` (exact Python ints), refusing negatives and int64 overflow."""
    count = 1
    for i, dim in enumerate(dims):
        if dim < 0:
            raise SpaceSpecError(f"{field}[{i}] = {dim}: a dimension must be >= 0")
        count *= int(dim)
    if count > _INT64_MAX:
        raise SpaceSpecError(
            f"{field} {[int(dim) for dim in dims]}: the element count {count} overflows int64 (2**63 - 1)"
        )
    return count
