"""Interval estimates of episode returns: the interquartile mean, percentile-bootstrap confidence
intervals and the probability of improvement, as the rliable library defines them.

The IQM and the percentile bootstrap are computed here, the same way as
``scipy.stats.trim_mean(values, 0.25)`` and ``scipy.stats.bootstrap(..., method="percentile")``
(the same resample draws, partition, means and linear quantiles as scipy 1.17, so the same floats;
the tests compare them with scipy called directly). Every printed result shows both, and importing
``scipy.stats`` would add most of a second to every command. The probability of improvement
(Mann-Whitney U) and the target-CI planner's chi-square quantile come from scipy, imported
when first used. The conventions: a 95 % percentile interval (rliable's default method), a
stated number of resamples and an explicit seed, so the same returns always give the same
interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

__all__ = [
    "DEFAULT_BOOTSTRAP_SEED",
    "DEFAULT_CONFIDENCE_LEVEL",
    "DEFAULT_RESAMPLES",
    "ConfidenceInterval",
    "bootstrap_interval",
    "interquartile_mean",
    "probability_of_improvement",
]

DEFAULT_RESAMPLES = 9999  # scipy.stats.bootstrap's own default
DEFAULT_BOOTSTRAP_SEED = 0
DEFAULT_CONFIDENCE_LEVEL = 0.95
_METHOD = "percentile"  # rliable's default; also the only method exact on degenerate data
# Resampled values held in memory at once (scipy's ``batch``, whose draws this repeats): 16 MB.
_BATCH_VALUES = 2_000_000

Statistic = Literal["mean", "iqm"]


@dataclass(frozen=True, slots=True)
class ConfidenceInterval:
    """A point estimate and its bootstrap confidence interval ``[low, high]``.

    ``resamples`` bootstrap resamples drawn with ``numpy.random.default_rng(seed)``; ``method``
    is scipy's name of the interval (``"percentile"``). The same data, statistic, resamples
    and seed give the same interval.
    """

    estimate: float
    low: float
    high: float
    level: float
    resamples: int
    seed: int
    method: str = _METHOD

    @property
    def half_width(self) -> float:
        """Half the interval's width, the ``±`` of ``estimate``."""
        return (self.high - self.low) / 2

    def to_dict(self) -> dict[str, Any]:
        """The interval as a JSON-ready dict."""
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.estimate:,.2f} [{self.low:,.2f}, {self.high:,.2f}]"


