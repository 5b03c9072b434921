"""The seven ``SpaceSpec`` kinds, one handler each: everything the package knows per kind.

``KINDS`` maps the arm of ``SpaceSpec.spec`` (``"box"``, ``"discrete"``, ``"multi_binary"``,
``"multi_discrete"``, ``"text"``, ``"dict"``, ``"tuple"``) to its :class:`SpaceKind`, which says

* what the kind is: its gymnasium name (``label``), whether its batches are raw element bytes
  (``raw``) or ``ValueList`` nodes, and the ``SpaceValueNode`` arm a lane travels in
  (``node_arm``, docs/design/wire.md#message-bytes);
* how to read a spec of it: the lane shape and dtype rule the codec compiles
  (``lane_shape``), the Dict/Tuple members, Box bounds and MultiDiscrete ``nvec``, and a
  gymnasium-style description (``describe``);
* how the codec moves one lane of it in and out of ``SpaceValueNode`` trees (``fill``,
  ``decode_nodes``) and between a value and a batch of one (``batch_of_one``, ``lane``).

``SpaceCodec`` compiles a spec by looking its kind up here once; the raw hot path (one
``tobytes`` / one buffer view) is the codec's own and never dispatches. The policies read
specs through the same table (``describe_space``, ``KINDS[kind].raw``, ``BOX.bounds``).
This module imports neither gymnasium nor the codec at run time.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rlmesh_gym.proto import spaces_pb2
from rlmesh_gym.spaces._dtypes import WIRE_DTYPES, dtype_label
from rlmesh_gym.spaces._values import CodecError, as_array, convert

if TYPE_CHECKING:
    from rlmesh_gym.spaces.codec import SpaceCodec

__all__ = [
    "BOX",
    "DICT",
    "DISCRETE",
    "KINDS",
    "MULTI_BINARY",
    "MULTI_DISCRETE",
    "RAW_KINDS",
    "TEXT",
    "TUPLE",
    "SpaceKind",
    "describe_space",
    "kind_of",
]

_INT64 = np.dtype("<i8")


class SpaceKind(ABC):
    """One arm of ``SpaceSpec.spec``: its facts, how to read its spec, and the codec's node hooks.

    The node hooks take the compiled ``SpaceCodec`` of a spec of this kind and a batch in
    gymnasium's ``batch_space`` layout; every failure is a ``CodecError`` naming ``codec.name``.
    """

    name = ""
    label = ""
    raw = False
    node_arm = ""

    def lane_shape(self, spec: spaces_pb2.SpaceSpec, wire: np.dtype, name: str) -> tuple[int, ...]:
        """The checked shape of one lane of a raw kind whose wire element dtype is ``wire``."""
        raise TypeError(f"{self.label} is not a raw kind: its values have no lane shape")

    def members(
        self, spec: spaces_pb2.SpaceSpec, name: str
    ) -> tuple[tuple[str, ...], list[tuple[spaces_pb2.SpaceSpec, str]]]:
        """``(keys, [(child spec, child path), ...])`` of a Dict or Tuple; empty for leaves."""
        return (), []

    @abstractmethod
    def describe(self, spec: spaces_pb2.SpaceSpec) -> str:
        """A gymnasium-style one-line description, e.g. ``Discrete(3)``."""

    @abstractmethod
    def fill(self, codec: SpaceCodec, nodes: list[Any], values: Any, n: int) -> None:
        """Write lane ``i`` of the batch ``values`` into ``nodes[i]``, for each of the ``n`` nodes."""

    @abstractmethod
    def decode_nodes(self, codec: SpaceCodec, nodes: Sequence[Any], n: int) -> Any:
        """The batch held by ``n`` nodes (one per lane) whose arm is already checked."""

    @abstractmethod
    def batch_of_one(self, codec: SpaceCodec, value: Any) -> Any:
        """One value as a batch of one."""

    @abstractmethod
    def lane(self, codec: SpaceCodec, batch: Any, i: int) -> Any:
        """Lane ``i`` of a decoded batch."""

    def __repr__(self) -> str:
        return f"<SpaceKind {self.name}>"


class _RawKind(SpaceKind):
    """A kind whose batches are the lanes' little-endian element bytes back to back."""

    raw = True

    def fill(self, codec: SpaceCodec, nodes: list[Any], values: Any, n: int) -> None:
        data = codec.encode_batch(values, n)
        size = codec.lane_nbytes
        arm = self.node_arm
        for i, node in enumerate(nodes):
            setattr(node, arm, data[i * size : (i + 1) * size])

    def decode_nodes(self, codec: SpaceCodec, nodes: Sequence[Any], n: int) -> Any:
        arm = self.node_arm
        chunks = [getattr(node, arm) for node in nodes]
        for i, chunk in enumerate(chunks):
            if len(chunk) != codec.lane_nbytes:
                raise CodecError(
                    f"{codec.name} (lane {i}): expected {codec.lane_nbytes} bytes "
                    f"({codec.shape} {dtype_label(codec.spec.dtype)}), got {len(chunk)}"
                )
        return codec.decode_batch(b"".join(chunks), n)

    def batch_of_one(self, codec: SpaceCodec, value: Any) -> Any:
        try:
            array = np.asarray(value)
        except Exception as exc:
            raise CodecError(
                f"{codec.name}: expected an array-like of shape {codec.shape}, "
                f"got {type(value).__name__} ({exc})"
            ) from exc
        if array.shape != codec.shape:
            raise CodecError(f"{codec.name}: expected shape {codec.shape}, got shape {array.shape}")
        return array[None]

    def lane(self, codec: SpaceCodec, batch: Any, i: int) -> Any:
        return batch[i] if codec.shape else batch[i : i + 1].reshape(())


