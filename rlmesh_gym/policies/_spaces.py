"""A ``SpaceSpec`` read the way policies need it, without gymnasium: kinds, bounds, descriptions."""

from __future__ import annotations

import numpy as np

from rlmesh_gym.proto import spaces_pb2

__all__ = [
    "RAW_KINDS",
    "box_bounds",
    "describe_space",
    "lane_shape",
    "multi_discrete_nvec",
    "space_kind",
    "wire_dtype",
]

# Kinds whose batch is raw concatenated element bytes; the rest travel as ValueLists
# (docs/design/wire.md#message-bytes).
RAW_KINDS = frozenset({"box", "discrete", "multi_binary", "multi_discrete"})

_KIND_NAMES = {
    "box": "Box",
    "discrete": "Discrete",
    "multi_binary": "MultiBinary",
    "multi_discrete": "MultiDiscrete",
    "text": "Text",
    "dict": "Dict",
    "tuple": "Tuple",
}


def space_kind(spec: spaces_pb2.SpaceSpec) -> str:
    """The spec's ``oneof spec`` arm (``"box"``, ``"discrete"``, ...); a spec without one is refused."""
    kind = spec.WhichOneof("spec")
    if kind is None:
        raise ValueError(f"SpaceSpec has no kind set; expected one of {', '.join(_KIND_NAMES.values())}")
    return kind


def wire_dtype(code: int) -> np.dtype:
    """The little-endian numpy dtype of one wire element of ``code`` (bfloat16 reads as uint16 bits)."""
    if code == spaces_pb2.D_TYPE_BFLOAT16:
        return np.dtype("<u2")
    name = _dtype_name(code)
    if code == spaces_pb2.D_TYPE_UNSPECIFIED or name.startswith("D_TYPE("):
        raise ValueError(f"dtype {name} has no wire element; expected a concrete dtype such as float32")
    # Every other DType is named after its numpy dtype (D_TYPE_FLOAT32 -> float32).
    return np.dtype(name).newbyteorder("<")


def lane_shape(spec: spaces_pb2.SpaceSpec) -> tuple[int, ...]:
    """The shape of one lane's value (``()`` for Discrete)."""
    return tuple(int(d) for d in spec.shape)


def multi_discrete_nvec(spec: spaces_pb2.SpaceSpec) -> np.ndarray:
    """The ``nvec`` of a MultiDiscrete spec as an int64 array of the lane shape."""
    md = spec.multi_discrete
    if md.WhichOneof("nvec") == "shaped":
        rows = [list(row.data) for row in md.shaped.data]
        if len({len(row) for row in rows}) > 1:
            raise ValueError(f"MultiDiscrete shaped nvec has rows of different lengths: {rows}")
        return np.array(rows, dtype=np.int64).reshape(len(rows), -1)
    return np.array(md.flat.data, dtype=np.int64)


