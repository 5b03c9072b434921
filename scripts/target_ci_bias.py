"""Compare rules for sizing an evaluation to a target CI half-width on skewed returns.

On returns drawn from an exponential distribution (mean 1, strongly skewed), with rounds of
``ROUND`` episodes and target ``TARGET``, it prints the mean over ``REPETITIONS`` runs of:

* ``sequential``: add rounds until the mean's 95 % CI half-width is at most the target, pooled
  (this package's rule before the two-stage one);
* ``two-stage, pilot pooled``: ``estimate_rounds`` on a pilot round, the pilot pooled in;
* ``two-stage``: ``evaluate(..., target_ci=)``'s rule: the mean of the estimate stage only.

The numbers in docs/evaluation.md ("How many episodes?") come from it. A normal-theory
half-width (1.96 s / sqrt(n)) stands in for the bootstrap interval to keep it fast.

    python scripts/target_ci_bias.py
"""

from __future__ import annotations

import numpy as np

from rlmesh_gym.evaluation._precision import estimate_rounds

ROUND, TARGET, CAP, REPETITIONS = 16, 0.35, 1600, 10_000


def sequential(draw) -> float:
    returns = draw(ROUND)
    while 1.96 * returns.std() / np.sqrt(len(returns)) > TARGET and len(returns) + ROUND <= CAP:
        returns = np.concatenate([returns, draw(ROUND)])
    return float(returns.mean())


def two_stage(draw, pooled: bool) -> float:
    pilot = draw(ROUND)
    estimate = draw(ROUND * estimate_rounds(pilot.tolist(), TARGET, ROUND, CAP))
    return float(np.concatenate([pilot, estimate]).mean() if pooled else estimate.mean())


def main() -> None:
    rng = np.random.default_rng(0)

    def draw(n: int) -> np.ndarray:
        return rng.exponential(1.0, n)

    rules = {
        "sequential": lambda: sequential(draw),
        "two-stage, pilot pooled": lambda: two_stage(draw, pooled=True),
        "two-stage": lambda: two_stage(draw, pooled=False),
    }
    for name, run in rules.items():
        means = np.array([run() for _ in range(REPETITIONS)])
        error = means.std() / np.sqrt(REPETITIONS)
        print(f"{name}: mean {means.mean():.4f} +- {error:.4f} (true 1)")


if __name__ == "__main__":
    main()
