"""``compare()``: every policy plays the same seeded episodes (checked through recordings), the
paired statistics, the exports and the bad inputs."""

from __future__ import annotations

import json

import gymnasium
import numpy as np
import pytest

from rlmesh_gym import compare
from rlmesh_gym.evaluation import (
    EvaluationOptions,
    PolicyMismatchError,
    bootstrap_interval,
    probability_of_improvement,
)
from rlmesh_gym.recording import load_recording, replay_episode


def _counted_seeds(recording, quotas):
    """Each lane's first ``quotas[lane]`` recorded episodes: {(lane, index): seed}."""
    seen = [0] * len(quotas)
    seeds = {}
    for episode in recording.episodes:
        lane = episode.lane
        if seen[lane] < quotas[lane]:
            seeds[(lane, seen[lane])] = episode.seed
            seen[lane] += 1
    return seeds


@pytest.mark.torch
def test_policies_play_identical_seeds_episode_by_episode(tmp_path):
    # The shipped policy balances for 500 steps, random falls within ~20: the lanes finish at
    # very different times, which would shift the driver's reset generations between policies.
    comparison = compare(
        "CartPole-v1",
        {"shipped": "pretrained:cartpole", "random": "random"},
        episodes=6,
        num_envs=3,
        seed=5,
        progress=False,
        record=tmp_path,
    )
    assert comparison.recordings == {name: str(tmp_path / f"{name}.rec") for name in ("shipped", "random")}
    quotas = comparison.results["shipped"].quotas
    recorded = {
        name: _counted_seeds(load_recording(path), quotas) for name, path in comparison.recordings.items()
    }
    assert len(recorded["shipped"]) == 6 and None not in recorded["shipped"].values()
    assert recorded["shipped"] == recorded["random"]
    assert len(set(recorded["shipped"].values())) == 6
    table = {(row.lane, row.index): row.seed for row in comparison.episodes}
    assert table == recorded["shipped"]
    # Each seed is the episode: a plain gymnasium env reset with it starts where the episode did.
    first = load_recording(comparison.recordings["random"]).episodes[0]
    env = gymnasium.make("CartPole-v1")
    observation, _ = env.reset(seed=first.seed)
    env.close()
    assert np.array_equal(observation, first.observations[0])

    for row in comparison.episodes:
        assert row.returns["shipped"] == 500.0 and row.returns["random"] < 500.0
    pair = comparison.pair("shipped", "random")
    differences = [row.returns["shipped"] - row.returns["random"] for row in comparison.episodes]
    assert pair.difference == bootstrap_interval(differences, "mean")
    assert pair.probability_of_improvement == 1.0
    swapped = comparison.pair("random", "shipped")
    assert swapped.probability_of_improvement == 0.0
    assert swapped.difference.estimate == -pair.difference.estimate


def test_identical_policies_differ_by_exactly_zero_with_a_degenerate_interval():
    comparison = compare(
        "CartPole-v1", {"a": "random", "b": "random"}, episodes=8, num_envs=4, seed=3, progress=False
    )
    (pair,) = comparison.pairs
    assert (pair.difference.estimate, pair.difference.low, pair.difference.high) == (0.0, 0.0, 0.0)
    assert pair.probability_of_improvement == 0.5
    assert comparison.results["a"].returns == comparison.results["b"].returns


@pytest.mark.notebook
def test_three_policies_give_every_pair_and_the_exports():
    weak = lambda obs: np.zeros(len(obs), dtype=np.int64)  # noqa: E731 - always push left
    comparison = compare(
        "CartPole-v1",
        {"random": "random", "left": weak, "random2": "random"},
        episodes=4,
        num_envs=2,
        seed=0,
        progress=False,
    )
    assert [(p.a, p.b) for p in comparison.pairs] == [
        ("random", "left"),
        ("random", "random2"),
        ("left", "random2"),
    ]
    returns = {name: [row.returns[name] for row in comparison.episodes] for name in comparison.names}
    assert comparison.pairs[0].probability_of_improvement == probability_of_improvement(
        returns["random"], returns["left"]
    )
    data = json.loads(comparison.to_json())
    assert [e["seed"] for e in data["episodes"]] == [row.seed for row in comparison.episodes]
    assert set(data["results"]) == {"random", "left", "random2"} and "episodes" not in data["results"]["left"]
    assert data["pairs"][0]["mean_difference"]["resamples"] == 9999
    frame = comparison.to_pandas()
    assert list(frame.columns) == ["lane", "index", "seed", "return_random", "return_left", "return_random2"]
    assert str(frame["seed"].dtype) == "Int64" and len(frame) == 4
    text = str(comparison)
    assert "random - left" in text and "P(a > b)" in text and "9,999 resamples" in text
    assert "return left" in comparison._repr_html_()

    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure = comparison.plot()
    titles = [ax.get_title() for ax in figure.axes]
    assert titles == ["mean and IQM, 95% CIs", "paired differences, 95% CIs", "performance profile"]
    plt.close(figure)