class _Box(_RawKind):
    name, label, node_arm = "box", "Box", "tensor"

    def lane_shape(self, spec: spaces_pb2.SpaceSpec, wire: np.dtype, name: str) -> tuple[int, ...]:
        return _spec_shape(spec)

    def bounds(self, spec: spaces_pb2.SpaceSpec) -> tuple[np.ndarray, np.ndarray]:
        """``(low, high)`` of a Box spec, each of the lane shape, from any of its five bound forms.

        Float Boxes give float64 bounds (possibly infinite); integer and bool Boxes give bounds in
        their native dtype. A spec with no bounds set reads as unbounded (the dtype range for
        integer Boxes). Uniform bounds are read-only broadcast views of one value: describing a
        space never allocates in proportion to its declared shape. ``ValueError`` for bounds
        that do not fit the shape or dtype.
        """
        shape = tuple(int(d) for d in spec.shape)
        numel = int(np.prod(shape, dtype=np.int64))
        wire = _wire_dtype(spec.dtype)
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

    def describe(self, spec: spaces_pb2.SpaceSpec) -> str:
        shape, dtype = tuple(int(d) for d in spec.shape), dtype_label(spec.dtype)
        try:
            low, high = self.bounds(spec)
        except ValueError:
            return f"Box({shape}, {dtype}, malformed bounds)"
        return f"Box({_bound_text(low)}, {_bound_text(high)}, {shape}, {dtype})"


class _Discrete(_RawKind):
    name, label, node_arm = "discrete", "Discrete", "discrete"

    def lane_shape(self, spec: spaces_pb2.SpaceSpec, wire: np.dtype, name: str) -> tuple[int, ...]:
        if wire.kind not in "iu":
            raise CodecError(
                f"{name}: Discrete spec has dtype {dtype_label(spec.dtype)}, expected an integer dtype"
            )
        return ()

    def describe(self, spec: spaces_pb2.SpaceSpec) -> str:
        n, start = spec.discrete.n, spec.discrete.start
        return f"Discrete({n})" if start == 0 else f"Discrete({n}, start={start})"

    def fill(self, codec: SpaceCodec, nodes: list[Any], values: Any, n: int) -> None:
        # The discrete arm is an int64 varint whatever the spec dtype.
        array = as_array(values, codec._batch(n)[0], codec.name)
        for node, item in zip(nodes, convert(array, _INT64, codec.name).tolist(), strict=False):
            node.discrete = item

    def decode_nodes(self, codec: SpaceCodec, nodes: Sequence[Any], n: int) -> Any:
        values = np.array([node.discrete for node in nodes], dtype=_INT64)
        dtype = codec.numpy_dtype
        return values if dtype == _INT64 or dtype is None else convert(values, dtype, codec.name)

    def lane(self, codec: SpaceCodec, batch: Any, i: int) -> Any:
        return batch[i]


