"""``evaluate(..., target_ci=)``: add whole rounds of per-lane quotas until the mean's confidence
interval is as narrow as asked, or a cap on the episodes is reached.

The rule, checked each time every lane has met its quota (a round boundary): stop when the
95 % bootstrap interval of the mean return has half-width <= ``target``, or when one more round
would exceed ``max_episodes``; otherwise raise every lane's quota by its first-round quota.
This is Chow and Robbins' fixed-width sequential interval (Ann. Math. Statist. 36, 1965) on
whole rounds. What it can and cannot bias (exactly unbiased for symmetric returns, biased low by
O(1/n) on skewed ones) is in docs/evaluation.md ("How many episodes?").
"""

from __future__ import annotations

from rlmesh_gym.evaluation._quotas import EpisodeQuotas
from rlmesh_gym.evaluation._statistics import bootstrap_interval

__all__ = ["PrecisionTarget", "check_precision_arguments"]


def check_precision_arguments(target_ci: float | None, max_episodes: int | None, episodes: int) -> int | None:
    """Validate ``target_ci`` / ``max_episodes``; return the episode cap (``None`` without a target).

    The cap defaults to 100 rounds (``100 * episodes``).
    """
    if target_ci is None:
        if max_episodes is not None:
            raise ValueError("max_episodes applies only with target_ci (it caps the rounds target_ci adds)")
        return None
    if isinstance(target_ci, bool) or not isinstance(target_ci, (int, float)) or not target_ci > 0:
        raise ValueError(
            f"target_ci must be a positive number (the wanted half-width of the mean's 95% CI), "
            f"got {target_ci!r}"
        )
    if target_ci == float("inf"):
        raise ValueError("target_ci must be finite")
    if max_episodes is None:
        return 100 * episodes
    if isinstance(max_episodes, bool) or not isinstance(max_episodes, int) or max_episodes < episodes:
        raise ValueError(
            f"max_episodes must be an int >= episodes ({episodes}, one round), got {max_episodes!r}"
        )
    return max_episodes


class PrecisionTarget:
    """Decides at each round boundary whether to add another round (see the module docstring)."""

    __slots__ = ("target", "round_quotas", "max_episodes", "resamples", "seed")

    def __init__(
        self, target: float, round_quotas: tuple[int, ...], max_episodes: int, resamples: int, seed: int
    ) -> None:
        self.target = float(target)
        self.round_quotas = round_quotas
        self.max_episodes = max_episodes
        self.resamples = resamples
        self.seed = seed

    def reached(self, returns: list[float]) -> bool:
        """Whether the mean of ``returns`` is known to within ``target`` (needs 2 returns)."""
        if len(returns) < 2:
            return False
        interval = bootstrap_interval(returns, "mean", resamples=self.resamples, seed=self.seed)
        return interval.half_width <= self.target

    def wants_another_round(self, quotas: EpisodeQuotas) -> bool:
        """At a round boundary: whether to add a round to ``quotas`` (``False``: stop, the
        target is reached or the cap leaves no room for a whole round)."""
        counted = sum(quotas.quotas)
        if counted + sum(self.round_quotas) > self.max_episodes:
            return False
        if self.reached([record.episode_return for record in quotas.records]):
            return False
        return True
