"""Values <-> rlmesh message bytes, in the batched form every peer uses (docs/design/wire.md#message-bytes).

A batch of N values of a per-lane space travels as:

* Box, Discrete, MultiBinary, MultiDiscrete ("raw kinds"): the N values' little-endian element
  bytes, concatenated with no framing.
* Text, Dict, Tuple: a serialized ``ValueList`` holding one ``SpaceValueNode`` per lane.

Values use gymnasium's ``batch_space`` layout: an array with a leading N axis for raw kinds, a
dict of batches for Dict, a tuple of batches for Tuple and a tuple of N ``str`` for Text.

Compile a ``SpaceCodec`` once per space and reuse it on the hot path::

    codec = SpaceCodec(contract.observation_space, name="obs")
    data = codec.encode_batch(observations, n)       # bytes for SpaceValue.bytes.data
    batch = codec.decode_batch(data, n)              # read-only numpy view for raw kinds

Raw decodes are zero-copy views on ``data``, read-only for ``bytes`` (copy them to write), in
native byte order (a copy on big-endian hosts); MultiBinary reads any non-zero byte as 1. A raw
encode of an ndarray already in the wire dtype and shape is one copy (``ndarray.tobytes``); a
cast adds one more. bfloat16 is the exception on both sides: its values are float32 arrays in
Python and the top 16 bits of each float32 (truncated, as upstream) on the wire.

The codec checks structure (shapes, counts, node kinds, keys, exact dtype conversions), not the
space's domain: bounds, Discrete ranges and Text charsets are ``gymnasium.Space.contains``'s job.
Every failure is a ``CodecError`` naming the value's path, what was expected and what came.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rlmesh_gym.proto import spaces_pb2
from rlmesh_gym.spaces._dtypes import WIRE_DTYPES, dtype_label
from rlmesh_gym.spaces.limits import SpaceSpecError, check_space_spec

__all__ = ["CodecError", "SpaceCodec", "decode", "decode_batch", "encode", "encode_batch"]

_RAW_KINDS = frozenset({"box", "discrete", "multi_binary", "multi_discrete"})
_NODE_ARM = {
    "box": "tensor",
    "discrete": "discrete",
    "multi_binary": "multi",
    "multi_discrete": "multi",
    "text": "text",
    "dict": "dict",
    "tuple": "tuple",
}
_ndarray = np.ndarray
_FLOAT32 = np.dtype("<f4")
_INT64 = np.dtype("<i8")
_MAX_CACHED_BATCH_SIZES = 64


class CodecError(ValueError):
    """A value or payload does not fit its space; the message names the path, expected and got."""


class SpaceCodec:
    """A compiled encoder/decoder for the values of one ``SpaceSpec``.

    Attributes:
        spec: the ``SpaceSpec`` it was compiled from.
        name: the path used in error messages (``"obs"``, ``"obs['camera']"``, ...).
        kind: the spec arm: ``box``, ``discrete``, ``multi_binary``, ``multi_discrete``, ``text``,
            ``dict`` or ``tuple``.
        shape: the per-lane shape (``()`` for Discrete, Text, Dict, Tuple and scalar Box).
        numpy_dtype: the dtype of decoded arrays for raw kinds (native byte order; float32 for
            bfloat16), ``None`` for Text, Dict and Tuple.
        lane_nbytes: bytes per lane on the wire for raw kinds (0 otherwise).
        keys: the Dict keys in wire (byte) order; empty for other kinds.
        children: the child codecs of a Dict (parallel to ``keys``) or Tuple.

    Example:
        >>> spec = spaces_pb2.SpaceSpec(shape=[2], dtype=spaces_pb2.D_TYPE_FLOAT32,
        ...                             box=spaces_pb2.BoxSpec(unbounded=True))
        >>> codec = SpaceCodec(spec, name="obs")
        >>> codec.encode_batch(np.array([[1.5, -2.0]], dtype=np.float32), 1).hex()
        '0000c03f000000c0'
        >>> codec.decode_batch(bytes.fromhex("0000c03f000000c0"), 1)
        array([[ 1.5, -2. ]], dtype=float32)
    """

    __slots__ = (
        "spec",
        "name",
        "kind",
        "shape",
        "numpy_dtype",
        "lane_nbytes",
        "keys",
        "children",
        "_raw",
        "_wire",
        "_fast_dtype",
        "_bf16",
        "_binary",
        "_plain",
        "_arm",
        "_batches",
        "_shapes",
        "_same_as",
    )

    def __init__(self, spec: spaces_pb2.SpaceSpec, *, name: str = "value") -> None:
        self.spec = spec
        self.name = name
        kind = spec.WhichOneof("spec")
        if kind is None:
            raise CodecError(
                f"{name}: the SpaceSpec has no kind set (expected box, discrete, multi_binary, "
                "multi_discrete, text, dict or tuple)"
            )
        try:
            check_space_spec(spec, name=name)
        except SpaceSpecError as error:
            raise CodecError(str(error)) from None
        self.kind: str = kind
        self._arm = _NODE_ARM[kind]
        self._raw = kind in _RAW_KINDS
        self.keys: tuple[str, ...] = ()
        self.children: tuple[SpaceCodec, ...] = ()
        self.shape: tuple[int, ...] = ()
        self.numpy_dtype: np.dtype | None = None
        self.lane_nbytes = 0
        self._wire: np.dtype | None = None
        self._fast_dtype: np.dtype | None = None
        self._bf16 = False
        self._binary = False
        self._plain = True
        self._batches: dict[int, tuple[tuple[int, ...], int]] = {}
        self._shapes: dict[int, tuple[int, ...]] = {}
        self._same_as: SpaceCodec | None = None
        if self._raw:
            self._compile_raw(spec)
        elif kind == "dict":
            keys = tuple(spec.dict.keys)
            if len(keys) != len(spec.dict.spaces) or len(set(keys)) != len(keys):
                raise CodecError(
                    f"{name}: DictSpec needs unique keys parallel to its spaces, got keys "
                    f"{list(keys)} for {len(spec.dict.spaces)} spaces"
                )
            self.keys = keys
            self.children = tuple(
                SpaceCodec(child, name=f"{name}[{key!r}]")
                for key, child in zip(keys, spec.dict.spaces, strict=True)
            )
        elif kind == "tuple":
            self.children = tuple(
                SpaceCodec(child, name=f"{name}[{i}]") for i, child in enumerate(spec.tuple.spaces)
            )

    def _compile_raw(self, spec: spaces_pb2.SpaceSpec) -> None:
        name, kind = self.name, self.kind
        entry = WIRE_DTYPES.get(spec.dtype)
        if entry is None:
            raise CodecError(
                f"{name}: {kind} spec has dtype {dtype_label(spec.dtype)}, expected a concrete "
                "element dtype such as float32 or int64"
            )
        wire = entry[1]
        shape = tuple(int(d) for d in spec.shape)
        if kind == "discrete":
            shape = ()
            if wire.kind not in "iu":
                raise CodecError(f"{name}: Discrete spec has dtype {entry[0]}, expected an integer dtype")
        elif kind == "multi_binary":
            arm_shape = _multi_binary_shape(spec.multi_binary)
            shape = _agree(name, "MultiBinary", shape, arm_shape)
            if wire.itemsize != 1:
                raise CodecError(
                    f"{name}: MultiBinary spec has dtype {entry[0]}, expected a 1-byte dtype (uint8)"
                )
        elif kind == "multi_discrete":
            shape = _agree(name, "MultiDiscrete", shape, _multi_discrete_shape(name, spec.multi_discrete))
            if wire.kind not in "iu":
                raise CodecError(
                    f"{name}: MultiDiscrete spec has dtype {entry[0]}, expected an integer dtype"
                )
        if any(d < 0 for d in shape):
            raise CodecError(f"{name}: spec shape {list(shape)} has a negative dimension")
        self.shape = shape
        self._wire = wire
        self._bf16 = spec.dtype == spaces_pb2.D_TYPE_BFLOAT16
        self._binary = kind == "multi_binary"
        self.numpy_dtype = (_FLOAT32 if self._bf16 else wire).newbyteorder("=")
        # MultiBinary encodes go through _coerce, which refuses values other than 0/1.
        self._fast_dtype = None if self._bf16 or self._binary else wire
        # A decode that is just a view of the payload (no bfloat16 widening, no 0/1 check, and
        # the wire's little-endian dtype is native, i.e. not a big-endian host).
        self._plain = not (self._bf16 or self._binary or not wire.isnative)
        self.lane_nbytes = int(np.prod(shape, dtype=np.int64)) * wire.itemsize

    def same_space(self, other: SpaceCodec | None) -> bool:
        """Whether ``other`` is a codec of the same space (its values are this codec's values).

        The last codec found equal is remembered: adapters ask once per step.
        """
        if other is self or other is self._same_as:
            return True
        if other is None or other.spec != self.spec:
            return False
        self._same_as = other
        return True

    def __repr__(self) -> str:
        if self._raw:
            return f"SpaceCodec({self.name}: {self.kind} {self.numpy_dtype} {self.shape})"
        return f"SpaceCodec({self.name}: {self.kind})"

    # ------------------------------------------------------------------ batches (the wire form)

    def encode_batch(self, values: Any, n: int) -> bytes:
        """The message bytes of a batch of ``n`` values in ``batch_space`` layout."""
        if self._raw:
            # Hot path: an ndarray of the exact dtype and shape needs only tobytes(), which is the
            # one copy (it gathers non-contiguous input into C order).
            if self._is_exact(values, n):
                return values.tobytes()
            return self._coerce(values, self._batch(n)[0], n).tobytes()
        n = self._count(n)
        items = spaces_pb2.ValueList()
        nodes = [items.items.add() for _ in range(n)]
        self._fill(nodes, values, n)
        return items.SerializeToString(deterministic=True)

    def normalize_batch(self, values: Any, n: int) -> Any:
        """``values`` as :meth:`decode_batch` would give them back after :meth:`encode_batch`.

        The value form of a batch without its bytes: raw kinds give an ndarray of the decoded
        dtype and shape ``(n, *shape)`` (``values`` itself when it already is one, else a
        converted copy); Text, Dict and Tuple go through the bytes. Raises the same
        ``CodecError`` as :meth:`encode_batch` for anything it would refuse.
        """
        if self._raw:
            if self._is_exact(values, n):
                return values
            return self._finish(self._coerce(values, self._batch(n)[0], n))
        return self.decode_batch(self.encode_batch(values, n), n)

    def decode_batch(self, data: bytes | bytearray | memoryview, n: int | None) -> Any:
        """The batch of ``n`` values in ``data`` (``n=None`` infers it from the payload).

        ``data`` is ``bytes`` or any C-contiguous buffer (``bytearray``, ``memoryview`` of any
        format, a contiguous ndarray), read as its raw bytes. Raw kinds give a zero-copy ndarray of
        shape ``(n, *shape)`` in native byte order, read-only for ``bytes`` (a fresh array for
        bfloat16, for a MultiBinary payload with bytes other than 0/1, which decode as 1, and on
        big-endian hosts); Text gives a tuple of ``n`` str; Dict a dict of batches; Tuple a tuple.
        """
        if type(data) is not bytes:
            data = _byte_view(data, self.name)
        if self._raw:
            try:
                shape, nbytes = self._batches[n]
            except (KeyError, TypeError):  # first use of this n, or n=None (infer it)
                shape, nbytes = self._batch(self._infer_raw_count(data) if n is None else n)
            if len(data) != nbytes:
                raise CodecError(self._length_message(data, shape[0]))
            # ndarray(shape, dtype, buffer) is a view on data: zero-copy, read-only for bytes.
            if self._plain:
                return _ndarray(shape, self._wire, data)
            return self._finish(_ndarray(shape, self._wire, data))
        items = _parse_value_list(data, self.name)
        if n is None:
            n = len(items)
        elif len(items) != n:
            raise CodecError(
                f"{self.name}: expected a ValueList of {self._count(n)} item(s), got {len(items)} "
                "(a single Text/Dict/Tuple value is still wrapped in a ValueList)"
            )
        return self._decode_nodes(items, n)

    def _is_exact(self, values: Any, n: int) -> bool:
        """Whether ``values`` is already an ndarray of the wire dtype and batch shape (raw kinds)."""
        try:
            return (
                values.shape == self._shapes[n]
                and values.dtype is self._fast_dtype
                and type(values) is _ndarray
            )
        except (KeyError, AttributeError, TypeError):  # first use of this n, or not an ndarray
            return False

    def _finish(self, wire_view: np.ndarray) -> np.ndarray:
        """A decoded raw batch from its view in wire form: bfloat16 widened, MultiBinary 0/1, native order."""
        if self._bf16:
            return _native_order(_bf16_to_float32(wire_view))
        if self._binary:
            return _zero_one(wire_view)
        return _native_order(wire_view)

    # ------------------------------------------------------------------ single values

    def encode(self, value: Any) -> bytes:
        """The message bytes of one value (a batch of one)."""
        return self.encode_batch(self._batch_of_one(value), 1)

    def decode(self, data: bytes | bytearray | memoryview) -> Any:
        """The one value in ``data`` (a batch of one). Raw kinds give read-only views."""
        return self._lane(self.decode_batch(data, 1), 0)

    def batch_of_one(self, value: Any) -> Any:
        """One value as a batch of one (``batch_space`` layout); CodecError for a wrong structure."""
        return self._batch_of_one(value)

    def _batch_of_one(self, value: Any) -> Any:
        if self._raw:
            try:
                array = np.asarray(value)
            except Exception as exc:
                raise CodecError(
                    f"{self.name}: expected an array-like of shape {self.shape}, "
                    f"got {type(value).__name__} ({exc})"
                ) from exc
            if array.shape != self.shape:
                raise CodecError(f"{self.name}: expected shape {self.shape}, got shape {array.shape}")
            return array[None]
        if self.kind == "text":
            if not isinstance(value, str):
                raise CodecError(f"{self.name}: expected a str, got {type(value).__name__}")
            return (value,)
        if self.kind == "dict":
            mapping = self._mapping(value, "")
            return {
                key: child._batch_of_one(mapping[key])
                for key, child in zip(self.keys, self.children, strict=True)
            }
        parts = self._sequence(value, "")
        return tuple(child._batch_of_one(part) for child, part in zip(self.children, parts, strict=True))

    def _lane(self, batch: Any, i: int) -> Any:
        if self._raw:
            if self.kind == "discrete":
                return batch[i]
            return batch[i] if self.shape else batch[i : i + 1].reshape(())
        if self.kind == "text":
            return batch[i]
        if self.kind == "dict":
            return {
                key: child._lane(batch[key], i) for key, child in zip(self.keys, self.children, strict=True)
            }
        return tuple(child._lane(part, i) for child, part in zip(self.children, batch, strict=True))

    # ------------------------------------------------------------------ raw kinds

    def _batch(self, n: Any) -> tuple[tuple[int, ...], int]:
        """``(batch shape, payload bytes)`` for ``n`` lanes, validated and cached."""
        count = self._count(n)
        entry = ((count, *self.shape), count * self.lane_nbytes)
        if len(self._batches) < _MAX_CACHED_BATCH_SIZES:
            self._batches[count] = entry
            self._shapes[count] = entry[0]
        return entry

    def _count(self, n: Any) -> int:
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise CodecError(f"{self.name}: the batch size n must be an int >= 0, got {n!r}")
        return int(n)

    def _infer_raw_count(self, data: bytes | bytearray | memoryview) -> int:
        if self.lane_nbytes == 0:
            raise CodecError(f"{self.name}: cannot infer the batch size of a zero-size space; pass n")
        count, rest = divmod(len(data), self.lane_nbytes)
        if rest:
            raise CodecError(self._length_message(data, None))
        return count

    def _length_message(self, data: bytes | bytearray | memoryview, n: int | None) -> str:
        per_lane = (
            f"{self.lane_nbytes} bytes per value ({self.kind} {self.shape} {dtype_label(self.spec.dtype)})"
        )
        if n is None:
            return f"{self.name}: payload length {len(data)} is not a multiple of {per_lane}"
        total = n * self.lane_nbytes
        return f"{self.name}: expected {n} value(s) of {per_lane} = {total} bytes, got {len(data)} bytes"

    def _coerce(self, values: Any, shape: tuple[int, ...], n: int) -> np.ndarray:
        """``values`` as a C-order array of the wire dtype, or a CodecError (the slow path)."""
        target = "float32 (sent as bfloat16)" if self._bf16 else self._wire.name
        try:
            array = np.asarray(values)
        except Exception as exc:
            raise CodecError(
                f"{self.name}: expected an array-like of shape {shape} and dtype {target}, "
                f"got {type(values).__name__} ({exc})"
            ) from exc
        if array.shape != shape:
            raise CodecError(
                f"{self.name}: expected a batch of shape {shape} (n={n} lanes of {self.shape}), "
                f"got shape {array.shape}"
            )
        if self._bf16:
            if array.dtype.name == "bfloat16":  # e.g. ml_dtypes: already the wire bits
                return array.view(np.uint16).astype(self._wire, copy=False)
            bits = np.ascontiguousarray(_convert(array, _FLOAT32, self.name)).view("<u4")
            return (bits >> 16).astype(self._wire)
        array = _convert(array, self._wire, self.name)
        if self._binary and array.size:
            # Refuse rather than reduce to 1 (upstream's encoder does): a 2 is not a MultiBinary value.
            above = array > 1
            if above.any():
                raise CodecError(
                    f"{self.name}: expected MultiBinary values 0 or 1, got {array[above].flat[0].item()!r}"
                )
        return array

    # ------------------------------------------------------------------ composite nodes

    def _fill(self, nodes: list[Any], values: Any, n: int) -> None:
        """Write one lane of ``values`` (batch layout) into each of the ``n`` nodes."""
        kind = self.kind
        if self._raw:
            shape = self._batch(n)[0]
            if kind == "discrete":
                # The discrete arm is an int64 varint whatever the spec dtype.
                for node, item in zip(
                    nodes,
                    _convert(_as_array(values, shape, self.name), _INT64, self.name).tolist(),
                    strict=False,
                ):
                    node.discrete = item
                return
            data = self.encode_batch(values, n)
            size = self.lane_nbytes
            if kind == "box":
                for i, node in enumerate(nodes):
                    node.tensor = data[i * size : (i + 1) * size]
            else:
                for i, node in enumerate(nodes):
                    node.multi = data[i * size : (i + 1) * size]
            return
        if kind == "text":
            texts = self._texts(values, n)
            for node, text in zip(nodes, texts, strict=True):
                node.text = text
        elif kind == "dict":
            mapping = self._mapping(values, f" (a dict of {n}-lane batches)")
            for node in nodes:
                node.dict.SetInParent()
            for key, child in zip(self.keys, self.children, strict=True):
                child._fill([node.dict.entries[key] for node in nodes], mapping[key], n)
        else:
            parts = self._sequence(values, f" (a tuple of {n}-lane batches)")
            for node in nodes:
                node.tuple.SetInParent()
            for child, part in zip(self.children, parts, strict=True):
                child._fill([node.tuple.items.add() for node in nodes], part, n)

    def _texts(self, values: Any, n: int) -> Sequence[str]:
        if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
            raise CodecError(
                f"{self.name}: expected a sequence of {n} str (one per lane), got {type(values).__name__}"
            )
        if len(values) != n:
            raise CodecError(f"{self.name}: expected {n} str (one per lane), got {len(values)}")
        for i, text in enumerate(values):
            if not isinstance(text, str):
                raise CodecError(f"{self.name} (lane {i}): expected a str, got {type(text).__name__}")
        return values

    def _mapping(self, values: Any, layout: str) -> Mapping[str, Any]:
        if not isinstance(values, Mapping):
            if hasattr(values, "_asdict"):
                values = values._asdict()
            else:
                raise CodecError(
                    f"{self.name}: expected a dict with keys {list(self.keys)}{layout}, "
                    f"got {type(values).__name__}"
                )
        missing = [key for key in self.keys if key not in values]
        if missing or len(values) != len(self.keys):
            extra = [key for key in values if key not in self.keys]
            problem = f"missing key(s) {missing}" if missing else f"unexpected key(s) {extra}"
            raise CodecError(f"{self.name}: {problem}; the space has keys {list(self.keys)}")
        return values

    def _sequence(self, values: Any, layout: str) -> Sequence[Any]:
        if not isinstance(values, (tuple, list)):
            raise CodecError(
                f"{self.name}: expected a tuple of {len(self.children)} element(s){layout}, "
                f"got {type(values).__name__}"
            )
        if len(values) != len(self.children):
            raise CodecError(
                f"{self.name}: expected a tuple of {len(self.children)} element(s), got {len(values)}"
            )
        return values

    def _decode_nodes(self, nodes: Sequence[Any], n: int) -> Any:
        """The batch held by ``n`` nodes, one per lane."""
        arm = self._arm
        for i, node in enumerate(nodes):
            got = node.WhichOneof("kind")
            if got != arm:
                raise CodecError(
                    f"{self.name} (lane {i}): expected a {arm!r} node for a {self.kind} space, got {got!r}"
                )
        kind = self.kind
        if kind == "discrete":
            values = np.array([node.discrete for node in nodes], dtype=_INT64)
            return values if self.numpy_dtype == _INT64 else _convert(values, self.numpy_dtype, self.name)
        if self._raw:
            chunks = [node.tensor for node in nodes] if kind == "box" else [node.multi for node in nodes]
            for i, chunk in enumerate(chunks):
                if len(chunk) != self.lane_nbytes:
                    raise CodecError(
                        f"{self.name} (lane {i}): expected {self.lane_nbytes} bytes "
                        f"({self.shape} {dtype_label(self.spec.dtype)}), got {len(chunk)}"
                    )
            return self.decode_batch(b"".join(chunks), n)
        if kind == "text":
            return tuple(node.text for node in nodes)
        if kind == "dict":
            batch = {}
            for key, child in zip(self.keys, self.children, strict=True):
                column = []
                for i, node in enumerate(nodes):
                    entries = node.dict.entries
                    if key not in entries:
                        raise CodecError(
                            f"{self.name} (lane {i}): missing key {key!r}; the space has keys "
                            f"{list(self.keys)}, the payload has {sorted(entries)}"
                        )
                    column.append(entries[key])
                batch[key] = child._decode_nodes(column, n)
            return batch
        arity = len(self.children)
        for i, node in enumerate(nodes):
            if len(node.tuple.items) != arity:
                raise CodecError(
                    f"{self.name} (lane {i}): expected a tuple of {arity} element(s), "
                    f"got {len(node.tuple.items)}"
                )
        return tuple(
            child._decode_nodes([node.tuple.items[j] for node in nodes], n)
            for j, child in enumerate(self.children)
        )


def _multi_binary_shape(spec: spaces_pb2.MultiBinarySpec) -> tuple[int, ...] | None:
    arm = spec.WhichOneof("n")
    if arm == "dims":
        return tuple(int(d) for d in spec.dims.data)
    if arm == "size":
        return (int(spec.size),)
    return None


def _multi_discrete_shape(name: str, spec: spaces_pb2.MultiDiscreteSpec) -> tuple[int, ...] | None:
    arm = spec.WhichOneof("nvec")
    if arm == "flat":
        return (len(spec.flat.data),)
    if arm == "shaped":
        widths = {len(row.data) for row in spec.shaped.data}
        if len(widths) > 1:
            raise CodecError(
                f"{name}: MultiDiscrete shaped nvec has rows of different lengths {sorted(widths)}"
            )
        return (len(spec.shaped.data), widths.pop() if widths else 0)
    return None


def _agree(
    name: str, label: str, shape: tuple[int, ...], arm_shape: tuple[int, ...] | None
) -> tuple[int, ...]:
    """The spec's shape, checked against (or filled from) the shape its arm implies."""
    if arm_shape is None:
        return shape
    if shape and shape != arm_shape:
        raise CodecError(
            f"{name}: {label} spec shape {list(shape)} disagrees with its arm's shape {list(arm_shape)}"
        )
    return arm_shape


def _as_array(values: Any, shape: tuple[int, ...], name: str) -> np.ndarray:
    try:
        array = np.asarray(values)
    except Exception as exc:
        raise CodecError(
            f"{name}: expected an array-like of shape {shape}, got {type(values).__name__} ({exc})"
        ) from exc
    if array.shape != shape:
        raise CodecError(f"{name}: expected a batch of shape {shape}, got shape {array.shape}")
    return array


def _convert(array: np.ndarray, dtype: np.dtype, name: str) -> np.ndarray:
    """``array`` in ``dtype``; refuses conversions that change a value (NaN or 1.5 to int, 300 to uint8)."""
    source = array.dtype
    if source == dtype:
        return array
    if source.kind not in "biuf":
        raise CodecError(f"{name}: expected numeric values convertible to {dtype.name}, got dtype {source}")
    target = dtype.kind
    if target in "iu" and source.kind != "b" and array.size:
        info = np.iinfo(dtype)
        if source.kind == "f":
            upper = 2.0 ** (info.bits if info.min == 0 else info.bits - 1)  # exclusive, exact in any float
            with np.errstate(invalid="ignore"):
                ok = np.isfinite(array) & (array == np.trunc(array)) & (array >= info.min) & (array < upper)
            if not ok.all():
                raise CodecError(
                    f"{name}: expected {dtype.name} values, got {source} value {array[~ok].flat[0].item()!r} "
                    f"that is not an integer in [{info.min}, {info.max}]"
                )
        elif not np.can_cast(source, dtype):
            low, high = array.min(), array.max()
            if low < info.min or high > info.max:
                bad = low if low < info.min else high
                raise CodecError(
                    f"{name}: expected {dtype.name} values, got {source} value {bad.item()!r} outside "
                    f"[{info.min}, {info.max}]"
                )
    elif target == "b" and source.kind != "b" and array.size:
        ok = (array == 0) | (array == 1)
        if not ok.all():
            raise CodecError(
                f"{name}: expected bool values (0 or 1), got {source} value {array[~ok].flat[0].item()!r}"
            )
    return array.astype(dtype)


def _bf16_to_float32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype("<u4") << 16).view(_FLOAT32)