def test_a_policy_that_does_not_fit_is_named_before_any_full_run():
    calls = []

    def counting(obs):
        calls.append(len(obs))
        return np.zeros(len(obs), dtype=np.int64)

    three_actions = lambda obs: np.full(len(obs), 2)  # noqa: E731 - Discrete(3) actions
    with pytest.raises(PolicyMismatchError, match=r"^policy 'wide': .*Discrete\(2\)"):
        compare(
            "CartPole-v1", {"ok": counting, "wide": three_actions}, episodes=4, num_envs=2, progress=False
        )
    assert calls == [2]  # only the one-step check ran


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"policies": {"a": "random"}}, ValueError, "at least 2 policies"),
        ({"policies": ["random", "random"]}, TypeError, "mapping of names to policies"),
        ({"episodes": 1}, ValueError, r"episodes >= 2 \(a confidence interval needs 2"),
        ({"seed": None}, ValueError, "needs an int seed"),
        (
            {"policies": {"a": "random", "b": "no-such-policy"}},
            ValueError,
            "policy 'b': policy 'no-such-policy'",
        ),
    ],
)
def test_bad_inputs(kwargs, error, message):
    arguments = {"policies": {"a": "random", "b": "random"}, "episodes": 4, "num_envs": 2, "seed": 0}
    arguments.update(kwargs)
    with pytest.raises(error, match=message):
        compare("CartPole-v1", progress=False, **arguments)


def test_an_env_that_autoresets_cannot_be_compared():
    env = gymnasium.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
    try:
        with pytest.raises(ValueError, match="DISABLED autoreset"):
            compare(env, {"a": "random", "b": "random"}, episodes=4, progress=False)
    finally:
        env.close()


@pytest.mark.torch  # the shipped policy
def test_recordings_store_the_env_kwargs_and_replay_with_them(tmp_path):
    # max_episode_steps=7 caps every episode of the shipped policy at 7 steps; a replay that
    # remade CartPole-v1 without it would run on to 500 and not match.
    comparison = compare(
        "CartPole-v1",
        {"shipped": "pretrained:cartpole", "random": "random"},
        episodes=2,
        num_envs=2,
        progress=False,
        record=tmp_path,
        options=EvaluationOptions(env_kwargs={"max_episode_steps": 7}),
    )
    assert [row.returns["shipped"] for row in comparison.episodes] == [7.0, 7.0]
    for path in comparison.recordings.values():
        recording = load_recording(path)
        assert recording.header.env_kwargs == {"max_episode_steps": 7}
        replayed = replay_episode(recording, recording.episodes[0])
        assert replayed.match and replayed.replayed_length == recording.episodes[0].length
    # As in evaluate, env_kwargs apply to env ids only.
    with pytest.raises(ValueError, match="env_kwargs apply only when env is an env id"):
        compare(
            gymnasium.make_vec("CartPole-v1", 2, vectorization_mode="sync"),
            {"a": "random", "b": "random"},
            episodes=2,
            options=EvaluationOptions(env_kwargs={"max_episode_steps": 7}),
        )


def _cartpole_rewarding(value: float):
    def make(**kwargs):
        return gymnasium.wrappers.TransformReward(gymnasium.make("CartPole-v1", **kwargs), lambda _: value)

    return make


@pytest.mark.parametrize("bad", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_non_finite_returns_keep_every_result_and_the_pairs_say_why_there_is_no_interval(bad):
    env_id = f"rlmesh-test/CartPoleRewarding{bad}-v0"
    if env_id not in gymnasium.registry:
        gymnasium.register(env_id, entry_point=_cartpole_rewarding(bad))
    policies = {"a": "random", "b": lambda obs: np.zeros(len(obs), dtype=np.int64)}
    comparison = compare(env_id, policies, episodes=4, num_envs=2, seed=1, progress=False)
    assert list(comparison.results) == ["a", "b"]
    assert all(len(result.episodes) == 4 for result in comparison.results.values())
    (pair,) = comparison.pairs
    assert pair.difference is None and pair.probability_of_improvement is None
    assert pair.no_interval_reason == "needs finite returns (4 of the returns of 'a' are NaN or infinite)"
    assert comparison.pair("b", "a").no_interval_reason == pair.no_interval_reason
    text = str(comparison)
    assert "no interval: needs finite returns" in text and "no CI: needs finite returns" in text
    exported = json.loads(comparison.to_json())
    assert exported["pairs"][0]["mean_difference"] is None
    assert exported["pairs"][0]["no_interval_reason"] == pair.no_interval_reason
    with pytest.raises(ValueError, match="policy 'a' has none: it needs finite returns"):
        comparison.plot()


class Flaky:
    """Acts for ``calls`` predicts, then raises."""

    def __init__(self, calls: int) -> None:
        self.calls = calls

    def __call__(self, observations):
        self.calls -= 1
        if self.calls < 0:
            raise RuntimeError("the policy broke")
        return np.zeros(len(observations), dtype=np.int64)


def test_a_policy_that_fails_mid_run_is_named_with_what_was_passed():
    from rlmesh_gym.evaluation import EvaluationError

    with pytest.raises(EvaluationError) as caught:
        compare(
            "CartPole-v1", {"good": "random", "bad": Flaky(5)}, episodes=6, num_envs=2, seed=1, progress=False
        )
    message = str(caught.value)
    assert message.startswith("policy 'bad' (Flaky) (after the full runs of 'good'): ")
    assert "the policy broke" in message
    assert caught.value.partial is not None and not caught.value.partial.complete
