"""How sure a median of paired ratios is: its confidence interval, and a goal judged against it.

Wall-time ratios on this 2-core machine spread by 10-40 points between paired runs, so a median
a few points from its goal says little by itself. The interval is distribution-free: the
median's interval between two order statistics of the sorted runs, from the binomial
distribution of how many runs fall below the true median (no assumption about the spread).

>>> median_interval([0.9, 1.1, 1.0, 1.2, 0.8, 1.05, 0.95, 1.15, 0.85, 1.0, 1.1])
(0.85, 1.15, 0.988)
>>> judge((1.02, 1.10), 1.00), judge((0.90, 0.98), 1.00), judge((0.97, 1.04), 1.00)
('met', 'not met', 'undecided')
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

__all__ = ["CONFIDENCE", "interval_depth", "judge", "median_interval"]

CONFIDENCE = 0.95
"""The coverage a median's interval aims at (at least this, when the runs allow it)."""


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """``(low, high, coverage)``: the narrowest order-statistic interval around the median of
    ``values`` that covers the true median with probability at least ``confidence``.

    With too few values for that (fewer than 6 at 95 %), the interval is the lowest to the highest
    value and ``coverage`` says how much less it covers.
    """
    if not values:
        raise ValueError("median_interval needs at least one value")
    ordered = sorted(values)
    depth, coverage = interval_depth(len(ordered), confidence)
    return ordered[depth], ordered[len(ordered) - 1 - depth], coverage


def interval_depth(n: int, confidence: float = CONFIDENCE) -> tuple[int, float]:
    """``(depth, coverage)`` of the median's interval over ``n`` sorted runs: it spans
    ``sorted[depth]`` to ``sorted[n - 1 - depth]`` and covers the true median with probability
    ``coverage`` (rounded to 0.1 %)."""
    # The interval at depth d misses the median when d or fewer runs fall on one side of it:
    # probability 2 * P(Binomial(n, 1/2) <= d).
    miss = 2 * comb(n, 0) / 2**n
    depth = 0
    while depth + 1 < n - 1 - depth:
        wider_miss = miss + 2 * comb(n, depth + 1) / 2**n
        if 1.0 - wider_miss < confidence:
            break
        depth, miss = depth + 1, wider_miss
    return depth, round(1.0 - miss, 3)


def judge(interval: tuple[float, float], goal: float) -> str:
    """``"met"`` when the whole interval is at or above ``goal``, ``"not met"`` when it is all
    below, else ``"undecided"`` (the runs cannot tell which side the true median is on)."""
    low, high = interval
    if low >= goal:
        return "met"
    if high < goal:
        return "not met"
    return "undecided"