def _native_order(array: np.ndarray) -> np.ndarray:
    """``array`` in native byte order: itself when it already is (always on little-endian hosts).

    On a big-endian host the wire's little-endian arrays are converted (a copy), because
    ``torch.from_numpy`` and most consumers refuse non-native dtypes.
    """
    if array.dtype.isnative:
        return array
    return array.astype(array.dtype.newbyteorder("="))


def _zero_one(array: np.ndarray) -> np.ndarray:
    """A uint8 MultiBinary batch with every non-zero byte read as 1 (docs/design/wire.md#leaf-bytes)."""
    if array.size and array.max() > 1:
        return (array != 0).view(np.uint8)
    return array


def _byte_view(data: Any, name: str) -> memoryview:
    """The raw bytes of a C-contiguous buffer (zero-copy), or a CodecError for anything else."""
    try:
        return memoryview(data).cast("B")
    except (TypeError, ValueError) as exc:
        raise CodecError(
            f"{name}: expected the payload as bytes or a C-contiguous bytes-like buffer (bytearray, "
            f"memoryview, contiguous ndarray), got {type(data).__name__} ({exc})"
        ) from exc


def _parse_value_list(data: bytes | bytearray | memoryview, name: str) -> Any:
    try:
        return spaces_pb2.ValueList.FromString(bytes(data)).items
    except Exception as exc:  # DecodeError, or a recursion/UTF-8 failure inside upb
        raise CodecError(
            f"{name}: payload is not a valid ValueList message ({type(exc).__name__}: {exc})"
        ) from exc


