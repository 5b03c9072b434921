"""Property tests: random nested spaces and values round-trip exactly; mangled bytes only ever
raise CodecError."""

from __future__ import annotations

import gymnasium as gym
from _space_strategies import spaces
from _space_values import assert_values_equal
from gymnasium.vector.utils import batch_space
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlmesh_gym.spaces import CodecError, SpaceCodec, gym_space, space_spec
from rlmesh_gym.spaces.batch import SpaceBatch

PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _sample(space: gym.Space, seed: int):
    space.seed(seed)
    return space.sample()


@PROPERTY_SETTINGS
@given(space=spaces, seed=st.integers(0, 2**31), n=st.integers(1, 4))
def test_batches_round_trip_exactly(space, seed, n):
    codec = SpaceCodec(space_spec(space), name="obs")
    values = _sample(batch_space(space, n), seed)
    data = codec.encode_batch(values, n)
    decoded = codec.decode_batch(data, n)
    assert_values_equal(decoded, values)
    assert codec.encode_batch(decoded, n) == data  # exact: the decoded batch re-encodes to the same bytes
    if codec.lane_nbytes or codec.kind in ("text", "dict", "tuple"):
        assert_values_equal(codec.decode_batch(data, None), values)


@PROPERTY_SETTINGS
@given(space=spaces, seed=st.integers(0, 2**31), n=st.integers(1, 4))
def test_normalized_values_equal_the_decoded_bytes(space, seed, n):
    codec = SpaceCodec(space_spec(space), name="obs")
    values = _sample(batch_space(space, n), seed)
    data = codec.encode_batch(values, n)
    normalized = codec.normalize_batch(values, n)
    assert_values_equal(normalized, codec.decode_batch(data, n))
    assert codec.encode_batch(normalized, n) == data
    from_values = SpaceBatch.from_values(codec, values, n)
    assert from_values.data == data
    assert from_values.nbytes == len(data)
    from_bytes = SpaceBatch.from_bytes(codec, data, n)
    assert_values_equal(from_bytes.values, normalized)


@PROPERTY_SETTINGS
@given(space=spaces, seed=st.integers(0, 2**31))
def test_single_values_round_trip_exactly(space, seed):
    codec = SpaceCodec(space_spec(space), name="obs")
    value = _sample(space, seed)
    data = codec.encode(value)
    decoded = codec.decode(data)
    assert_values_equal(decoded, value)
    assert codec.encode(decoded) == data
    assert_values_equal(codec.decode_batch(data, 1), codec.decode_batch(codec.encode(value), 1))


@PROPERTY_SETTINGS
@given(space=spaces)
def test_space_spec_round_trips_through_gym_space(space):
    spec = space_spec(space)
    assert space_spec(gym_space(spec)) == spec


@st.composite
def mangled_payloads(draw: st.DrawFn) -> tuple[SpaceCodec, bytes, int | None]:
    space = draw(spaces)
    codec = SpaceCodec(space_spec(space), name="obs")
    n = draw(st.integers(1, 3))
    data = bytearray(codec.encode_batch(_sample(batch_space(space, n), draw(st.integers(0, 2**31))), n))
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "replace"]))
        position = draw(st.integers(0, max(len(data) - 1, 0)))
        if action == "flip" and data:
            data[position] ^= 1 << draw(st.integers(0, 7))
        elif action == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=4))
        elif action == "delete" and data:
            del data[position]
        elif action == "truncate":
            del data[position:]
        elif action == "replace":
            data = bytearray(draw(st.binary(max_size=64)))
    return codec, bytes(data), draw(st.one_of(st.none(), st.integers(0, 4)))


@PROPERTY_SETTINGS
@given(case=mangled_payloads())
def test_mangled_bytes_raise_nothing_but_codec_error(case):
    codec, data, n = case
    try:
        codec.decode_batch(data, n)
    except CodecError:
        pass
