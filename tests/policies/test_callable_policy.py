"""CallablePolicy: numpy batches in, array-likes out, checked before they are encoded."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from _policy_requests import observe, predict, predicted_actions, spec

from rlmesh_gym.policies import CallablePolicy
from rlmesh_gym.runtime import ModelRpcError

OBS = gym.spaces.Box(-5.0, 5.0, (4,), np.float32)
ROWS = 3
BATCH = np.array([[0.1, 0.0, 0.3, 0.0], [0.0, 0.0, -0.2, 0.0], [0.0, 0.0, 0.0, 0.0]], dtype=np.float32)
OBS_BYTES = observe(OBS, BATCH, ROWS)


def act(
    fn: object, action_space: gym.Space, observation_space: gym.Space = OBS, data: bytes = OBS_BYTES
) -> object:
    return predicted_actions(CallablePolicy(fn, (spec(observation_space), spec(action_space))), data, ROWS)


def error_text(fn: object, action_space: gym.Space) -> str:
    with pytest.raises(ModelRpcError) as caught:
        act(fn, action_space)
    return caught.value.message


def test_the_function_gets_the_codec_batch_and_its_actions_are_sent() -> None:
    seen = []

    def lean(obs: np.ndarray) -> np.ndarray:
        seen.append(obs)
        return (obs[:, 2] > 0).astype(np.int64)

    assert act(lean, gym.spaces.Discrete(2)).tolist() == [1, 0, 0]
    (obs,) = seen
    assert obs.dtype == np.float32 and obs.shape == (ROWS, 4)
    assert np.array_equal(obs, BATCH)
    assert not obs.flags.writeable  # a view of the request bytes


def test_lists_of_ints_and_whole_floats_are_accepted() -> None:
    assert act(lambda obs: [1, 0, 1], gym.spaces.Discrete(2)).tolist() == [1, 0, 1]
    assert act(lambda obs: [2.0, 3.0, 2.0], gym.spaces.Discrete(2, start=2)).tolist() == [2, 3, 2]
    assert act(lambda obs: [[1, 0]] * ROWS, gym.spaces.MultiBinary(2)).tolist() == [[1, 0]] * ROWS


def test_box_actions_are_cast_to_the_box_dtype() -> None:
    actions = act(lambda obs: obs[:, :2] * 2, gym.spaces.Box(-1.0, 1.0, (2,), np.float64))
    assert actions.dtype == np.float64
    assert np.allclose(actions, BATCH[:, :2].astype(np.float64) * 2)


def test_dict_tuple_and_text_observations_and_actions() -> None:
    obs_space = gym.spaces.Dict({"n": gym.spaces.Discrete(5), "tag": gym.spaces.Text(3)})
    act_space = gym.spaces.Tuple((gym.spaces.Discrete(5), gym.spaces.Text(4)))
    data = observe(obs_space, {"n": np.array([1, 2, 3]), "tag": ("a", "bb", "ccc")}, ROWS)

    def echo(obs: dict) -> tuple:
        return obs["n"] + 1, [tag + "!" for tag in obs["tag"]]

    numbers, texts = act(echo, act_space, obs_space, data)
    assert numbers.tolist() == [2, 3, 4]
    assert texts == ("a!", "bb!", "ccc!")


@pytest.mark.parametrize(
    ("fn", "space", "expected"),
    [
        (
            lambda obs: 1,
            gym.spaces.Discrete(2),
            "policy function <lambda> returned int 1; "
            "expected actions for Discrete(2): shape (3,) integer in [0, 2)",
        ),
        (
            lambda obs: [0, 1],
            gym.spaces.Discrete(2),
            "policy function <lambda> returned a list of 2 items; expected actions for Discrete(2): "
            "shape (3,) integer in [0, 2)",
        ),
        (
            lambda obs: [0, 1, 5],
            gym.spaces.Discrete(2),
            "policy function <lambda> returned a list of 3 items "
            "(value 5 outside the Discrete domain [0, 1]); "
            "expected actions for Discrete(2): shape (3,) integer in [0, 2)",
        ),
        (
            lambda obs: ["a", "b", "c"],
            gym.spaces.Discrete(2),
            "policy function <lambda> returned a list of 3 items (dtype <U1 is not numeric); "
            "expected actions for Discrete(2): shape (3,) integer in [0, 2)",
        ),
        (
            lambda obs: np.full(ROWS, 0.5),
            gym.spaces.MultiDiscrete([2]),
            "policy function <lambda> returned an array of shape (3,) float64; expected actions for "
            "MultiDiscrete([2]): shape (3, 1) integer with 0 <= action < nvec",
        ),
        (
            lambda obs: {"a": [0, 0, 0]},
            gym.spaces.Dict({"a": gym.spaces.Discrete(2), "b": gym.spaces.Discrete(2)}),
            "policy function <lambda> returned a dict with keys ['a'] (missing keys ['b']); expected actions "
            "for Dict('a': Discrete(2), 'b': Discrete(2)): a dict with keys ['a', 'b']",
        ),
        (
            lambda obs: ([0, 0, 0], [[2, 0]] * ROWS),
            gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.MultiBinary(2))),
            "policy function <lambda> returned a list of 3 items for action[1] (value 2 is neither 0 nor 1); "
            "expected actions for MultiBinary(2): shape (3, 2) of 0/1 values",
        ),
        (
            lambda obs: ["toolong", "a", "b"],
            gym.spaces.Text(4),
            "policy function <lambda> returned a list of 3 items "
            "('toolong' has 7 characters, outside [1, 4]); "
            "expected actions for Text(1, 4): a sequence of 3 str",
        ),
    ],
)
def test_wrong_actions_name_the_output_and_the_expected_layout(
    fn: object, space: gym.Space, expected: str
) -> None:
    assert error_text(fn, space) == expected


def test_function_exceptions_are_wrapped() -> None:
    def explode(obs: np.ndarray) -> np.ndarray:
        raise KeyError("lane")

    policy = CallablePolicy(explode, (spec(OBS), spec(gym.spaces.Discrete(2))))
    with pytest.raises(ModelRpcError) as caught:
        predict(policy, OBS_BYTES, ROWS)
    assert caught.value.message == "policy function explode raised KeyError: 'lane'"
    assert isinstance(caught.value.__cause__, KeyError)


def test_fn_must_be_callable() -> None:
    with pytest.raises(TypeError, match=r"CallablePolicy: fn must be callable, got int 3"):
        CallablePolicy(3)


def test_float_actions_that_overflow_a_narrower_box_dtype_are_refused() -> None:
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float16)
    assert act(lambda obs: np.full((ROWS, 2), np.inf), space).tolist() == [[np.inf, np.inf]] * ROWS
    message = error_text(lambda obs: np.full((ROWS, 2), 1e6), space)
    assert "(1000000.0 overflows float16)" in message