class _MultiBinary(_RawKind):
    name, label, node_arm = "multi_binary", "MultiBinary", "multi"

    def lane_shape(self, spec: spaces_pb2.SpaceSpec, wire: np.dtype, name: str) -> tuple[int, ...]:
        arm = spec.multi_binary.WhichOneof("n")
        if arm == "dims":
            arm_shape: tuple[int, ...] | None = tuple(int(d) for d in spec.multi_binary.dims.data)
        else:
            arm_shape = (int(spec.multi_binary.size),) if arm == "size" else None
        shape = _agree(spec, name, self.label, arm_shape)
        if wire.itemsize != 1:
            raise CodecError(
                f"{name}: MultiBinary spec has dtype {dtype_label(spec.dtype)}, "
                "expected a 1-byte dtype (uint8)"
            )
        return shape

    def describe(self, spec: spaces_pb2.SpaceSpec) -> str:
        mb = spec.multi_binary
        return (
            f"MultiBinary({mb.size})"
            if mb.WhichOneof("n") == "size"
            else f"MultiBinary({list(mb.dims.data)})"
        )


class _MultiDiscrete(_RawKind):
    name, label, node_arm = "multi_discrete", "MultiDiscrete", "multi"

    def lane_shape(self, spec: spaces_pb2.SpaceSpec, wire: np.dtype, name: str) -> tuple[int, ...]:
        shape = _agree(spec, name, self.label, self._nvec_shape(spec, name))
        if wire.kind not in "iu":
            raise CodecError(
                f"{name}: MultiDiscrete spec has dtype {dtype_label(spec.dtype)}, expected an integer dtype"
            )
        return shape

    def nvec(self, spec: spaces_pb2.SpaceSpec, name: str = "spec") -> np.ndarray:
        """The ``nvec`` of a MultiDiscrete spec as an int64 array of its arm's shape."""
        md = spec.multi_discrete
        shape = self._nvec_shape(spec, name) or (0,)
        if md.WhichOneof("nvec") == "shaped":
            rows = [list(row.data) for row in md.shaped.data]
            return np.array(rows, dtype=np.int64).reshape(shape)
        return np.array(md.flat.data, dtype=np.int64)

    def describe(self, spec: spaces_pb2.SpaceSpec) -> str:
        try:
            return f"MultiDiscrete({np.array2string(self.nvec(spec), separator=' ')})"
        except ValueError:
            return "MultiDiscrete(malformed nvec)"

    @staticmethod
    def _nvec_shape(spec: spaces_pb2.SpaceSpec, name: str) -> tuple[int, ...] | None:
        md = spec.multi_discrete
        arm = md.WhichOneof("nvec")
        if arm == "flat":
            return (len(md.flat.data),)
        if arm == "shaped":
            widths = {len(row.data) for row in md.shaped.data}
            if len(widths) > 1:
                raise CodecError(
                    f"{name}: MultiDiscrete shaped nvec has rows of different lengths {sorted(widths)}"
                )
            return (len(md.shaped.data), widths.pop() if widths else 0)
        return None


class _Text(SpaceKind):
    name, label, node_arm = "text", "Text", "text"

    def describe(self, spec: spaces_pb2.SpaceSpec) -> str:
        text = spec.text
        charset = f", charset={text.charset!r}" if text.charset else ""
        return f"Text({text.min_length}, {text.max_length}{charset})"

    def fill(self, codec: SpaceCodec, nodes: list[Any], values: Any, n: int) -> None:
        for node, text in zip(nodes, self.texts(codec, values, n), strict=True):
            node.text = text

    def decode_nodes(self, codec: SpaceCodec, nodes: Sequence[Any], n: int) -> Any:
        return tuple(node.text for node in nodes)

    def batch_of_one(self, codec: SpaceCodec, value: Any) -> Any:
        if not isinstance(value, str):
            raise CodecError(f"{codec.name}: expected a str, got {type(value).__name__}")
        return (value,)

    def lane(self, codec: SpaceCodec, batch: Any, i: int) -> Any:
        return batch[i]

    @staticmethod
    def texts(codec: SpaceCodec, values: Any, n: int) -> Sequence[Any] | np.ndarray:
        """``values`` checked to be ``n`` str, one per lane."""
        if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
            raise CodecError(
                f"{codec.name}: expected a sequence of {n} str (one per lane), got {type(values).__name__}"
            )
        if len(values) != n:
            raise CodecError(f"{codec.name}: expected {n} str (one per lane), got {len(values)}")
        for i, text in enumerate(values):
            if not isinstance(text, str):
                raise CodecError(f"{codec.name} (lane {i}): expected a str, got {type(text).__name__}")
        return values


