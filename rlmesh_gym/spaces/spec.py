"""Gymnasium spaces <-> rlmesh ``SpaceSpec`` messages (docs/design/wire.md#space-spec).

``space_spec`` produces the same message as ``rlmesh==0.1.0b3`` for every space upstream
represents faithfully; where upstream would silently lose information it raises instead
(see ``docs/spaces.md``). ``gym_space`` is the inverse wherever the spec holds enough.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium.spaces.text import alphanumeric

from rlmesh_gym.proto import spaces_pb2
from rlmesh_gym.spaces._dtypes import DTYPE_BY_NAME, SUPPORTED_DTYPE_NAMES, WIRE_DTYPES, dtype_label
from rlmesh_gym.spaces.codec import CodecError, SpaceCodec
from rlmesh_gym.spaces.limits import check_space_spec
from rlmesh_gym.spaces.registry import SpaceConverter, converter_for

__all__ = ["UnrestrictedText", "gym_space", "space_spec"]

SUPPORTED_KINDS = "Box, Discrete, MultiBinary, MultiDiscrete, Text, Dict, Tuple (or their subclasses)"

_INTEGRAL_KINDS = frozenset("biu")


def space_spec(
    space: gym.Space, *, drop_multi_discrete_start: bool = False, name: str = "space"
) -> spaces_pb2.SpaceSpec:
    """The ``SpaceSpec`` of a gymnasium space, byte-compatible with rlmesh 0.1.0b3.

    Args:
        space: a Box, Discrete, MultiBinary, MultiDiscrete, Text, Dict or Tuple space
            (subclasses included), nested to any depth.
        drop_multi_discrete_start: the wire has no field for ``MultiDiscrete.start``. By default a
            non-zero start is refused; pass ``True`` to drop it as upstream does (the peer then
            sees the domain ``[0, nvec)``).
        name: the root of the paths used in error messages.

    Raises:
        TypeError: an unsupported space type, a Box dtype without a wire dtype, a non-str Dict
            key, or a MultiDiscrete of rank 0 or >= 3.
        ValueError: a MultiDiscrete with a non-zero start (unless ``drop_multi_discrete_start``).

    Example:
        >>> import gymnasium as gym
        >>> space_spec(gym.spaces.Discrete(3)).SerializeToString().hex()
        '10045a020803'
    """
    return _spec(space, name, drop_multi_discrete_start)


def _spec(space: gym.Space, path: str, drop_start: bool) -> spaces_pb2.SpaceSpec:
    converter = converter_for(space)
    if converter is not None:
        return _registered_spec(space, converter, path, drop_start)
    if isinstance(space, gym.spaces.Box):
        return _box_spec(space, path)
    if isinstance(space, gym.spaces.Discrete):
        return spaces_pb2.SpaceSpec(
            dtype=spaces_pb2.D_TYPE_INT64,
            discrete=spaces_pb2.DiscreteSpec(n=int(space.n), start=int(getattr(space, "start", 0))),
        )
    if isinstance(space, gym.spaces.MultiBinary):
        return _multi_binary_spec(space)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return _multi_discrete_spec(space, path, drop_start)
    if isinstance(space, gym.spaces.Text):
        return _text_spec(space)
    if isinstance(space, gym.spaces.Dict):
        keys = list(space.spaces)
        bad = [key for key in keys if not isinstance(key, str)]
        if bad:
            raise TypeError(
                f"{path}: Dict keys must be str (the wire keys are strings), got "
                f"{type(bad[0]).__name__} key {bad[0]!r}; rename the key"
            )
        # DictSpec keys are sorted by UTF-8 byte order, which equals code point order.
        ordered = sorted(keys)
        return spaces_pb2.SpaceSpec(
            dict=spaces_pb2.DictSpec(
                keys=ordered,
                spaces=[_spec(space.spaces[key], f"{path}[{key!r}]", drop_start) for key in ordered],
            )
        )
    if isinstance(space, gym.spaces.Tuple):
        return spaces_pb2.SpaceSpec(
            tuple=spaces_pb2.TupleSpec(
                spaces=[_spec(child, f"{path}[{i}]", drop_start) for i, child in enumerate(space.spaces)]
            )
        )
    raise TypeError(
        f"{path}: unsupported space {space!r} of type {type(space).__name__}; "
        f"the rlmesh wire supports {SUPPORTED_KINDS}, and other Space subclasses once mapped to one "
        "with rlmesh_gym.spaces.register_space"
    )


def _registered_spec(
    space: gym.Space, converter: SpaceConverter, path: str, drop_start: bool
) -> spaces_pb2.SpaceSpec:
    """The spec of a user space, from the converter registered for its type, checked."""
    name = getattr(converter, "__qualname__", repr(converter))
    owner = f"the converter {name} registered for {type(space).__name__}"
    try:
        result = converter(space)
    except Exception as error:
        raise ValueError(f"{path}: {owner} raised {type(error).__name__}: {error}") from error
    if isinstance(result, spaces_pb2.SpaceSpec):
        try:
            SpaceCodec(result, name=path)
        except CodecError as error:
            raise ValueError(
                f"{path}: {owner} returned a SpaceSpec the codec cannot encode: {error}"
            ) from error
        return result
    if isinstance(result, gym.Space) and converter_for(result) is None:
        try:
            return _spec(result, path, drop_start)
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"{path}: {owner} returned {result!r}, which has no rlmesh form: {error}"
            ) from error
    raise TypeError(
        f"{path}: {owner} returned {type(result).__name__} {result!r:.80}; expected a SpaceSpec or a "
        f"standard gymnasium space ({SUPPORTED_KINDS})"
    )


def _box_spec(space: gym.spaces.Box, path: str) -> spaces_pb2.SpaceSpec:
    code = DTYPE_BY_NAME.get(space.dtype.name)
    if code is None:
        raise TypeError(
            f"{path}: Box dtype {space.dtype.name} has no rlmesh wire dtype; "
            f"use one of {SUPPORTED_DTYPE_NAMES}"
        )
    shape = tuple(int(d) for d in space.shape)
    low = np.broadcast_to(space.low, shape)
    high = np.broadcast_to(space.high, shape)
    if space.dtype.kind in _INTEGRAL_KINDS:
        wire = WIRE_DTYPES[code][1]
        low_raw = np.ascontiguousarray(low, dtype=wire).reshape(-1)
        high_raw = np.ascontiguousarray(high, dtype=wire).reshape(-1)
        if low_raw.size and _all_same_bits(low_raw) and _all_same_bits(high_raw):
            box = spaces_pb2.BoxSpec(
                typed_uniform=spaces_pb2.TypedUniformBounds(
                    low=low_raw[:1].tobytes(), high=high_raw[:1].tobytes()
                )
            )
        else:
            box = spaces_pb2.BoxSpec(
                typed_elementwise=spaces_pb2.TypedElementwiseBounds(
                    low=low_raw.tobytes(), high=high_raw.tobytes()
                )
            )
    else:
        low64 = np.asarray(low, dtype=np.float64).reshape(-1)
        high64 = np.asarray(high, dtype=np.float64).reshape(-1)
        if np.all(low64 == -np.inf) and np.all(high64 == np.inf):
            box = spaces_pb2.BoxSpec(unbounded=True)
        elif _all_same_bits(low64) and _all_same_bits(high64):
            box = spaces_pb2.BoxSpec(
                uniform=spaces_pb2.UniformBounds(low=float(low64[0]), high=float(high64[0]))
            )
        else:
            box = spaces_pb2.BoxSpec(
                elementwise=spaces_pb2.ElementwiseBounds(low=low64.tolist(), high=high64.tolist())
            )
    return spaces_pb2.SpaceSpec(shape=shape, dtype=code, box=box)


def _all_same_bits(values: np.ndarray) -> bool:
    """Every element has the same bytes as the first (so -0.0 differs from 0.0, like upstream)."""
    if values.size == 0:
        return False
    bits = values.view(f"u{values.dtype.itemsize}") if values.dtype.kind != "b" else values
    return bool(np.all(bits == bits[0]))


def _multi_binary_spec(space: gym.spaces.MultiBinary) -> spaces_pb2.SpaceSpec:
    if isinstance(space.n, (int, np.integer)):
        size = int(space.n)
        return spaces_pb2.SpaceSpec(
            shape=[size], dtype=spaces_pb2.D_TYPE_UINT8, multi_binary=spaces_pb2.MultiBinarySpec(size=size)
        )
    dims = [int(d) for d in space.n]
    return spaces_pb2.SpaceSpec(
        shape=dims,
        dtype=spaces_pb2.D_TYPE_UINT8,
        multi_binary=spaces_pb2.MultiBinarySpec(dims=spaces_pb2.VectorInt(data=dims)),
    )


def _multi_discrete_spec(
    space: gym.spaces.MultiDiscrete, path: str, drop_start: bool
) -> spaces_pb2.SpaceSpec:
    nvec = np.asarray(space.nvec, dtype=np.int64)
    start = np.asarray(getattr(space, "start", 0))
    if not drop_start and np.any(start != 0):
        raise ValueError(
            f"{path}: MultiDiscrete start {start.tolist()} cannot be sent: the wire has no start field, "
            "so a peer would see the domain [0, nvec). Shift the space to start=0 (and its values "
            "by -start), or pass drop_multi_discrete_start=True to drop it as upstream rlmesh does"
        )
    if nvec.ndim == 1:
        md = spaces_pb2.MultiDiscreteSpec(flat=spaces_pb2.VectorInt(data=nvec.tolist()))
    elif nvec.ndim == 2:
        md = spaces_pb2.MultiDiscreteSpec(
            shaped=spaces_pb2.MatrixInt(data=[spaces_pb2.VectorInt(data=row) for row in nvec.tolist()])
        )
    else:
        raise TypeError(
            f"{path}: MultiDiscrete with a rank-{nvec.ndim} nvec (shape {nvec.shape}) is not supported; "
            "the wire carries rank-1 (flat) and rank-2 (shaped) nvec only"
        )
    return spaces_pb2.SpaceSpec(shape=nvec.shape, dtype=spaces_pb2.D_TYPE_INT64, multi_discrete=md)


def _text_spec(space: gym.spaces.Text) -> spaces_pb2.SpaceSpec:
    if hasattr(space, "characters"):
        chars = space.characters
    elif hasattr(space, "character_list"):
        chars = "".join(space.character_list)
    else:
        chars = "".join(sorted(space.character_set))
    charset = "" if set(chars) == alphanumeric else chars
    return spaces_pb2.SpaceSpec(
        dtype=spaces_pb2.D_TYPE_UINT8,
        text=spaces_pb2.TextSpec(
            min_length=int(getattr(space, "min_length", 1)), max_length=int(space.max_length), charset=charset
        ),
    )


class UnrestrictedText(gym.spaces.Text):
    """A gymnasium ``Text`` of any characters: what a wire Text with charset ``""`` comes back as.

    ``""`` on the wire is both gymnasium's default alphanumeric charset and "no restriction"
    (minigrid's missions, with spaces in them), so this space takes either reading: it
    contains every ``str`` of an allowed length and samples alphanumerics, as ``Text`` does.
    It equals the alphanumeric ``Text`` of the same lengths (both have the same spec).

    >>> space = UnrestrictedText(32)
    >>> "get to the green goal square" in space, space == gym.spaces.Text(32)
    (True, True)
    """

    def contains(self, x: object) -> bool:
        """Whether ``x`` is a ``str`` of an allowed length (any characters)."""
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"UnrestrictedText({self.min_length}, {self.max_length})"


def gym_space(spec: spaces_pb2.SpaceSpec, *, name: str = "spec") -> gym.Space:
    """The gymnasium space a ``SpaceSpec`` describes (the inverse of ``space_spec``).

    A Text charset of ``""`` becomes :class:`UnrestrictedText` (any characters, sampled from
    gymnasium's default alphanumerics); a MultiDiscrete comes back with start 0.

    Every declared size is checked before numpy sees it (``rlmesh_gym.spaces.limits``).

    Raises:
        SpaceSpecError: a negative dimension, a zero or negative count the kind forbids, an
            element count or byte length past int64, or more elements than the element limit.
        ValueError: the spec has no kind, an unknown dtype, a bfloat16 Box (numpy has no
            bfloat16), or fields that disagree (e.g. elementwise bounds of the wrong length).
    """
    check_space_spec(spec, name=name)
    return _space(spec, name)


def _space(spec: spaces_pb2.SpaceSpec, path: str) -> gym.Space:
    kind = spec.WhichOneof("spec")
    if kind == "box":
        return _box_space(spec, path)
    if kind == "discrete":
        return gym.spaces.Discrete(int(spec.discrete.n), start=int(spec.discrete.start))
    if kind == "multi_binary":
        mb = spec.multi_binary
        if mb.WhichOneof("n") == "dims":
            return gym.spaces.MultiBinary(list(mb.dims.data))
        return gym.spaces.MultiBinary(int(mb.size))
    if kind == "multi_discrete":
        md = spec.multi_discrete
        if md.WhichOneof("nvec") == "shaped":
            rows = [list(row.data) for row in md.shaped.data]
            if len({len(row) for row in rows}) > 1:
                raise ValueError(f"{path}: MultiDiscrete shaped nvec has rows of different lengths {rows}")
            return gym.spaces.MultiDiscrete(np.array(rows, dtype=np.int64).reshape(len(rows), -1))
        return gym.spaces.MultiDiscrete(np.array(md.flat.data, dtype=np.int64))
    if kind == "text":
        text = spec.text
        if not text.charset:
            return UnrestrictedText(int(text.max_length), min_length=int(text.min_length))
        return gym.spaces.Text(int(text.max_length), min_length=int(text.min_length), charset=text.charset)
    if kind == "dict":
        keys, children = list(spec.dict.keys), list(spec.dict.spaces)
        if len(keys) != len(children) or len(set(keys)) != len(keys):
            raise ValueError(
                f"{path}: DictSpec needs unique keys parallel to its spaces, "
                f"got keys {keys} for {len(children)} spaces"
            )
        return gym.spaces.Dict(
            {key: _space(child, f"{path}[{key!r}]") for key, child in zip(keys, children, strict=True)}
        )
    if kind == "tuple":
        return gym.spaces.Tuple([_space(child, f"{path}[{i}]") for i, child in enumerate(spec.tuple.spaces)])
    raise ValueError(f"{path}: SpaceSpec has no kind set; expected one of {SUPPORTED_KINDS}")


def _box_space(spec: spaces_pb2.SpaceSpec, path: str) -> gym.spaces.Box:
    entry = WIRE_DTYPES.get(spec.dtype)
    if entry is None or spec.dtype == spaces_pb2.D_TYPE_BFLOAT16:
        raise ValueError(
            f"{path}: Box dtype {dtype_label(spec.dtype)} has no numpy dtype for a gymnasium Box; "
            f"expected one of {SUPPORTED_DTYPE_NAMES.replace(', bfloat16', '')}"
        )
    wire = entry[1]
    dtype = wire.newbyteorder("=")
    shape = tuple(int(d) for d in spec.shape)
    numel = int(np.prod(shape, dtype=np.int64))
    box = spec.box
    arm = box.WhichOneof("bounds")
    if arm == "unbounded" or arm is None:
        low, high = np.full(shape, -np.inf), np.full(shape, np.inf)
    elif arm == "uniform":
        low, high = np.full(shape, box.uniform.low), np.full(shape, box.uniform.high)
    elif arm == "elementwise":
        low, high = np.array(box.elementwise.low), np.array(box.elementwise.high)
        _check_count(path, "elementwise", low.size, high.size, numel)
        low, high = low.reshape(shape), high.reshape(shape)
    else:
        bounds = box.typed_uniform if arm == "typed_uniform" else box.typed_elementwise
        expected = 1 if arm == "typed_uniform" else numel
        for side in ("low", "high"):
            if len(getattr(bounds, side)) != expected * wire.itemsize:
                raise ValueError(
                    f"{path}: {arm}.{side} holds {len(getattr(bounds, side))} bytes, expected "
                    f"{expected * wire.itemsize} ({expected} x {dtype.name})"
                )
        low = np.frombuffer(bounds.low, dtype=wire)
        high = np.frombuffer(bounds.high, dtype=wire)
        if arm == "typed_uniform":
            low, high = np.full(shape, low[0], dtype=wire), np.full(shape, high[0], dtype=wire)
        else:
            low, high = low.reshape(shape), high.reshape(shape)
    if dtype.kind in _INTEGRAL_KINDS and arm in (None, "unbounded", "uniform", "elementwise"):
        # Gymnasium integer Boxes hold their bounds in the dtype; clip infinities to its range.
        info = np.iinfo(dtype) if dtype.kind != "b" else None
        if info is not None:
            low = np.clip(low, info.min, info.max)
            high = np.clip(high, info.min, info.max)
    return gym.spaces.Box(
        low=np.asarray(low).astype(dtype), high=np.asarray(high).astype(dtype), shape=shape, dtype=dtype
    )


def _check_count(path: str, arm: str, n_low: int, n_high: int, numel: int) -> None:
    if n_low != numel or n_high != numel:
        raise ValueError(
            f"{path}: {arm} bounds hold {n_low} low and {n_high} high values, expected numel(shape) = {numel}"
        )
