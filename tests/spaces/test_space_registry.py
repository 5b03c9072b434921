"""register_space: user Space subclasses mapped to supported spaces, and converters that go wrong."""

from __future__ import annotations

from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import pytest

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.evaluation import evaluate
from rlmesh_gym.proto import spaces_pb2
from rlmesh_gym.spaces import SpaceCodec, gym_space, register_space, space_spec, unregister_space


class Word(gym.Space):
    """A user space of short strings (like minigrid's MissionSpace)."""

    def __init__(self) -> None:
        super().__init__(dtype=str)

    def sample(self, mask=None, probability=None) -> str:  # noqa: ARG002
        return "hello"

    def contains(self, x: object) -> bool:
        return isinstance(x, str) and len(x) <= 8


class Grid(gym.Space):
    """A user space whose values are 3x3 uint8 arrays."""

    def __init__(self) -> None:
        super().__init__(shape=(3, 3), dtype=np.uint8)

    def sample(self, mask=None, probability=None) -> np.ndarray:  # noqa: ARG002
        return np.zeros((3, 3), np.uint8)

    def contains(self, x: object) -> bool:
        return isinstance(x, np.ndarray) and x.shape == (3, 3)


@pytest.fixture
def registered() -> Iterator[None]:
    yield
    for space_type in (Word, Grid):
        unregister_space(space_type)


def test_unregistered_user_spaces_are_refused_with_the_way_to_register(registered) -> None:
    with pytest.raises(TypeError, match="unsupported space .* of type Word.*register_space"):
        space_spec(Word())


def test_a_converter_may_return_a_standard_space_or_a_spec(registered) -> None:
    register_space(Word, lambda space: gym.spaces.Text(8))
    assert space_spec(Word()) == space_spec(gym.spaces.Text(8))
    grid = spaces_pb2.SpaceSpec(
        shape=[3, 3],
        dtype=spaces_pb2.D_TYPE_UINT8,
        box=spaces_pb2.BoxSpec(uniform=spaces_pb2.UniformBounds(high=9)),
    )
    register_space(Grid, lambda space: grid)
    nested = space_spec(gym.spaces.Dict({"word": Word(), "grid": Grid()}))
    assert list(nested.dict.keys) == ["grid", "word"] and nested.dict.spaces[0] == grid
    assert gym_space(nested)["grid"] == gym.spaces.Box(0, 9, (3, 3), np.uint8)  # and back


def test_subclasses_use_their_ancestors_entry_unless_they_have_their_own(registered) -> None:
    class ShortWord(Word):
        pass

    register_space(Word, lambda space: gym.spaces.Text(8))
    assert space_spec(ShortWord()).text.max_length == 8
    register_space(ShortWord, lambda space: gym.spaces.Text(3))
    assert space_spec(ShortWord()).text.max_length == 3
    unregister_space(ShortWord)


def test_an_env_with_a_registered_space_runs_through_the_runtime(registered) -> None:
    class WordEnv(gym.Env):
        observation_space = gym.spaces.Dict({"word": Word(), "x": gym.spaces.Box(-1, 1, (2,), np.float32)})
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return {"word": "hi", "x": np.zeros(2, np.float32)}, {}

        def step(self, action):
            self.t += 1
            return {"word": "hi" * self.t, "x": np.zeros(2, np.float32)}, 1.0, self.t >= 3, False, {}

    register_space(Word, lambda space: gym.spaces.Text(8))
    result = evaluate(WordEnv(), "random", episodes=2, seed=0, progress=False)
    assert result.returns == [3.0, 3.0]


@pytest.mark.parametrize(
    ("converter", "error", "message"),
    [
        (
            lambda space: spaces_pb2.SpaceSpec(shape=[2], dtype=spaces_pb2.D_TYPE_UINT8),
            ValueError,
            "returned a SpaceSpec the codec cannot encode",
        ),
        (
            lambda space: spaces_pb2.SpaceSpec(
                shape=[-1], dtype=spaces_pb2.D_TYPE_UINT8, box=spaces_pb2.BoxSpec(unbounded=True)
            ),
            ValueError,
            "the codec cannot encode.*a dimension must be >= 0",
        ),
        (
            lambda space: gym.spaces.MultiDiscrete([3, 3], start=[1, 1]),
            ValueError,
            "which has no rlmesh form",
        ),
        (
            lambda space: Grid(),
            TypeError,
            "returned Grid .*expected a SpaceSpec or a standard gymnasium space",
        ),
        (lambda space: "text", TypeError, "returned str 'text'"),
        (lambda space: 1 / 0, ValueError, "raised ZeroDivisionError"),
    ],
)
def test_a_converter_whose_result_cannot_be_encoded_is_a_named_error(
    registered, converter, error, message
) -> None:
    register_space(Grid, lambda space: Grid())  # Grid has an entry of its own (it maps to itself)
    register_space(Word, converter)
    with pytest.raises(
        error, match=f"observation_space\\['w'\\]: the converter .* registered for Word .*{message}"
    ):
        GymVectorEnv(_env_with(gym.spaces.Dict({"w": Word()})))


def _env_with(observation_space: gym.Space) -> gym.Env:
    class Env(gym.Env):
        def reset(self, *, seed=None, options=None):
            return observation_space.sample(), {}

    env = Env()
    env.observation_space, env.action_space = observation_space, gym.spaces.Discrete(2)
    return env


def test_register_space_checks_its_arguments() -> None:
    with pytest.raises(TypeError, match="gymnasium.Space subclass"):
        register_space(int, lambda space: gym.spaces.Text(3))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Box is a standard space"):
        register_space(gym.spaces.Box, lambda space: space)
    with pytest.raises(TypeError, match="to_spec must be callable"):
        register_space(Word, "Text")  # type: ignore[arg-type]


def test_minigrid_mission_space_is_text_out_of_the_box() -> None:
    mission = pytest.importorskip("minigrid.core.mission")
    fixed = mission.MissionSpace(mission_func=lambda: "get to the green goal square")
    assert space_spec(fixed).text == spaces_pb2.TextSpec(min_length=1, max_length=28, charset="")
    colours = ["red", "green", "purple"]
    placeholders = mission.MissionSpace(
        mission_func=lambda c: f"pick up the {c} ball", ordered_placeholders=[colours]
    )
    assert space_spec(placeholders).text.max_length == len("pick up the purple ball")
    codec = SpaceCodec(space_spec(placeholders))
    assert codec.decode_batch(codec.encode_batch(("pick up the red ball",), 1), 1) == (
        "pick up the red ball",
    )
    # Going back, every mission is a value of the space the spec describes.
    assert "get to the green goal square" in gym_space(space_spec(fixed))
    assert all(f"pick up the {c} ball" in gym_space(space_spec(placeholders)) for c in colours)
