"""Checking a batch of actions against the action space before it is encoded.

A compiled :class:`ActionPlan` mirrors the action ``SpaceSpec``. ``plan.check(values, rows)``
takes actions in gymnasium's batch layout (an array of ``rows`` actions for raw kinds, a dict
of batches for Dict, a tuple of batches for Tuple, a sequence of ``rows`` str for Text) and
returns them in the exact wire dtypes, ready for the codec. Anything that would not encode to
the intended actions raises :class:`ActionMismatch`, which names the path, what was given and
the expected layout.

Casting rules, shared by every policy:

* integer kinds (Discrete, MultiDiscrete, MultiBinary, integer and bool Box) accept integer
  and bool arrays, and float arrays only when every element is a whole number;
* Discrete values must lie in ``[start, start + n)``, MultiDiscrete in ``[0, nvec)``,
  MultiBinary in ``{0, 1}``; integer Box values must fit the Box dtype;
* float Boxes accept any real numbers except NaN and cast them to the Box dtype;
* Box bounds are enforced only by clipping, and only when asked (``clip=True``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from rlmesh_gym.proto import spaces_pb2
from rlmesh_gym.spaces.codec import SpaceCodec
from rlmesh_gym.spaces.kinds import BOX, MULTI_DISCRETE, describe_space

__all__ = ["ActionMismatch", "ActionPlan", "LeafPlan", "describe_value"]


class ActionMismatch(ValueError):
    """An action batch does not fit the action space; ``str()`` is the full explanation."""

    def __init__(self, path: str, value: object, expected: str, detail: str = "") -> None:
        self.path = path
        self.value = value
        self.expected = expected
        self.detail = detail
        super().__init__(self.explain())

    def explain(self, who: str = "policy", describe: Callable[[object], str] | None = None) -> str:
        """``<who> returned <value> [for <path>] [(<detail>)]; expected <layout>``."""
        text = (describe or describe_value)(self.value)
        where = "" if self.path == "action" else f" for {self.path}"
        detail = f" ({self.detail})" if self.detail else ""
        return f"{who} returned {text}{where}{detail}; expected {self.expected}"


def describe_value(value: object) -> str:
    """A short description of an action value for error messages."""
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} {value.dtype}"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} of {len(value)} items"
    if isinstance(value, Mapping):
        return f"a {type(value).__name__} with keys {sorted(map(str, value))}"
    if value is None:
        return "None"
    return f"{type(value).__name__} {value!r:.60}"


def check_dict_keys(path: str, value: Mapping, keys: Sequence[str | int], expected: str) -> None:
    """Raise ``ActionMismatch`` unless ``value`` has exactly the Dict action space's ``keys``."""
    missing = [key for key in keys if key not in value]
    extra = sorted(str(key) for key in value if key not in keys)
    if missing or extra:
        detail = f"missing keys {missing}" if missing else f"unexpected keys {extra}"
        raise ActionMismatch(path, value, expected, detail)


def _first_bad(values: np.ndarray, bad: np.ndarray) -> object:
    return values[bad].reshape(-1)[0].item()


