"""Value comparison for the spaces tests: batches and single values, nested to any depth."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def assert_values_equal(got: Any, expected: Any, path: str = "value", *, strict_dtype: bool = False) -> None:
    """``got`` equals ``expected``: dicts by key, tuples element by element, anything else
    (arrays, lists, scalars) as a numpy array of equal shape and values.

    With ``strict_dtype`` the array dtypes must match as well.
    """
    if isinstance(expected, Mapping):
        assert isinstance(got, Mapping), f"{path}: expected a dict, got {type(got).__name__}"
        assert set(got) == set(expected), f"{path}: keys {sorted(got)} != {sorted(expected)}"
        for key in expected:
            assert_values_equal(got[key], expected[key], f"{path}[{key!r}]", strict_dtype=strict_dtype)
    elif isinstance(expected, str):
        assert got == expected, f"{path}: {got!r} != {expected!r}"
    elif isinstance(expected, tuple):
        assert isinstance(got, (tuple, list)), f"{path}: expected a sequence, got {type(got).__name__}"
        assert len(got) == len(expected), f"{path}: length {len(got)} != {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected, strict=True)):
            assert_values_equal(g, e, f"{path}[{i}]", strict_dtype=strict_dtype)
    else:
        got_array, expected_array = np.asarray(got), np.asarray(expected)
        assert got_array.shape == expected_array.shape, (
            f"{path}: shape {got_array.shape} != {expected_array.shape}"
        )
        assert np.array_equal(got_array, expected_array), f"{path}: {got_array!r} != {expected_array!r}"
        if strict_dtype:
            assert got_array.dtype == expected_array.dtype, (
                f"{path}: dtype {got_array.dtype} != {expected_array.dtype}"
            )
