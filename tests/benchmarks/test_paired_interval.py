"""``benchmarks/_paired.py``: the median's order-statistic interval covers what the binomial
distribution says, is the narrowest that does, and a goal is judged against the whole interval."""

from __future__ import annotations

import random
import sys
from math import comb
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from _paired import interval_depth, judge, median_interval  # noqa: E402


def _coverage(n: int, depth: int) -> float:
    """P(the true median lies between sorted[depth] and sorted[n - 1 - depth]) for n runs."""
    return 1.0 - 2 * sum(comb(n, k) for k in range(depth + 1)) / 2**n


@pytest.mark.parametrize(("n", "depth"), [(6, 0), (7, 0), (11, 1), (15, 3), (21, 5)])
def test_the_depth_is_the_deepest_that_still_covers_95_percent(n, depth):
    assert interval_depth(n) == (depth, round(_coverage(n, depth), 3))
    assert _coverage(n, depth) >= 0.95 > _coverage(n, depth + 1)


def test_too_few_runs_give_the_whole_range_and_say_how_little_it_covers():
    assert median_interval([1.2, 0.8, 1.0]) == (0.8, 1.2, 0.75)
    assert median_interval([1.0]) == (1.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="at least one value"):
        median_interval([])


def test_the_interval_is_taken_from_the_sorted_runs():
    runs = [0.91, 1.08, 0.97, 1.20, 1.01, 0.85, 1.03, 0.99, 1.12, 0.94, 1.05, 1.00, 0.89, 1.15, 0.96]
    ordered = sorted(runs)
    assert median_interval(runs) == (ordered[3], ordered[11], 0.965)


def test_the_interval_covers_a_known_median_about_as_often_as_it_says():
    generator = random.Random(7)
    trials, hits = 4000, 0
    for _ in range(trials):
        low, high, _ = median_interval([generator.lognormvariate(0.0, 0.2) for _ in range(15)])
        hits += low <= 1.0 <= high  # the lognormal's median is exp(0) = 1
    assert abs(hits / trials - 0.965) < 0.015


def test_a_goal_is_met_or_missed_only_by_the_whole_interval():
    assert judge((1.00, 1.08), 1.00) == "met"
    assert judge((0.90, 0.99), 1.00) == "not met"
    assert judge((0.99, 1.08), 1.00) == "undecided"
    assert judge((0.90, 1.00), 1.00) == "undecided"
