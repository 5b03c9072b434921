"""Measure the bias of ``evaluate(..., target_ci=)``'s stopping rule on synthetic returns.

The rule (rlmesh_gym/evaluation/_precision.py): after each round of ``ROUND`` episodes, stop when
the 95 % percentile-bootstrap CI of the mean has half-width <= ``TARGET``, or when another round
would pass ``CAP``. This script applies that rule to returns drawn from a skewed (exponential)
and a symmetric (normal) distribution, both with mean 1, and prints the mean of the stopped
means over ``REPETITIONS`` runs with its standard error, and the episodes used. The numbers in
docs/evaluation.md ("How many episodes?") come from it. It takes a few minutes (999 bootstrap
resamples per check instead of the result's 9,999, to keep it short).

    python scripts/target_ci_bias.py
"""

from __future__ import annotations

import numpy as np

from rlmesh_gym.evaluation import bootstrap_interval

ROUND, TARGET, CAP, REPETITIONS, RESAMPLES = 8, 0.25, 800, 400, 999


def stopped_mean(draw) -> tuple[float, int]:
    returns = draw(ROUND)
    while bootstrap_interval(returns, "mean", resamples=RESAMPLES).half_width > TARGET:
        if len(returns) + ROUND > CAP:
            break
        returns = np.concatenate([returns, draw(ROUND)])
    return float(returns.mean()), len(returns)


def main() -> None:
    rng = np.random.default_rng(0)
    distributions = {
        "exponential (mean 1, skewed)": lambda n: rng.exponential(1.0, n),
        "normal (mean 1, sd 1)": lambda n: rng.normal(1.0, 1.0, n),
    }
    for name, draw in distributions.items():
        runs = [stopped_mean(draw) for _ in range(REPETITIONS)]
        means = np.array([mean for mean, _ in runs])
        used = np.mean([count for _, count in runs])
        error = means.std() / np.sqrt(REPETITIONS)
        print(
            f"{name}: mean of the stopped means {means.mean():.4f} +- {error:.4f} "
            f"(true 1), {used:.1f} episodes on average"
        )


if __name__ == "__main__":
    main()
