"""Hypothesis strategies for gymnasium spaces the rlmesh wire supports, nested to any depth."""

from __future__ import annotations

import numpy as np
from gymnasium.spaces import Box, Dict, Discrete, MultiBinary, MultiDiscrete, Text, Tuple
from hypothesis import strategies as st

BOX_DTYPES = [
    np.float16,
    np.float32,
    np.float64,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.bool_,
]

shapes = st.lists(st.integers(0, 3), min_size=0, max_size=3).map(tuple)


@st.composite
def boxes(draw: st.DrawFn) -> Box:
    """Boxes of every wire dtype with each bound form: uniform, unbounded, half-open, elementwise."""
    dtype = np.dtype(draw(st.sampled_from(BOX_DTYPES)))
    shape = draw(shapes)
    size = int(np.prod(shape))
    if dtype.kind == "b":
        return Box(0, 1, shape, dtype)
    form = draw(
        st.sampled_from(["uniform", "elementwise"] + (["unbounded", "half"] if dtype.kind == "f" else []))
    )
    if form == "unbounded":
        return Box(-np.inf, np.inf, shape, dtype)
    if form == "half":
        return Box(-np.inf, draw(st.integers(-5, 5)), shape, dtype)
    floor = -100 if dtype.kind != "u" else 0
    if form == "uniform":
        low = draw(st.integers(floor, 0))
        return Box(low, low + draw(st.integers(1, 100)), shape, dtype)
    lows = np.array(draw(st.lists(st.integers(floor, 0), min_size=size, max_size=size)), dtype=dtype)
    widths = np.array(draw(st.lists(st.integers(1, 27), min_size=size, max_size=size)), dtype=dtype)
    return Box(lows.reshape(shape), (lows + widths).reshape(shape), shape, dtype)


leaves = st.one_of(
    boxes(),
    st.builds(Discrete, st.integers(1, 50), start=st.integers(-10, 10)),
    st.integers(1, 4).map(MultiBinary),
    st.lists(st.integers(1, 3), min_size=1, max_size=2).map(MultiBinary),
    st.lists(st.integers(2, 6), min_size=1, max_size=3).map(MultiDiscrete),
    st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(2, 4)).map(
        lambda rc: MultiDiscrete(np.full(rc[:2], rc[2]))
    ),
    st.builds(
        lambda lo, extra, charset: (
            Text(lo + extra, min_length=lo, charset=charset) if charset else Text(lo + extra, min_length=lo)
        ),
        st.integers(1, 3),
        st.integers(0, 4),
        st.sampled_from(["", "ab ", "xyzé→", "0123456789"]),
    ),
)

keys = st.text(alphabet="abcXYZé_", min_size=1, max_size=4)

spaces = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.dictionaries(keys, children, min_size=1, max_size=3).map(Dict),
        st.lists(children, min_size=1, max_size=3).map(lambda items: Tuple(tuple(items))),
    ),
    max_leaves=6,
)