class LeafPlan:
    """One raw action leaf (Box, Discrete, MultiBinary or MultiDiscrete) of a known lane shape."""

    __slots__ = (
        "bfloat16",
        "description",
        "high",
        "hi_value",
        "integral",
        "kind",
        "lo_value",
        "low",
        "native",
        "nvec",
        "shape",
        "spec",
    )

    def __init__(self, codec: SpaceCodec) -> None:
        spec = codec.spec
        self.spec = spec
        self.kind = codec.kind
        self.shape = codec.shape
        self.description = describe_space(spec)
        if codec.numpy_dtype is None:
            raise ValueError(f"{self.description} is not a raw action kind")
        self.bfloat16 = spec.dtype == spaces_pb2.D_TYPE_BFLOAT16
        # bfloat16 actions stay float32 in numpy; the codec keeps their top 16 bits on the wire.
        self.native: np.dtype = codec.numpy_dtype
        self.integral = self.kind != "box" or (self.native.kind in "biu" and not self.bfloat16)
        self.low = self.high = self.nvec = None
        self.lo_value = self.hi_value = 0
        if self.kind == "discrete":
            self.lo_value = int(spec.discrete.start)
            self.hi_value = int(spec.discrete.start + spec.discrete.n - 1)
        elif self.kind == "multi_discrete":
            self.nvec = MULTI_DISCRETE.nvec(spec).reshape(self.shape)
        elif self.kind == "box":
            self.low, self.high = BOX.bounds(spec)
            if self.integral:
                if self.native.kind == "b":
                    self.lo_value, self.hi_value = 0, 1
                else:
                    info = np.iinfo(self.native)
                    self.lo_value, self.hi_value = int(info.min), int(info.max)

    def batch_shape(self, rows: int) -> tuple[int, ...]:
        """The shape of ``rows`` actions."""
        return (rows, *self.shape)

    def expected(self, rows: int) -> str:
        """The accepted layout of ``rows`` actions, e.g. ``shape (1,) integer in [0, 2)``."""
        shape = self.batch_shape(rows)
        if self.kind == "discrete":
            layout = f"shape {shape} integer in [{self.lo_value}, {self.hi_value + 1})"
        elif self.kind == "multi_discrete":
            layout = f"shape {shape} integer with 0 <= action < nvec"
        elif self.kind == "multi_binary":
            layout = f"shape {shape} of 0/1 values"
        elif self.integral:
            layout = f"shape {shape} {self.native.name}"
        else:
            name = "bfloat16" if self.bfloat16 else self.native.name
            layout = f"shape {shape} {name} (real numbers are cast)"
        return f"actions for {self.description}: {layout}"

    def check(
        self,
        values: np.ndarray,
        rows: int,
        path: str,
        *,
        clip: bool = False,
        original: object = None,
        hint: Callable[[int], str] | None = None,
    ) -> np.ndarray:
        """``values`` as ``rows`` actions in the wire dtype, or :class:`ActionMismatch`.

        ``original`` is what the policy returned (named in errors); ``hint(rows)``, called
        only on failure, extends the expected layout (e.g. the logits a torch policy may return).
        """
        shown = values if original is None else original

        def fail(detail: str = "") -> ActionMismatch:
            extra = "" if hint is None else hint(rows)
            return ActionMismatch(path, shown, self.expected(rows) + extra, detail)

        if values.dtype.kind not in "biuf":
            raise fail(f"dtype {values.dtype} is not numeric")
        expected_shape = self.batch_shape(rows)
        if values.shape != expected_shape:
            if self.kind == "discrete" and values.shape == (rows, 1):
                values = values.reshape(rows)
            else:
                raise fail()
        if self.integral:
            return self._check_integral(values, clip, fail)
        if values.dtype.kind == "f" and np.isnan(values).any():
            raise fail(f"NaN at {np.argwhere(np.isnan(values))[0].tolist()}")
        if clip:
            values = np.clip(values, self.low, self.high)
        elif values.dtype.kind == "f" and values.dtype.itemsize > self.native.itemsize and values.size:
            # A narrowing cast would turn large finite values into inf (and warn): refuse instead.
            limit = float(np.finfo(self.native).max)
            finite = np.isfinite(values)
            too_big = finite & (np.abs(np.where(finite, values, 0)) > limit)
            if too_big.any():
                name = "bfloat16" if self.bfloat16 else self.native.name
                raise fail(f"{_first_bad(values, too_big)!r} overflows {name}")
        return values.astype(self.native, copy=False)

    def _check_integral(
        self, values: np.ndarray, clip: bool, fail: Callable[[str], ActionMismatch]
    ) -> np.ndarray:
        if values.dtype.kind == "f":
            finite = np.isfinite(values)
            whole = finite & (values == np.floor(np.where(finite, values, 0)))
            if not whole.all():
                raise fail(f"{_first_bad(values, ~whole)!r} is not a whole number")
        if values.size == 0:
            return values.astype(self.native)
        if self.kind == "multi_discrete":
            bad = (values < 0) | (values >= self.nvec)
            if bad.any():
                at = np.argwhere(bad)[0].tolist()
                raise fail(f"value {_first_bad(values, bad)!r} outside [0, nvec) at {at}")
        elif self.kind == "multi_binary" or self.native.kind == "b":
            bad = (values != 0) & (values != 1)
            if bad.any():
                raise fail(f"value {_first_bad(values, bad)!r} is neither 0 nor 1")
        elif self.kind == "box" and clip:
            values = np.clip(values, self.low, self.high)
        else:
            smallest, largest = values.min().item(), values.max().item()
            if smallest < self.lo_value or largest > self.hi_value:
                offender = smallest if smallest < self.lo_value else largest
                where = "the Discrete domain" if self.kind == "discrete" else f"the {self.native.name} range"
                raise fail(f"value {offender!r} outside {where} [{self.lo_value}, {self.hi_value}]")
        return values.astype(self.native, copy=False)


