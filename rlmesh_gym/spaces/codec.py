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
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlmesh_gym.proto import spaces_pb2
from rlmesh_gym.spaces._dtypes import WIRE_DTYPES, dtype_label
from rlmesh_gym.spaces._values import CodecError, convert
from rlmesh_gym.spaces.kinds import KINDS, SpaceKind
from rlmesh_gym.spaces.limits import SpaceSpecError, check_space_spec

__all__ = ["CodecError", "SpaceCodec", "decode", "decode_batch", "encode", "encode_batch"]

_ndarray = np.ndarray
_FLOAT32 = np.dtype("<f4")
_MAX_CACHED_BATCH_SIZES = 64


class SpaceCodec:
    """A compiled encoder/decoder for the values of one ``SpaceSpec``.

    Attributes:
        spec: the ``SpaceSpec`` it was compiled from.
        name: the path used in error messages (``"obs"``, ``"obs['camera']"``, ...).
        kind: the spec arm: ``box``, ``discrete``, ``multi_binary``, ``multi_discrete``, ``text``,
            ``dict`` or ``tuple``.
        handler: that kind's ``SpaceKind`` (``rlmesh_gym.spaces.kinds.KINDS[kind]``).
        raw: whether batches are raw element bytes (Box, Discrete, MultiBinary, MultiDiscrete)
            rather than a ``ValueList``.
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
        "handler",
        "raw",
        "shape",
        "numpy_dtype",
        "lane_nbytes",
        "keys",
        "children",
        "_wire",
        "_fast_dtype",
        "_bf16",
        "_binary",
        "_plain",
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
        self.handler: SpaceKind = KINDS[kind]
        self.raw: bool = self.handler.raw
        self.keys: tuple[str, ...] = ()
        self.children: tuple[SpaceCodec, ...] = ()
        self.shape: tuple[int, ...] = ()
        self.numpy_dtype: np.dtype | None = None
        self.lane_nbytes = 0
        self._wire: np.dtype  # set by _compile_raw; only raw kinds read it
        self._fast_dtype: np.dtype | None = None
        self._bf16 = False
        self._binary = False
        self._plain = True
        self._batches: dict[int | None, tuple[tuple[int, ...], int]] = {}
        self._shapes: dict[int, tuple[int, ...]] = {}
        self._same_as: SpaceCodec | None = None
        if self.raw:
            self._compile_raw(spec)
        else:
            self.keys, members = self.handler.members(spec, name)
            self.children = tuple(SpaceCodec(child, name=path) for child, path in members)

    def _compile_raw(self, spec: spaces_pb2.SpaceSpec) -> None:
        name, kind = self.name, self.kind
        entry = WIRE_DTYPES.get(spec.dtype)
        if entry is None:
            raise CodecError(
                f"{name}: {kind} spec has dtype {dtype_label(spec.dtype)}, expected a concrete "
                "element dtype such as float32 or int64"
            )
        wire = entry[1]
        shape = self.handler.lane_shape(spec, wire, name)
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
        if self.raw:
            return f"SpaceCodec({self.name}: {self.kind} {self.numpy_dtype} {self.shape})"
        return f"SpaceCodec({self.name}: {self.kind})"

    # ------------------------------------------------------------------ batches (the wire form)

    def encode_batch(self, values: Any, n: int) -> bytes:
        """The message bytes of a batch of ``n`` values in ``batch_space`` layout."""
        if self.raw:
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
        if self.raw:
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
        if self.raw:
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
        return self.encode_batch(self.handler.batch_of_one(self, value), 1)

    def decode(self, data: bytes | bytearray | memoryview) -> Any:
        """The one value in ``data`` (a batch of one). Raw kinds give read-only views."""
        return self._lane(self.decode_batch(data, 1), 0)

    def batch_of_one(self, value: Any) -> Any:
        """One value as a batch of one (``batch_space`` layout); CodecError for a wrong structure."""
        return self.handler.batch_of_one(self, value)

    def _lane(self, batch: Any, i: int) -> Any:
        return self.handler.lane(self, batch, i)

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
            bits = np.ascontiguousarray(convert(array, _FLOAT32, self.name)).view("<u4")
            return (bits >> 16).astype(self._wire)
        array = convert(array, self._wire, self.name)
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
        self.handler.fill(self, nodes, values, n)

    def _decode_nodes(self, nodes: Sequence[Any], n: int) -> Any:
        """The batch held by ``n`` nodes, one per lane."""
        arm = self.handler.node_arm
        for i, node in enumerate(nodes):
            got = node.WhichOneof("kind")
            if got != arm:
                raise CodecError(
                    f"{self.name} (lane {i}): expected a {arm!r} node for a {self.kind} space, got {got!r}"
                )
        return self.handler.decode_nodes(self, nodes, n)


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
