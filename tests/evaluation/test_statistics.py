"""IQM, bootstrap CIs and the probability of improvement on fixed data, against scipy (the
reference implementation) and hand-computed values; EvalResult's intervals, table, JSON and plot."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
import scipy
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats

from rlmesh_gym.evaluation import (
    EvalResult,
    bootstrap_interval,
    interquartile_mean,
    lane_quotas,
    probability_of_improvement,
)
from rlmesh_gym.recording import EpisodeRecord

# Fixed synthetic returns: skewed, with ties and an outlier.
RETURNS = [12.0, 15.0, 9.0, 30.0, 15.0, 11.0, 200.0, 14.0, 13.0, 16.0, 10.0, 15.0]


def _result(returns: list[float], num_envs: int = 2) -> EvalResult:
    records = tuple(
        EpisodeRecord(
            lane=i % num_envs,
            episode_id=f"ep-{i}",
            seed=i,
            episode_return=value,
            length=10,
            terminated=True,
            truncated=False,
            duration_ms=1,
            success=None,
        )
        for i, value in enumerate(returns)
    )
    return EvalResult(
        env_id="Test-v0",
        policy="fixed",
        num_envs=num_envs,
        episodes_requested=len(returns),
        seed=0,
        autoreset="disabled",
        vectorization="sync",
        session_id="s",
        route_id="r",
        quotas=lane_quotas(max(len(returns), 1), num_envs),
        episodes=records,
    )


def test_iqm_is_the_mean_of_the_middle_half_as_rliable_defines_it():
    # Sorted: 9 10 11 12 13 14 15 15 15 16 30 200; 3 cut from each end -> 12..16 (6 values).
    assert interquartile_mean(RETURNS) == pytest.approx((12 + 13 + 14 + 15 + 15 + 15) / 6)
    assert interquartile_mean(RETURNS) == stats.trim_mean(RETURNS, 0.25)
    assert interquartile_mean([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]) == 4.5


_RETURNS_ARRAYS = hnp.arrays(
    np.float64,
    st.integers(1, 40),
    elements=st.floats(-1e6, 1e6, allow_nan=False) | st.sampled_from([0.0, 1.0, 500.0]),
)


@given(_RETURNS_ARRAYS)
def test_iqm_gives_the_very_floats_of_scipy_trim_mean(returns):
    assert interquartile_mean(returns) == stats.trim_mean(returns, 0.25)


@given(
    hnp.arrays(np.float64, st.tuples(st.integers(1, 5), st.integers(1, 30)), elements=st.floats(-1e3, 1e3))
)
def test_the_bootstrap_statistic_gives_scipy_trim_mean_along_the_last_axis(samples):
    from rlmesh_gym.evaluation._statistics import _iqm

    np.testing.assert_array_equal(_iqm(samples, axis=-1), stats.trim_mean(samples, 0.25, axis=-1))


# scipy 1.17 takes the percentile with scipy.stats.quantile, whose arithmetic the package repeats:
# the very same floats. Older releases (1.15, Python 3.10's pin) call numpy.percentile, which
# interpolates in another order: equal to the last few bits of the returns' magnitude.
_SAME_QUANTILE_ARITHMETIC = tuple(int(part) for part in scipy.__version__.split(".")[:2]) >= (1, 17)


def _assert_same_interval(interval, reference, returns) -> None:
    got, expected = (interval.low, interval.high), (reference.low, reference.high)
    if _SAME_QUANTILE_ARITHMETIC:
        assert got == expected
    else:
        scale = max(1.0, float(np.max(np.abs(returns))))
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-13 * scale)


def _scipy_interval(returns, statistic, resamples, seed, batch=None):
    function = np.mean if statistic == "mean" else (lambda x, axis: stats.trim_mean(x, 0.25, axis=axis))
    return stats.bootstrap(
        (np.asarray(returns, dtype=np.float64),),
        function,
        n_resamples=resamples,
        batch=batch,
        method="percentile",
        confidence_level=0.95,
        rng=np.random.default_rng(seed),
    ).confidence_interval


@given(
    hnp.arrays(np.float64, st.integers(2, 60), elements=st.floats(-1e4, 1e4) | st.sampled_from([0.0, 9.0])),
    st.sampled_from(["mean", "iqm"]),
    st.integers(2, 400),  # scipy warns on 1 resample (no standard error)
    st.integers(0, 2**32),
)
def test_bootstrap_interval_gives_the_very_floats_of_scipy_bootstrap(returns, statistic, resamples, seed):
    interval = bootstrap_interval(returns, statistic, resamples=resamples, seed=seed)
    if np.all(returns == returns[0]):
        assert interval.low == interval.high == interval.estimate
        return
    _assert_same_interval(interval, _scipy_interval(returns, statistic, resamples, seed), returns)


@pytest.mark.parametrize("statistic", ["mean", "iqm"])
def test_a_bootstrap_over_several_batches_draws_as_scipy_does(statistic):
    from rlmesh_gym.evaluation._statistics import _batch

    returns = np.random.default_rng(5).normal(size=100_000)
    assert _batch(returns.size) == 20  # 50 resamples: batches of 20, 20 and 10
    interval = bootstrap_interval(returns, statistic, resamples=50, seed=9)
    _assert_same_interval(interval, _scipy_interval(returns, statistic, 50, 9, batch=20), returns)


@pytest.mark.parametrize("statistic", ["mean", "iqm"])
def test_bootstrap_interval_equals_scipy_percentile_bootstrap(statistic):
    reference = _scipy_interval(RETURNS, statistic, 2000, 123)
    interval = bootstrap_interval(RETURNS, statistic, resamples=2000, seed=123)
    assert (interval.low, interval.high) == pytest.approx((reference.low, reference.high), abs=1e-12)
    expected = np.mean(RETURNS) if statistic == "mean" else stats.trim_mean(RETURNS, 0.25)
    assert interval.estimate == pytest.approx(expected)
    assert interval.low <= interval.estimate <= interval.high
    assert (interval.level, interval.resamples, interval.seed, interval.method) == (
        0.95,
        2000,
        123,
        "percentile",
    )


def test_bootstrap_interval_is_reproducible_and_seeded():
    first = bootstrap_interval(RETURNS, "mean", resamples=500, seed=7)
    assert bootstrap_interval(RETURNS, "mean", resamples=500, seed=7) == first
    assert bootstrap_interval(RETURNS, "mean", resamples=500, seed=8) != first


def test_equal_values_give_a_degenerate_interval():
    interval = bootstrap_interval([0.0] * 5, "mean")
    assert (interval.estimate, interval.low, interval.high, interval.half_width) == (0.0, 0.0, 0.0, 0.0)
    assert bootstrap_interval([500.0] * 3, "iqm").low == 500.0


@pytest.mark.parametrize("values", [[], [3.0]])
def test_fewer_than_two_values_have_no_interval(values):
    with pytest.raises(ValueError, match=r"needs at least 2 values, got \d; evaluate more episodes"):
        bootstrap_interval(values, "mean")


def test_bad_values_and_settings_are_rejected():
    with pytest.raises(ValueError, match="finite"):
        bootstrap_interval([1.0, float("nan")])
    with pytest.raises(ValueError, match="'mean' or 'iqm'"):
        bootstrap_interval([1.0, 2.0], "median")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_interval([1.0, 2.0], resamples=0)
    with pytest.raises(ValueError, match="seed"):
        bootstrap_interval([1.0, 2.0], seed=-1)


def _pairwise_probability(a, b):
    # The definition itself: P(X_a > X_b) + 0.5 P(X_a = X_b) over every pair.
    wins = [1.0 if x > y else 0.5 if x == y else 0.0 for x, y in itertools.product(a, b)]
    return sum(wins) / len(wins)


def test_probability_of_improvement_as_rliable_defines_it():
    assert probability_of_improvement([1.0, 2.0, 3.0], [2.0, 2.0, 2.0]) == 0.5
    assert probability_of_improvement([3.0, 4.0], [1.0, 3.0]) == 0.875  # (1 + 0.5 + 1 + 1) / 4
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 6, 40).astype(float), rng.integers(1, 7, 30).astype(float)  # many ties
    p = probability_of_improvement(a, b)
    assert p == pytest.approx(_pairwise_probability(a, b))
    assert p == pytest.approx(stats.mannwhitneyu(a, b).statistic / (len(a) * len(b)))
    assert probability_of_improvement(b, a) == pytest.approx(1 - p)


def test_eval_result_reports_iqm_and_both_intervals():
    result = _result(RETURNS)
    assert result.iqm_return == stats.trim_mean(RETURNS, 0.25)
    assert result.mean_return_ci == bootstrap_interval(RETURNS, "mean")
    assert result.iqm_return_ci == bootstrap_interval(RETURNS, "iqm")
    assert (result.bootstrap_resamples, result.bootstrap_seed) == (9999, 0)
    other = result.with_bootstrap(resamples=500, seed=3)
    assert other.mean_return_ci == bootstrap_interval(RETURNS, "mean", resamples=500, seed=3)
    assert other.episodes == result.episodes and result.mean_return_ci.resamples == 9999

    text = str(result)
    mean_ci = result.mean_return_ci
    assert (
        f"mean return       {result.mean_return:,.2f}  95% CI [{mean_ci.low:,.2f}, {mean_ci.high:,.2f}]"
        in text
    )
    assert "IQM return" in text and "9,999 resamples (percentile), seed 0" in text
    html = result._repr_html_()
    assert "IQM return" in html and "95% CI [" in html

    data = json.loads(result.to_json())
    summary = data["summary"]
    assert summary["iqm_return"] == pytest.approx(result.iqm_return)
    assert (summary["mean_return_ci_low"], summary["mean_return_ci_high"]) == (mean_ci.low, mean_ci.high)
    assert summary["iqm_return_ci_low"] == result.iqm_return_ci.low
    assert data["bootstrap"] == {
        "confidence_level": 0.95,
        "method": "percentile",
        "resamples": 9999,
        "seed": 0,
    }
    assert data["target_ci"] is None and data["target_met"] is None


def test_one_episode_says_why_there_is_no_interval():
    result = _result([42.0], num_envs=1)
    with pytest.raises(ValueError, match="needs at least 2 values, got 1"):
        _ = result.mean_return_ci
    assert "42.00  (no CI: needs at least 2 episodes)" in str(result)
    data = json.loads(result.to_json())
    assert data["summary"]["mean_return_ci_low"] is None and data["summary"]["iqm_return"] == 42.0
    assert data["bootstrap"]["note"] == "no confidence interval: it needs at least 2 episodes"


def test_plot_shows_the_intervals():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    result = _result(RETURNS)
    figure = result.plot()
    left, right = figure.axes
    assert "mean 95% CI" in [text.get_text() for text in left.get_legend().get_texts()]
    labels = [text.get_text() for text in right.get_legend().get_texts()]
    assert labels == ["mean", "mean 95% CI", "IQM", "IQM 95% CI"]
    plt.close(figure)


def test_a_non_finite_return_says_why_there_is_no_interval():
    result = _result([1.0, float("inf"), 3.0])
    assert result.no_interval_reason == "needs finite returns (one is NaN or infinite)"
    assert "(no CI: needs finite returns (one is NaN or infinite))" in str(result)
    assert np.isnan(result.iqm_return)
    note = result.to_dict()["bootstrap"]["note"]
    assert note == "no confidence interval: it needs finite returns (one is NaN or infinite)"
    with pytest.raises(ValueError, match="finite"):
        _ = result.mean_return_ci