class ActionPlan:
    """A compiled action space: checks whole action batches in gymnasium's batch layout."""

    __slots__ = ("children", "kind", "leaf", "spec")

    def __init__(self, codec: SpaceCodec) -> None:
        self.spec = codec.spec
        self.kind = codec.kind
        self.leaf: LeafPlan | None = None
        self.children: list[tuple[str | int, ActionPlan]] = []
        if self.kind == "dict":
            pairs = zip(codec.keys, codec.children, strict=True)
            self.children = [(key, ActionPlan(child)) for key, child in pairs]
        elif self.kind == "tuple":
            self.children = [(i, ActionPlan(child)) for i, child in enumerate(codec.children)]
        elif self.kind != "text":
            self.leaf = LeafPlan(codec)

    def expected(self, rows: int) -> str:
        """The accepted layout of ``rows`` actions of this space."""
        if self.leaf is not None:
            return self.leaf.expected(rows)
        if self.kind == "text":
            return f"actions for {describe_space(self.spec)}: a sequence of {rows} str"
        if self.kind == "dict":
            keys = [key for key, _ in self.children]
            return f"actions for {describe_space(self.spec)}: a dict with keys {keys}"
        return f"actions for {describe_space(self.spec)}: a tuple of {len(self.children)} batches"

    def check(self, values: object, rows: int, path: str = "action", *, clip: bool = False) -> object:
        """``values`` (gymnasium batch layout) in wire dtypes, or :class:`ActionMismatch`."""
        if self.leaf is not None:
            try:
                array = np.asarray(values)
            except (TypeError, ValueError) as error:
                raise ActionMismatch(path, values, self.expected(rows), f"not array-like: {error}") from None
            return self.leaf.check(array, rows, path, clip=clip, original=values)
        if self.kind == "text":
            return self._check_text(values, rows, path)
        if self.kind == "dict":
            if not isinstance(values, Mapping):
                raise ActionMismatch(path, values, self.expected(rows))
            check_dict_keys(path, values, [key for key, _ in self.children], self.expected(rows))
            return {
                key: child.check(values[key], rows, f"{path}[{key!r}]", clip=clip)
                for key, child in self.children
            }
        if not isinstance(values, (tuple, list)) or len(values) != len(self.children):
            raise ActionMismatch(path, values, self.expected(rows))
        return tuple(
            child.check(item, rows, f"{path}[{i}]", clip=clip)
            for (i, child), item in zip(self.children, values, strict=True)
        )

    def _check_text(self, values: object, rows: int, path: str) -> tuple[str, ...]:
        if isinstance(values, np.ndarray):
            values = values.tolist()
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) != rows:
            raise ActionMismatch(path, values, self.expected(rows))
        spec = self.spec.text
        charset = frozenset(spec.charset)
        for value in values:
            if not isinstance(value, str):
                raise ActionMismatch(path, values, self.expected(rows), f"item {value!r} is not a str")
            if not spec.min_length <= len(value) <= spec.max_length:
                detail = (
                    f"{value!r} has {len(value)} characters, outside [{spec.min_length}, {spec.max_length}]"
                )
                raise ActionMismatch(path, values, self.expected(rows), detail)
            if charset and not charset.issuperset(value):
                bad = next(char for char in value if char not in charset)
                raise ActionMismatch(
                    path, values, self.expected(rows), f"{bad!r} in {value!r} is not in the charset"
                )
        return tuple(values)
