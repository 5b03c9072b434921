"""Numeric arrays in MetaValues: the vectorised encoding writes exactly the element-by-element bytes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rlmesh_gym.spaces import MetaConversionError, from_meta_map, to_meta_map
from rlmesh_gym.spaces.meta import array_meta_value_bytes, to_meta_value

DTYPES = st.sampled_from(
    ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "float16", "float32", "float64"]
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    array=DTYPES.flatmap(
        lambda dtype: hnp.arrays(dtype, hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=7))
    )
)
def test_vectorised_bytes_equal_the_element_by_element_bytes(array):
    expected = to_meta_value(array.tolist()).SerializeToString()
    assert array_meta_value_bytes(array) == expected
    assert to_meta_value(array).SerializeToString() == expected


@pytest.mark.parametrize(
    "array",
    [
        np.array([0, 127, 128, 16383, 16384, 2**63 - 1], dtype=np.uint64),
        np.array([-1, -(2**63), 2**63 - 1, 0], dtype=np.int64),
        np.array([[np.nan, np.inf], [-np.inf, -0.0]]),
        np.arange(24, dtype=np.int32).reshape(2, 3, 4)[:, ::2],  # not contiguous
        np.arange(200, dtype=np.uint8).reshape(10, 20).T,  # Fortran order
    ],
)
def test_edge_values_and_layouts(array):
    assert array_meta_value_bytes(array) == to_meta_value(array.tolist()).SerializeToString()


def test_arrays_the_fast_path_leaves_to_the_generic_one():
    for array in (np.zeros((0, 3)), np.array(5), np.array(["a", "b"]), np.array([1 + 2j])):
        assert array_meta_value_bytes(array) is None
    with pytest.raises(
        MetaConversionError, match=r"infos\['big'\]\[0\]: int 18446744073709551615 is outside"
    ):
        to_meta_map({"big": np.full(100, 2**64 - 1, dtype=np.uint64)}, name="infos")


def test_a_frame_round_trips_as_nested_lists():
    frame = np.random.default_rng(0).integers(0, 256, size=(21, 16, 3), dtype=np.uint8)
    assert from_meta_map(to_meta_map({"final_obs": frame}))["final_obs"] == frame.tolist()


@pytest.mark.skipif(np.dtype(np.longdouble).itemsize <= 8, reason="long double is float64 on this platform")
def test_wider_than_64_bit_floats_keep_the_element_by_element_path():
    # numpy keeps long doubles as such in tolist(), so the generic path refuses them at any size.
    for size in (3, 100):
        array = np.linspace(0, 1, size, dtype=np.longdouble)
        assert array_meta_value_bytes(array) is None
        with pytest.raises(MetaConversionError, match=r"\[0\]: value of type longdouble is not supported"):
            to_meta_value(array)