def box_bounds(spec: spaces_pb2.SpaceSpec) -> tuple[np.ndarray, np.ndarray]:
    """``(low, high)`` of a Box spec, each of the lane shape, from any of its five bound forms.

    Float Boxes give float64 bounds (possibly infinite); integer and bool Boxes give bounds in
    their native dtype. A spec with no bounds set reads as unbounded (the dtype range for
    integer Boxes). Uniform bounds are read-only broadcast views of one value: describing a
    space never allocates in proportion to its declared shape.
    """
    shape = lane_shape(spec)
    numel = int(np.prod(shape, dtype=np.int64))
    wire = wire_dtype(spec.dtype)
    native = wire.newbyteorder("=")
    integral = native.kind in "biu" and spec.dtype != spaces_pb2.D_TYPE_BFLOAT16
    box = spec.box
    arm = box.WhichOneof("bounds")
    if arm in ("typed_uniform", "typed_elementwise"):
        bounds = getattr(box, arm)
        count = 1 if arm == "typed_uniform" else numel
        sides = []
        for side in ("low", "high"):
            raw = getattr(bounds, side)
            if len(raw) != count * wire.itemsize:
                raise ValueError(
                    f"Box {arm}.{side} holds {len(raw)} bytes, expected {count * wire.itemsize} "
                    f"({count} x {native.name})"
                )
            sides.append(np.frombuffer(raw, dtype=wire).astype(native))
        low, high = sides
    elif arm == "uniform":
        low, high = np.array([box.uniform.low]), np.array([box.uniform.high])
    elif arm == "elementwise":
        low = np.array(box.elementwise.low, dtype=np.float64)
        high = np.array(box.elementwise.high, dtype=np.float64)
        if low.size != numel or high.size != numel:
            raise ValueError(
                f"Box elementwise bounds hold {low.size} low and {high.size} high values, "
                f"expected numel(shape) = {numel}"
            )
    else:
        low, high = np.array([-np.inf]), np.array([np.inf])
    if integral and low.dtype.kind == "f":
        # Double bounds on an integer Box (unusual, but legal): clamp to the dtype's range.
        limits = (0, 1) if native.kind == "b" else (np.iinfo(native).min, np.iinfo(native).max)
        low = np.clip(low, *limits).astype(native)
        high = np.clip(high, *limits).astype(native)
    if low.size == 1 and numel != 1:
        return np.broadcast_to(low[0], shape), np.broadcast_to(high[0], shape)
    return low.reshape(shape), high.reshape(shape)


def _dtype_name(code: int) -> str:
    try:
        return spaces_pb2.DType.Name(code).removeprefix("D_TYPE_").lower()
    except ValueError:
        return f"D_TYPE({code})"


def _bound_text(values: np.ndarray) -> str:
    # A broadcast view (all strides 0) is one value: never expand it to the declared shape.
    flat = values.reshape(-1) if any(values.strides) else np.asarray(values.flat[0:1])
    if flat.size and np.all(flat == flat[0]):
        first = flat[0]
        return str(first.item()) if values.dtype.kind != "f" else repr(float(first))
    return np.array2string(values, threshold=8, separator=" ")


def describe_space(spec: spaces_pb2.SpaceSpec) -> str:
    """A gymnasium-style one-line description, e.g. ``Box(-1.0, 1.0, (2,), float32)``."""
    kind = spec.WhichOneof("spec")
    if kind == "box":
        dtype = _dtype_name(spec.dtype)
        try:
            low, high = box_bounds(spec)
        except ValueError:
            return f"Box({lane_shape(spec)}, {dtype}, malformed bounds)"
        return f"Box({_bound_text(low)}, {_bound_text(high)}, {lane_shape(spec)}, {dtype})"
    if kind == "discrete":
        n, start = spec.discrete.n, spec.discrete.start
        return f"Discrete({n})" if start == 0 else f"Discrete({n}, start={start})"
    if kind == "multi_binary":
        mb = spec.multi_binary
        return (
            f"MultiBinary({mb.size})"
            if mb.WhichOneof("n") == "size"
            else f"MultiBinary({list(mb.dims.data)})"
        )
    if kind == "multi_discrete":
        try:
            return f"MultiDiscrete({np.array2string(multi_discrete_nvec(spec), separator=' ')})"
        except ValueError:
            return "MultiDiscrete(malformed nvec)"
    if kind == "text":
        text = spec.text
        charset = f", charset={text.charset!r}" if text.charset else ""
        return f"Text({text.min_length}, {text.max_length}{charset})"
    if kind == "dict":
        pairs = zip(spec.dict.keys, spec.dict.spaces, strict=False)
        items = ", ".join(f"{key!r}: {describe_space(child)}" for key, child in pairs)
        return f"Dict({items})"
    if kind == "tuple":
        return f"Tuple({', '.join(describe_space(child) for child in spec.tuple.spaces)})"
    return "SpaceSpec(no kind set)"
