"""SpaceBatch and SpaceCodec.normalize_batch: each form of a batch is derived from the other
only when read (the property test that both forms agree is in test_properties.py)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlmesh_gym.spaces import CodecError, SpaceCodec, space_spec
from rlmesh_gym.spaces.batch import SpaceBatch


def test_normalize_keeps_an_exact_array_and_converts_others_as_encode_does():
    codec = SpaceCodec(space_spec(gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)), name="obs")
    exact = np.zeros((3, 2), dtype=np.float32)
    assert codec.normalize_batch(exact, 3) is exact
    converted = codec.normalize_batch(np.ones((3, 2), dtype=np.float64), 3)
    assert converted.dtype == np.float32 and converted.tolist() == [[1.0, 1.0]] * 3
    with pytest.raises(CodecError, match=r"expected a batch of shape \(3, 2\)"):
        codec.normalize_batch(np.zeros((2, 2), dtype=np.float32), 3)
    binary = SpaceCodec(space_spec(gym.spaces.MultiBinary(2)), name="action")
    with pytest.raises(CodecError, match="MultiBinary values 0 or 1"):
        binary.normalize_batch(np.array([[0, 2]]), 1)


def test_each_form_is_made_only_when_read(monkeypatch):
    codec = SpaceCodec(space_spec(gym.spaces.Discrete(4)), name="action")
    calls: list[str] = []
    encode, decode = SpaceCodec.encode_batch, SpaceCodec.decode_batch
    monkeypatch.setattr(SpaceCodec, "encode_batch", lambda *a: calls.append("encode") or encode(*a))
    monkeypatch.setattr(SpaceCodec, "decode_batch", lambda *a: calls.append("decode") or decode(*a))
    batch = SpaceBatch.from_values(codec, np.array([1, 3]), 2)
    assert batch.has_values and batch.values.tolist() == [1, 3] and batch.nbytes == 16
    assert calls == []
    assert batch.data == batch.data and calls == ["encode"]
    from_bytes = SpaceBatch.from_bytes(codec, batch.data, 2)
    assert not from_bytes.has_values and from_bytes.data is batch.data
    assert from_bytes.values.tolist() == [1, 3] and from_bytes.values is from_bytes.values
    assert calls == ["encode", "decode"]


def test_bad_bytes_fail_when_the_values_are_read():
    codec = SpaceCodec(space_spec(gym.spaces.Discrete(4)), name="action")
    batch = SpaceBatch.from_bytes(codec, b"\x01\x02", 2)
    with pytest.raises(CodecError, match="action"):
        _ = batch.values


def test_codecs_of_the_same_space_are_recognised():
    codec = SpaceCodec(space_spec(gym.spaces.Discrete(4)), name="action")
    twin = SpaceCodec(space_spec(gym.spaces.Discrete(4)), name="other")
    other = SpaceCodec(space_spec(gym.spaces.Discrete(5)), name="action")
    assert codec.same_space(codec) and codec.same_space(twin) and codec.same_space(twin)
    assert not codec.same_space(other) and not codec.same_space(None)