class _Dict(SpaceKind):
    name, label, node_arm = "dict", "Dict", "dict"

    def members(
        self, spec: spaces_pb2.SpaceSpec, name: str
    ) -> tuple[tuple[str, ...], list[tuple[spaces_pb2.SpaceSpec, str]]]:
        keys = tuple(spec.dict.keys)
        if len(keys) != len(spec.dict.spaces) or len(set(keys)) != len(keys):
            raise CodecError(
                f"{name}: DictSpec needs unique keys parallel to its spaces, got keys "
                f"{list(keys)} for {len(spec.dict.spaces)} spaces"
            )
        return keys, [(child, f"{name}[{key!r}]") for key, child in zip(keys, spec.dict.spaces, strict=True)]

    def describe(self, spec: spaces_pb2.SpaceSpec) -> str:
        pairs = zip(spec.dict.keys, spec.dict.spaces, strict=False)
        return f"Dict({', '.join(f'{key!r}: {describe_space(child)}' for key, child in pairs)})"

    def fill(self, codec: SpaceCodec, nodes: list[Any], values: Any, n: int) -> None:
        mapping = self.mapping(codec, values, f" (a dict of {n}-lane batches)")
        for node in nodes:
            node.dict.SetInParent()
        for key, child in zip(codec.keys, codec.children, strict=True):
            child._fill([node.dict.entries[key] for node in nodes], mapping[key], n)

    def decode_nodes(self, codec: SpaceCodec, nodes: Sequence[Any], n: int) -> Any:
        batch = {}
        for key, child in zip(codec.keys, codec.children, strict=True):
            column = []
            for i, node in enumerate(nodes):
                entries = node.dict.entries
                if key not in entries:
                    raise CodecError(
                        f"{codec.name} (lane {i}): missing key {key!r}; the space has keys "
                        f"{list(codec.keys)}, the payload has {sorted(entries)}"
                    )
                column.append(entries[key])
            batch[key] = child._decode_nodes(column, n)
        return batch

    def batch_of_one(self, codec: SpaceCodec, value: Any) -> Any:
        mapping = self.mapping(codec, value, "")
        return {
            key: child.batch_of_one(mapping[key])
            for key, child in zip(codec.keys, codec.children, strict=True)
        }

    def lane(self, codec: SpaceCodec, batch: Any, i: int) -> Any:
        return {
            key: child._lane(batch[key], i) for key, child in zip(codec.keys, codec.children, strict=True)
        }

    @staticmethod
    def mapping(codec: SpaceCodec, values: Any, layout: str) -> Mapping[str, Any]:
        """``values`` as a mapping with exactly the space's keys (a namedtuple counts)."""
        if not isinstance(values, Mapping):
            if hasattr(values, "_asdict"):
                values = values._asdict()
            else:
                raise CodecError(
                    f"{codec.name}: expected a dict with keys {list(codec.keys)}{layout}, "
                    f"got {type(values).__name__}"
                )
        missing = [key for key in codec.keys if key not in values]
        if missing or len(values) != len(codec.keys):
            extra = [key for key in values if key not in codec.keys]
            problem = f"missing key(s) {missing}" if missing else f"unexpected key(s) {extra}"
            raise CodecError(f"{codec.name}: {problem}; the space has keys {list(codec.keys)}")
        return values


