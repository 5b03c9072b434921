"""``CodecError`` and the checked conversions of values to wire dtypes (used by the codec and its kinds)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["CodecError", "as_array", "convert"]


class CodecError(ValueError):
    """A value or payload does not fit its space; the message names the path, expected and got."""


def as_array(values: Any, shape: tuple[int, ...], name: str) -> np.ndarray:
    """``values`` as an ndarray of exactly ``shape``, or a CodecError."""
    try:
        array = np.asarray(values)
    except Exception as exc:
        raise CodecError(
            f"{name}: expected an array-like of shape {shape}, got {type(values).__name__} ({exc})"
        ) from exc
    if array.shape != shape:
        raise CodecError(f"{name}: expected a batch of shape {shape}, got shape {array.shape}")
    return array


def convert(array: np.ndarray, dtype: np.dtype, name: str) -> np.ndarray:
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