def _values(values: Sequence[float] | np.ndarray, what: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{what} must be a flat sequence of numbers, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{what} must all be finite numbers (no NaN or inf)")
    return array


def _need_two(count: int, what: str) -> None:
    if count < 2:
        raise ValueError(
            f"a bootstrap confidence interval needs at least 2 {what}, got {count}; "
            "evaluate more episodes (episodes >= 2)"
        )


def interquartile_mean(values: Sequence[float] | np.ndarray) -> float:
    """The interquartile mean (IQM): the mean of the middle 50 % of ``values``.

    ``scipy.stats.trim_mean(values, 0.25)``, as rliable defines it (25 % cut from each end).
    NaN for no values.
    """
    array = _values(values, "values")
    if array.size == 0:
        return math.nan
    return float(_iqm(array))


def _iqm(sample: np.ndarray, axis: int = -1) -> np.ndarray:
    """``scipy.stats.trim_mean(sample, 0.25, axis=axis)``, computed the same way (the same
    partition and the same mean, so the same floats)."""
    count = sample.shape[axis]
    cut = count // 4  # int(0.25 * count)
    kept = np.partition(sample, (cut, count - cut - 1), axis=axis)
    middle = [slice(None)] * kept.ndim
    middle[axis] = slice(cut, count - cut)
    return np.mean(kept[tuple(middle)], axis=axis)


def _batch(count: int) -> int:
    return max(1, _BATCH_VALUES // max(count, 1))


def _check_settings(resamples: int, seed: int, level: float) -> None:
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        raise ValueError(f"resamples must be an int >= 1, got {resamples!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"the bootstrap seed must be an int >= 0, got {seed!r}")
    if not (isinstance(level, float) and 0.0 < level < 1.0):
        raise ValueError(f"the confidence level must be a float in (0, 1), got {level!r}")


def bootstrap_interval(
    values: Sequence[float] | np.ndarray,
    statistic: Statistic = "mean",
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
    level: float = DEFAULT_CONFIDENCE_LEVEL,
) -> ConfidenceInterval:
    """The ``statistic`` (``"mean"`` or ``"iqm"``) of ``values`` with its percentile-bootstrap
    confidence interval (what ``scipy.stats.bootstrap`` gives: ``resamples`` resamples, rng
    ``numpy.random.default_rng(seed)``).

    Values that are all equal give the degenerate interval ``[v, v]`` exactly (every resample
    is the same sample). Raises ``ValueError`` for fewer than 2 values or non-finite ones.
    """
    _check_settings(resamples, seed, level)
    array = _values(values, "values")
    _need_two(array.size, "values")
    function: Callable[..., Any]  # scipy calls it as function(sample, axis=...)
    if statistic == "mean":
        estimate, function = math.fsum(array) / array.size, np.mean
    elif statistic == "iqm":
        estimate, function = interquartile_mean(array), _iqm
    else:
        raise ValueError(f"statistic must be 'mean' or 'iqm', got {statistic!r}")
    if np.all(array == array[0]):
        return ConfidenceInterval(estimate, estimate, estimate, level, resamples, seed)
    low, high = _percentile_interval(array, function, resamples, level, np.random.default_rng(seed))
    return ConfidenceInterval(estimate, low, high, level, resamples, seed)


def _percentile_interval(
    array: np.ndarray, function: Callable[..., Any], resamples: int, level: float, rng: np.random.Generator
) -> tuple[float, float]:
    """The percentile bootstrap interval of ``function`` over ``array``, as scipy computes it:
    resamples drawn ``rng.integers(0, n, (batch, n))`` batch by batch, the statistic of each
    along the last axis, then the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of
    that distribution (Hyndman and Fan's type 7, linear interpolation)."""
    count = array.size
    batch = _batch(count)
    statistics = [
        function(array[rng.integers(0, count, (min(batch, resamples - start), count))], axis=-1)
        for start in range(0, resamples, batch)
    ]
    distribution = np.sort(np.concatenate(statistics))
    alpha = (1 - level) / 2
    return _linear_quantile(distribution, alpha), _linear_quantile(distribution, 1 - alpha)


def _linear_quantile(ordered: np.ndarray, probability: float) -> float:
    """The type-7 quantile of sorted ``ordered`` in scipy.stats.quantile's arithmetic: position
    ``p * n + (1 - p)`` (1-based), interpolated between its two neighbours."""
    count = ordered.size
    position = probability * count + (1 - probability)
    upper = position // 1
    fraction = position % 1
    below = int(min(max(upper - 1, 0), count - 1))
    above = int(min(max(upper, 0), count - 1))
    if upper - 1 < 0:
        fraction = 0.0
    return float((1 - fraction) * ordered[below] + fraction * ordered[above])


def probability_of_improvement(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """``P(X_a > X_b) + 0.5 * P(X_a = X_b)`` for a return ``X_a`` drawn from ``a`` and ``X_b``
    from ``b``: the Mann-Whitney U statistic of ``a`` against ``b`` divided by
    ``len(a) * len(b)``, as rliable's ``probability_of_improvement`` computes it. 0.5 means
    neither policy tends to score higher.
    """
    x, y = _values(a, "returns of the first policy"), _values(b, "returns of the second policy")
    if x.size == 0 or y.size == 0:
        raise ValueError("the probability of improvement needs at least one return of each policy")
    from scipy import stats

    return float(stats.mannwhitneyu(x, y).statistic / (x.size * y.size))