@functools.lru_cache(maxsize=256)
def _compiled(spec_bytes: bytes, name: str) -> SpaceCodec:
    return SpaceCodec(spaces_pb2.SpaceSpec.FromString(spec_bytes), name=name)


def _codec(spec: spaces_pb2.SpaceSpec | SpaceCodec, name: str) -> SpaceCodec:
    if isinstance(spec, SpaceCodec):
        return spec
    return _compiled(spec.SerializeToString(deterministic=True), name)


def encode_batch(
    values: Any, spec: spaces_pb2.SpaceSpec | SpaceCodec, n: int, *, name: str = "value"
) -> bytes:
    """``SpaceCodec(spec).encode_batch(values, n)``, with the compiled codec cached per spec."""
    return _codec(spec, name).encode_batch(values, n)


def decode_batch(
    data: bytes | bytearray | memoryview,
    spec: spaces_pb2.SpaceSpec | SpaceCodec,
    n: int | None,
    *,
    name: str = "value",
) -> Any:
    """``SpaceCodec(spec).decode_batch(data, n)``, with the compiled codec cached per spec."""
    return _codec(spec, name).decode_batch(data, n)


def encode(value: Any, spec: spaces_pb2.SpaceSpec | SpaceCodec, *, name: str = "value") -> bytes:
    """The message bytes of one value (a batch of one)."""
    return _codec(spec, name).encode(value)


def decode(
    data: bytes | bytearray | memoryview, spec: spaces_pb2.SpaceSpec | SpaceCodec, *, name: str = "value"
) -> Any:
    """The one value in ``data`` (a batch of one)."""
    return _codec(spec, name).decode(data)