class _Tuple(SpaceKind):
    name, label, node_arm = "tuple", "Tuple", "tuple"

    def members(
        self, spec: spaces_pb2.SpaceSpec, name: str
    ) -> tuple[tuple[str, ...], list[tuple[spaces_pb2.SpaceSpec, str]]]:
        return (), [(child, f"{name}[{i}]") for i, child in enumerate(spec.tuple.spaces)]

    def describe(self, spec: spaces_pb2.SpaceSpec) -> str:
        return f"Tuple({', '.join(describe_space(child) for child in spec.tuple.spaces)})"

    def fill(self, codec: SpaceCodec, nodes: list[Any], values: Any, n: int) -> None:
        parts = self.sequence(codec, values, f" (a tuple of {n}-lane batches)")
        for node in nodes:
            node.tuple.SetInParent()
        for child, part in zip(codec.children, parts, strict=True):
            child._fill([node.tuple.items.add() for node in nodes], part, n)

    def decode_nodes(self, codec: SpaceCodec, nodes: Sequence[Any], n: int) -> Any:
        arity = len(codec.children)
        for i, node in enumerate(nodes):
            if len(node.tuple.items) != arity:
                raise CodecError(
                    f"{codec.name} (lane {i}): expected a tuple of {arity} element(s), "
                    f"got {len(node.tuple.items)}"
                )
        return tuple(
            child._decode_nodes([node.tuple.items[j] for node in nodes], n)
            for j, child in enumerate(codec.children)
        )

    def batch_of_one(self, codec: SpaceCodec, value: Any) -> Any:
        parts = self.sequence(codec, value, "")
        return tuple(child.batch_of_one(part) for child, part in zip(codec.children, parts, strict=True))

    def lane(self, codec: SpaceCodec, batch: Any, i: int) -> Any:
        return tuple(child._lane(part, i) for child, part in zip(codec.children, batch, strict=True))

    @staticmethod
    def sequence(codec: SpaceCodec, values: Any, layout: str) -> Sequence[Any]:
        """``values`` checked to be a tuple or list with one element per member space."""
        arity = len(codec.children)
        if not isinstance(values, (tuple, list)):
            raise CodecError(
                f"{codec.name}: expected a tuple of {arity} element(s){layout}, got {type(values).__name__}"
            )
        if len(values) != arity:
            raise CodecError(f"{codec.name}: expected a tuple of {arity} element(s), got {len(values)}")
        return values


BOX = _Box()
DISCRETE = _Discrete()
MULTI_BINARY = _MultiBinary()
MULTI_DISCRETE = _MultiDiscrete()
TEXT = _Text()
DICT = _Dict()
TUPLE = _Tuple()

KINDS: dict[str, SpaceKind] = {
    kind.name: kind for kind in (BOX, DISCRETE, MULTI_BINARY, MULTI_DISCRETE, TEXT, DICT, TUPLE)
}
"""Every kind by its ``SpaceSpec.spec`` arm, in the proto's order."""

RAW_KINDS = frozenset(name for name, kind in KINDS.items() if kind.raw)
"""The arms whose batches are raw element bytes; the rest travel as ValueLists."""

_LABELS = ", ".join(kind.label for kind in KINDS.values())


def kind_of(spec: spaces_pb2.SpaceSpec) -> SpaceKind:
    """The kind of ``spec``; ``ValueError`` for a spec with no kind set."""
    arm = spec.WhichOneof("spec")
    if arm is None:
        raise ValueError(f"SpaceSpec has no kind set; expected one of {_LABELS}")
    return KINDS[arm]


def describe_space(spec: spaces_pb2.SpaceSpec) -> str:
    """A gymnasium-style one-line description, e.g. ``Box(-1.0, 1.0, (2,), float32)``.

    Never fails and never allocates in proportion to a declared size: a malformed spec is
    described as such.
    """
    arm = spec.WhichOneof("spec")
    return "SpaceSpec(no kind set)" if arm is None else KINDS[arm].describe(spec)


def _spec_shape(spec: spaces_pb2.SpaceSpec) -> tuple[int, ...]:
    return tuple(int(d) for d in spec.shape)


def _agree(
    spec: spaces_pb2.SpaceSpec, name: str, label: str, arm_shape: tuple[int, ...] | None
) -> tuple[int, ...]:
    """The spec's shape, checked against (or filled from) the shape its arm implies."""
    shape = _spec_shape(spec)
    if arm_shape is None:
        return shape
    if shape and shape != arm_shape:
        raise CodecError(
            f"{name}: {label} spec shape {list(shape)} disagrees with its arm's shape {list(arm_shape)}"
        )
    return arm_shape


def _wire_dtype(code: spaces_pb2.DType) -> np.dtype:
    """The little-endian numpy dtype of one wire element of ``code`` (bfloat16 reads as uint16 bits)."""
    entry = WIRE_DTYPES.get(code)
    if entry is None:
        raise ValueError(
            f"dtype {dtype_label(code)} has no wire element; expected a concrete dtype such as float32"
        )
    return entry[1]


def _bound_text(values: np.ndarray) -> str:
    # A broadcast view (all strides 0) is one value: never expand it to the declared shape.
    flat = values.reshape(-1) if any(values.strides) else np.asarray(values.flat[0:1])
    if flat.size and np.all(flat == flat[0]):
        first = flat[0]
        return str(first.item()) if values.dtype.kind != "f" else repr(float(first))
    return np.array2string(values, threshold=8, separator=" ")
