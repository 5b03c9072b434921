"""RandomPolicy: reproducible per seed and route, and always inside the action space."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from _policy_requests import close_route, observe, predicted_actions, spec

from rlmesh_gym.policies import RandomPolicy
from rlmesh_gym.spaces import SpaceCodec

OBS = gym.spaces.Discrete(2)
ROWS = 64

ACTION_SPACES = {
    "box-float-bounded": gym.spaces.Box(-2.0, 3.0, (2, 3), np.float32),
    "box-float-elementwise": gym.spaces.Box(
        np.array([-1.0, 0.0, 5.0]), np.array([0.0, 0.5, 6.0]), dtype=np.float64
    ),
    "box-float16": gym.spaces.Box(-4.0, 4.0, (2,), np.float16),
    "box-half-bounded": gym.spaces.Box(
        np.array([0.0, -np.inf, -np.inf], dtype=np.float32), np.array([np.inf, 1.0, np.inf], dtype=np.float32)
    ),
    "box-scalar": gym.spaces.Box(0.0, 1.0, (), np.float32),
    "box-int": gym.spaces.Box(-3, 3, (4,), np.int64),
    "box-uint8": gym.spaces.Box(0, 255, (2, 2), np.uint8),
    "box-int8-elementwise": gym.spaces.Box(
        np.array([-128, 0], dtype=np.int8), np.array([-127, 127], dtype=np.int8)
    ),
    "box-bool": gym.spaces.Box(0, 1, (3,), np.bool_),
    "discrete-start": gym.spaces.Discrete(4, start=-2),
    "multi-binary": gym.spaces.MultiBinary([2, 3]),
    "multi-discrete": gym.spaces.MultiDiscrete([[2, 3], [4, 1]]),
    "text-charset": gym.spaces.Text(6, min_length=2, charset="xyz"),
    "text-default": gym.spaces.Text(5),
    "dict": gym.spaces.Dict(
        {"go": gym.spaces.Discrete(3), "aim": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)}
    ),
    "tuple": gym.spaces.Tuple((gym.spaces.MultiBinary(2), gym.spaces.Discrete(2, start=1))),
}


def draw(
    seed: int | None, space: gym.Space, route_id: str = "route", policy: RandomPolicy | None = None
) -> object:
    policy = policy or RandomPolicy(seed, (spec(OBS), spec(space)))
    return predicted_actions(
        policy, observe(OBS, np.zeros(ROWS, dtype=np.int64), ROWS), ROWS, route_id=route_id
    )


def lanes(batch: object, space: gym.Space) -> list[object]:
    """The ``ROWS`` per-lane values of a decoded batch, as gymnasium values."""
    if isinstance(space, gym.spaces.Dict):
        return [{key: lanes(batch[key], sub)[i] for key, sub in space.spaces.items()} for i in range(ROWS)]
    if isinstance(space, gym.spaces.Tuple):
        columns = [lanes(part, sub) for part, sub in zip(batch, space.spaces, strict=True)]
        return [tuple(column[i] for column in columns) for i in range(ROWS)]
    if isinstance(space, gym.spaces.Text):
        return list(batch)
    if isinstance(space, gym.spaces.Discrete):
        return [np.int64(value) for value in batch]
    if isinstance(space, gym.spaces.MultiBinary):
        return [np.asarray(value, dtype=np.int8) for value in batch]
    return [np.asarray(value) for value in batch]


def flat(batch: object) -> np.ndarray:
    if isinstance(batch, dict):
        return np.concatenate([flat(batch[key]).astype(np.float64) for key in sorted(batch)])
    if isinstance(batch, tuple) and batch and isinstance(batch[0], str):
        return np.array([ord(char) for text in batch for char in text], dtype=np.float64)
    if isinstance(batch, tuple):
        return np.concatenate([flat(part).astype(np.float64) for part in batch])
    return np.asarray(batch, dtype=np.float64).reshape(-1)


@pytest.mark.parametrize("name", list(ACTION_SPACES))
def test_samples_are_inside_the_space(name: str) -> None:
    space = ACTION_SPACES[name]
    for value in lanes(draw(5, space), space):
        assert space.contains(value), f"{name}: {value!r} not in {space}"


@pytest.mark.parametrize("name", list(ACTION_SPACES))
def test_same_seed_same_actions_different_seed_different_actions(name: str) -> None:
    space = ACTION_SPACES[name]
    first = flat(draw(11, space))
    assert np.array_equal(first, flat(draw(11, space)))
    assert not np.array_equal(first, flat(draw(12, space)))
    assert not np.array_equal(first, flat(draw(11, space, route_id="other")))


def test_unseeded_policies_differ() -> None:
    space = ACTION_SPACES["box-float-bounded"]
    assert not np.array_equal(flat(draw(None, space)), flat(draw(None, space)))


def test_samples_cover_the_domain_and_follow_gymnasium_rules() -> None:
    assert set(draw(0, gym.spaces.Discrete(4, start=-2)).tolist()) == {-2, -1, 0, 1}
    ints = draw(0, gym.spaces.Box(-3, 3, (4,), np.int64))
    assert ints.dtype == np.int64 and set(ints.reshape(-1).tolist()) == {-3, -2, -1, 0, 1, 2, 3}
    half = draw(0, ACTION_SPACES["box-half-bounded"])
    assert half.dtype == np.float32
    assert np.all(half[:, 0] >= 0.0) and np.all(half[:, 1] <= 1.0)
    assert np.any(half[:, 2] < 0.0) and np.any(half[:, 2] > 0.0)  # unbounded: a normal around 0
    texts = draw(0, gym.spaces.Text(5))
    assert all(1 <= len(text) <= 5 and text.isalnum() for text in texts)


def test_the_stream_continues_within_a_route_and_restarts_after_close_route() -> None:
    space = gym.spaces.Discrete(1000)
    policy = RandomPolicy(3, (spec(OBS), spec(space)))
    first = draw(3, space, policy=policy).tolist()
    assert draw(3, space, policy=policy).tolist() != first
    close_route(policy)
    assert draw(3, space, policy=policy).tolist() == first


def test_actions_encode_to_exactly_the_sampled_values() -> None:
    space = ACTION_SPACES["dict"]
    batch = draw(21, space)
    data = SpaceCodec(spec(space)).encode_batch(batch, ROWS)
    again = SpaceCodec(spec(space)).decode_batch(data, ROWS)
    assert np.array_equal(again["go"], batch["go"]) and np.array_equal(again["aim"], batch["aim"])


def test_impossible_spaces_are_refused_when_bound() -> None:
    bad_text = spec(gym.spaces.Text(5))
    bad_text.text.min_length = 9
    with pytest.raises(ValueError, match=r"action_space\.text\.max_length = 5: must be >= min_length = 9"):
        RandomPolicy(0, (spec(OBS), bad_text))


def test_first_argument_is_the_seed() -> None:
    with pytest.raises(TypeError, match=r"RandomPolicy: the first argument is the seed; pass the contract"):
        RandomPolicy((spec(OBS), spec(OBS)))
