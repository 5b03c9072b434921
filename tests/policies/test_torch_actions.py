"""What a TorchPolicy sends: actions, logits and distributions for every action kind, decoded back."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from _policy_requests import close_route, observe, predict, predicted_actions, spec
from torch.distributions import (
    Bernoulli,
    Categorical,
    Independent,
    Normal,
    OneHotCategorical,
    TransformedDistribution,
    Uniform,
)
from torch.distributions.transforms import TanhTransform

from rlmesh_gym.policies import TorchPolicy
from rlmesh_gym.runtime import ModelRpcError

pytestmark = pytest.mark.torch  # (tests/conftest.py)

OBS = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
ROWS = 3
OBS_BYTES = observe(OBS, np.arange(ROWS * 2, dtype=np.float32).reshape(ROWS, 2), ROWS)


def act(output: object, action_space: gym.Space, rows: int = ROWS, **kwargs: object) -> object:
    """The decoded actions a TorchPolicy sends when its module returns ``output``."""
    policy = TorchPolicy(lambda obs: output, (spec(OBS), spec(action_space)), **kwargs)
    data = OBS_BYTES if rows == ROWS else observe(OBS, np.zeros((rows, 2), dtype=np.float32), rows)
    return predicted_actions(policy, data, rows)


def error_text(output: object, action_space: gym.Space, rows: int = ROWS, **kwargs: object) -> str:
    with pytest.raises(ModelRpcError) as caught:
        act(output, action_space, rows, **kwargs)
    return caught.value.message


# --------------------------------------------------------------------------- Discrete


def test_discrete_action_tensor_is_sent_as_is() -> None:
    assert act(torch.tensor([1, 0, 1]), gym.spaces.Discrete(2)).tolist() == [1, 0, 1]


def test_discrete_accepts_an_n_by_1_column_and_whole_floats() -> None:
    assert act(torch.tensor([[2], [0], [1]]), gym.spaces.Discrete(3)).tolist() == [2, 0, 1]
    assert act(torch.tensor([2.0, 0.0, 1.0]), gym.spaces.Discrete(3)).tolist() == [2, 0, 1]


def test_discrete_logits_take_the_argmax_and_index_i_is_action_start_plus_i() -> None:
    logits = torch.tensor([[0.1, 3.0, 0.2], [5.0, 0.0, 0.0], [0.0, 0.0, 9.0]])
    assert act(logits, gym.spaces.Discrete(3)).tolist() == [1, 0, 2]
    assert act(logits, gym.spaces.Discrete(3, start=-1)).tolist() == [0, -1, 1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("requires_grad", [False, True])
def test_greedy_discrete_logits_pick_torchs_first_maximum_in_every_float_form(dtype, requires_grad) -> None:
    # Ties, -inf masks and large values: the numpy path (CPU float tensors without grad) and
    # torch's path (bfloat16, grad) must give what torch's argmax gives.
    logits = torch.tensor(
        [[1.0, 1.0, 0.0], [float("-inf"), 2.0, 2.0], [-3.0, -3.0, -2.5]], dtype=dtype
    ).requires_grad_(requires_grad)
    expected = logits.detach().float().argmax(-1).tolist()
    assert expected == [0, 1, 2]
    assert act(logits, gym.spaces.Discrete(3)).tolist() == expected
    assert act(logits, gym.spaces.Discrete(3, start=4)).tolist() == [4 + i for i in expected]


def test_discrete_action_values_with_start_are_actual_values() -> None:
    assert act(torch.tensor([-1, 1, 0]), gym.spaces.Discrete(3, start=-1)).tolist() == [-1, 1, 0]


def test_categorical_distribution_mode_and_one_hot() -> None:
    probs = torch.tensor([[0.2, 0.8], [0.9, 0.1], [0.4, 0.6]])
    assert act(Categorical(probs=probs), gym.spaces.Discrete(2)).tolist() == [1, 0, 1]
    assert act(Categorical(probs=probs), gym.spaces.Discrete(2, start=5)).tolist() == [6, 5, 6]
    assert act(OneHotCategorical(probs=probs), gym.spaces.Discrete(2)).tolist() == [1, 0, 1]


def test_logits_sampling_is_seeded_per_route() -> None:
    space = gym.spaces.Discrete(4)
    logits = torch.zeros(64, 4)  # uniform: every draw is informative

    def draws(seed: int, route_id: str = "route", policy: TorchPolicy | None = None) -> list[int]:
        policy = policy or TorchPolicy(
            lambda obs: logits, (spec(OBS), spec(space)), deterministic=False, seed=seed
        )
        data = observe(OBS, np.zeros((64, 2), dtype=np.float32), 64)
        return predicted_actions(policy, data, 64, route_id=route_id).tolist()

    first = draws(7)
    assert first == draws(7)
    assert first != draws(8)
    assert first != draws(7, route_id="other-route")
    assert set(first) == {0, 1, 2, 3}


def test_close_route_restarts_the_route_stream_and_is_idempotent() -> None:
    space = gym.spaces.Discrete(4)
    policy = TorchPolicy(
        lambda obs: torch.zeros(64, 4), (spec(OBS), spec(space)), deterministic=False, seed=1
    )
    data = observe(OBS, np.zeros((64, 2), dtype=np.float32), 64)
    first = predicted_actions(policy, data, 64).tolist()
    second = predicted_actions(policy, data, 64).tolist()
    assert first != second  # the stream moves on within a route
    close_route(policy)
    close_route(policy)
    assert predicted_actions(policy, data, 64).tolist() == first


def test_categorical_sampling_follows_the_probabilities() -> None:
    probs = torch.tensor([[0.0, 1.0, 0.0]]).repeat(ROWS, 1)
    assert act(Categorical(probs=probs), gym.spaces.Discrete(3), deterministic=False, seed=0).tolist() == [
        1,
        1,
        1,
    ]
    spread = torch.tensor([[0.5, 0.0, 0.5]]).repeat(200, 1)
    drawn = act(Categorical(probs=spread), gym.spaces.Discrete(3), rows=200, deterministic=False, seed=0)
    assert set(drawn.tolist()) == {0, 2}


def test_sampling_leaves_the_global_torch_rng_untouched() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    act(torch.zeros(ROWS, 4), gym.spaces.Discrete(4), deterministic=False, seed=0)
    act(
        Uniform(torch.zeros(ROWS, 2), torch.ones(ROWS, 2)),
        gym.spaces.Box(0.0, 1.0, (2,)),
        deterministic=False,
    )
    assert torch.equal(torch.rand(3), expected)


# --------------------------------------------------------------------------- MultiDiscrete


def test_multi_discrete_actions_and_padded_logits() -> None:
    space = gym.spaces.MultiDiscrete([2, 3])
    assert act(torch.tensor([[1, 2], [0, 0], [1, 1]]), space).tolist() == [[1, 2], [0, 0], [1, 1]]
    padded = torch.zeros(ROWS, 2, 3)
    padded[:, 0, 2] = 100.0  # past nvec[0] = 2: must be ignored
    padded[:, 0, 1] = 1.0
    padded[:, 1, 2] = 1.0
    assert act(padded, space).tolist() == [[1, 2]] * ROWS


def test_multi_discrete_flat_logits_are_split_per_component() -> None:
    space = gym.spaces.MultiDiscrete([2, 3])
    flat = torch.tensor([[0.0, 1.0, 5.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0, 5.0], [1.0, 0.0, 0.0, 5.0, 0.0]])
    assert act(flat, space).tolist() == [[1, 0], [0, 2], [0, 1]]


def test_multi_discrete_logits_sampling_never_picks_masked_entries() -> None:
    space = gym.spaces.MultiDiscrete([2, 3])
    drawn = act(torch.zeros(200, 2, 3), space, rows=200, deterministic=False, seed=3)
    assert drawn[:, 0].max() == 1 and drawn[:, 1].max() == 2
    assert set(drawn[:, 0].tolist()) == {0, 1} and set(drawn[:, 1].tolist()) == {0, 1, 2}


def test_multi_discrete_out_of_range_actions_are_refused() -> None:
    message = error_text(torch.tensor([[1, 3], [0, 0], [0, 0]]), gym.spaces.MultiDiscrete([2, 3]))
    assert "value 3 outside [0, nvec) at [0, 1]" in message


# --------------------------------------------------------------------------- MultiBinary


def test_multi_binary_accepts_bool_int_and_bernoulli() -> None:
    space = gym.spaces.MultiBinary(3)
    expected = [[1, 0, 1], [0, 0, 0], [1, 1, 1]]
    assert act(torch.tensor(expected, dtype=torch.bool), space).tolist() == expected
    assert act(torch.tensor(expected, dtype=torch.float32), space).tolist() == expected
    probs = torch.tensor(expected, dtype=torch.float32) * 0.8 + 0.1
    assert act(Bernoulli(probs=probs), space).tolist() == expected
    # torch's Bernoulli.mode is NaN at p = 0.5; ours breaks the tie to 0.
    assert act(Bernoulli(probs=torch.full((ROWS, 3), 0.5)), space).tolist() == [[0, 0, 0]] * ROWS


def test_multi_binary_values_other_than_0_and_1_are_refused() -> None:
    message = error_text(torch.tensor([[1, 2, 0]] * ROWS), gym.spaces.MultiBinary(3))
    assert "value 2 is neither 0 nor 1" in message


@pytest.mark.parametrize("deterministic", [True, False])
@pytest.mark.parametrize(
    ("space", "logits", "problem"),
    [
        (gym.spaces.Discrete(3), [[0.0, float("nan"), 1.0]] * ROWS, "its logits hold NaN at [0, 1]"),
        (gym.spaces.Discrete(3), [[0.0, 1.0, 2.0], [0.0, float("inf"), 1.0], [0.0] * 3], "+inf at [1, 1]"),
        (gym.spaces.Discrete(3), [[0.0] * 3, [float("-inf")] * 3, [0.0] * 3], "all -inf at [1]"),
        (gym.spaces.MultiDiscrete([2, 3]), [[0.0, 1.0, float("nan"), 0.0, 0.0]] * ROWS, "NaN at [0, 2]"),
        # More logits than the greedy path sums in Python: numpy's sum finds it.
        (gym.spaces.Discrete(300), [[0.0] * 299 + [float("nan")]] * ROWS, "NaN at [0, 299]"),
    ],
)
def test_nan_and_infinite_logits_are_refused_whether_sampled_or_argmaxed(
    space, logits, problem, deterministic
) -> None:
    message = error_text(torch.tensor(logits), space, deterministic=deterministic, seed=1)
    assert problem in message and "or logits of shape" in message, message


@pytest.mark.parametrize("deterministic", [True, False])
def test_minus_inf_logits_mask_actions_out(deterministic) -> None:
    logits = torch.tensor([[float("-inf"), float("-inf"), 0.0]] * ROWS)
    assert act(logits, gym.spaces.Discrete(3), deterministic=deterministic, seed=1).tolist() == [2] * ROWS


# --------------------------------------------------------------------------- Box


def test_box_actions_are_cast_to_the_box_dtype_and_clipped_only_when_asked() -> None:
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    raw = torch.tensor([[0.5, 2.0], [-3.0, 0.25], [0.0, 0.0]], dtype=torch.float64)
    unclipped = act(raw, space)
    assert unclipped.dtype == np.float32
    assert unclipped.tolist() == [[0.5, 2.0], [-3.0, 0.25], [0.0, 0.0]]
    assert act(raw, space, clip_actions=True).tolist() == [[0.5, 1.0], [-1.0, 0.25], [0.0, 0.0]]


def test_integer_box_accepts_whole_floats_and_clips_to_its_bounds() -> None:
    space = gym.spaces.Box(0, 10, (2,), np.int32)
    assert act(torch.tensor([[1.0, 2.0]] * ROWS), space).tolist() == [[1, 2]] * ROWS
    assert act(torch.tensor([[-4, 12]] * ROWS), space, clip_actions=True).tolist() == [[0, 10]] * ROWS
    assert "1.5 is not a whole number" in error_text(torch.tensor([[1.5, 2.0]] * ROWS), space)
    assert "outside the int8 range" in error_text(
        torch.tensor([[300, 0]] * ROWS), gym.spaces.Box(-5, 5, (2,), np.int8)
    )


def test_normal_distributions_give_the_mean_or_a_seeded_sample() -> None:
    space = gym.spaces.Box(-5.0, 5.0, (2,), np.float32)
    loc = torch.tensor([[0.5, -0.5]]).repeat(ROWS, 1)
    dist = Independent(Normal(loc, torch.full((ROWS, 2), 0.1)), 1)
    assert np.allclose(act(dist, space), loc.numpy())
    sample = act(dist, space, deterministic=False, seed=4)
    assert np.array_equal(sample, act(dist, space, deterministic=False, seed=4))
    assert not np.allclose(sample, loc.numpy()) and np.all(np.abs(sample - loc.numpy()) < 1.0)


def test_tanh_squashed_gaussian_mode_is_tanh_of_the_mean() -> None:
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    loc = torch.tensor([[0.3, -2.0]]).repeat(ROWS, 1)
    squashed = TransformedDistribution(Normal(loc, torch.ones(ROWS, 2)), [TanhTransform()])
    assert np.allclose(act(squashed, space), np.tanh(loc.numpy()), atol=1e-6)
    sampled = act(squashed, space, deterministic=False, seed=0)
    assert np.all(np.abs(sampled) <= 1.0)


def test_other_distributions_fall_back_to_mode_or_mean_and_sample_reproducibly() -> None:
    space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
    uniform = Uniform(torch.zeros(ROWS, 2), torch.ones(ROWS, 2))
    assert np.allclose(act(uniform, space), 0.5)  # Uniform has no mode: its mean
    first = act(uniform, space, deterministic=False, seed=9)
    assert np.array_equal(first, act(uniform, space, deterministic=False, seed=9))
    assert not np.array_equal(first, act(uniform, space, deterministic=False, seed=10))


def test_nan_box_actions_are_refused() -> None:
    message = error_text(torch.tensor([[0.0, float("nan")]] * ROWS), gym.spaces.Box(-1.0, 1.0, (2,)))
    assert "NaN at [0, 1]" in message


# --------------------------------------------------------------------------- Dict / Tuple / Text


def test_dict_and_tuple_outputs_resolve_each_subspace() -> None:
    space = gym.spaces.Dict(
        {"move": gym.spaces.Discrete(3), "aim": gym.spaces.Box(-1.0, 1.0, (1,), np.float32)}
    )
    output = {"move": torch.tensor([[0.0, 9.0, 0.0]] * ROWS), "aim": Normal(torch.full((ROWS, 1), 0.25), 1.0)}
    actions = act(output, space)
    assert actions["move"].tolist() == [1] * ROWS
    assert actions["aim"].tolist() == [[0.25]] * ROWS
    tuple_space = gym.spaces.Tuple((gym.spaces.MultiBinary(2), gym.spaces.Discrete(2, start=1)))
    actions = act(
        (torch.tensor([[1, 0]] * ROWS), Categorical(logits=torch.tensor([[0.0, 1.0]] * ROWS))), tuple_space
    )
    assert actions[0].tolist() == [[1, 0]] * ROWS
    assert actions[1].tolist() == [2] * ROWS


def test_text_actions_are_sequences_of_str() -> None:
    space = gym.spaces.Text(5, charset="abc")
    assert act(["ab", "c", "abc"], space) == ("ab", "c", "abc")
    assert "'z' in 'az' is not in the charset" in error_text(["ab", "az", "a"], space)


# --------------------------------------------------------------------------- wrong outputs


def test_wrong_shape_names_the_output_and_the_expected_layout() -> None:
    message = error_text(torch.zeros(1, 3), gym.spaces.Discrete(2), rows=1)
    assert message == (
        "policy <lambda> returned a tensor of shape (1, 3) float32; expected actions for Discrete(2): "
        "shape (1,) integer in [0, 2), or logits of shape (1, 2), or a Distribution over them"
    )


def test_wrong_batch_size_is_refused() -> None:
    message = error_text(torch.tensor([0, 1]), gym.spaces.Discrete(2))
    assert "returned a tensor of shape (2,) int64; expected actions for Discrete(2): shape (3,)" in message


def test_non_integral_floats_and_out_of_domain_discrete_values_are_refused() -> None:
    assert "0.5 is not a whole number" in error_text(torch.tensor([0.5, 1.0, 0.0]), gym.spaces.Discrete(2))
    message = error_text(torch.tensor([0, 1, 2]), gym.spaces.Discrete(2, start=0))
    assert "value 2 outside the Discrete domain [0, 1]" in message


def test_unsupported_outputs_are_refused() -> None:
    assert "returned a ndarray" not in error_text(np.zeros(ROWS), gym.spaces.Discrete(2))
    assert "returned an array of shape (3,) float64" in error_text(np.zeros(ROWS), gym.spaces.Discrete(2))
    message = error_text((torch.zeros(ROWS, 2), torch.zeros(ROWS, 1)), gym.spaces.Discrete(2))
    assert message.startswith(
        "policy <lambda> returned a tuple of 2 items (Tensor, Tensor); expected actions"
    )
    assert "returned None" in error_text(None, gym.spaces.Discrete(2))
    assert "returned a tensor of shape (3,) complex64" in error_text(
        torch.zeros(ROWS, dtype=torch.complex64), gym.spaces.Discrete(2)
    )


def test_dict_output_problems_name_the_path() -> None:
    space = gym.spaces.Dict({"a": gym.spaces.Discrete(2), "b": gym.spaces.Discrete(2)})
    assert "missing keys ['b']" in error_text({"a": torch.zeros(ROWS, dtype=torch.long)}, space)
    message = error_text({"a": torch.zeros(ROWS, dtype=torch.long), "b": torch.zeros(ROWS, 5)}, space)
    assert (
        "returned a tensor of shape (3, 5) float32 for action['b']; expected actions for Discrete(2)"
        in message
    )


def test_policy_exceptions_are_wrapped_with_the_observation_layout() -> None:
    def broken(obs: torch.Tensor) -> torch.Tensor:
        raise ValueError("bad input width")

    policy = TorchPolicy(broken, (spec(OBS), spec(gym.spaces.Discrete(2))))
    with pytest.raises(ModelRpcError) as caught:
        predict(policy, OBS_BYTES, ROWS)
    assert caught.value.message == (
        "policy broken raised ValueError: bad input width (called with a tensor of shape (3, 2) float32)"
    )
    assert isinstance(caught.value.__cause__, ValueError)


def test_outputs_that_require_grad_or_are_bfloat16_are_converted() -> None:
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    weights = torch.full((ROWS, 2), 0.5, requires_grad=True)  # made outside inference mode
    assert act(weights, space).tolist() == [[0.5, 0.5]] * ROWS
    assert act(torch.full((ROWS, 2), 0.25, dtype=torch.bfloat16), space).tolist() == [[0.25, 0.25]] * ROWS


def test_clipping_keeps_large_values_inside_a_narrow_box_dtype() -> None:
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float16)
    assert (
        act(torch.full((ROWS, 2), 1e6, dtype=torch.float64), space, clip_actions=True).tolist()
        == [[1.0, 1.0]] * ROWS
    )
    assert "overflows float16" in error_text(torch.full((ROWS, 2), 1e6, dtype=torch.float64), space)
