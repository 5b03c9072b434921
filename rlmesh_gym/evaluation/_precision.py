"""``evaluate(..., target_ci=)``: a two-stage (Stein) evaluation that sizes its sample to a wanted
confidence-interval half-width without biasing the mean.

Stage 1, the pilot: one round of ``episodes`` (whole per-lane quotas). Its sample standard
deviation ``s`` gives a 90 % upper confidence bound ``s_u = s * sqrt((n0 - 1) / chi2_0.10(n0 - 1))``
on the returns' spread (the chi-square bound of a normal sample), and with it the episodes the
estimate needs: ``(z_0.975 * s_u / target)^2``, rounded up to whole rounds (at least one),
capped by ``max_episodes - episodes``.

Stage 2, the estimate: a fresh session of that many rounds. The mean, the intervals and
``target_met`` come from its episodes only; the pilot's are reported beside them
(``EvalResult.pilot_episodes``) but not pooled. The estimate's size depends on the pilot alone
and its episodes are independent of the pilot, so its mean is unbiased whatever the return
distribution (pooling the pilot would not be: on skewed returns a pilot that missed the rare
high returns is both low and narrow, so it would get a small estimate stage and a large weight).
Why, and how often the target is met, is in docs/evaluation.md ("How many episodes?").
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["SIGMA_BOUND_LEVEL", "check_precision_arguments", "estimate_rounds"]

SIGMA_BOUND_LEVEL = 0.90  # confidence of the pilot's upper bound on the returns' standard deviation
_Z = 1.959963984540054  # scipy.stats.norm.ppf(0.975): the 95 % interval's half-width in sigmas


def check_precision_arguments(target_ci: float | None, max_episodes: int | None, episodes: int) -> int | None:
    """Validate ``target_ci`` / ``max_episodes``; return the episode cap (``None`` without a target).

    The cap (pilot and estimate together) defaults to ``100 * episodes``; it must leave room for
    the pilot and one estimate round (``2 * episodes``). The pilot needs 2 episodes or more.
    """
    if target_ci is None:
        if max_episodes is not None:
            raise ValueError("max_episodes applies only with target_ci (it caps the episodes target_ci uses)")
        return None
    if isinstance(target_ci, bool) or not isinstance(target_ci, (int, float)) or not target_ci > 0:
        raise ValueError(
            f"target_ci must be a positive number (the wanted half-width of the mean's 95% CI), "
            f"got {target_ci!r}"
        )
    if target_ci == float("inf"):
        raise ValueError("target_ci must be finite")
    if episodes < 2:
        raise ValueError(
            f"target_ci needs episodes >= 2 (the pilot round estimates the returns' spread), got {episodes}"
        )
    if max_episodes is None:
        return 100 * episodes
    if isinstance(max_episodes, bool) or not isinstance(max_episodes, int) or max_episodes < 2 * episodes:
        raise ValueError(
            f"max_episodes must be an int >= 2 * episodes ({2 * episodes}: the pilot round and one "
            f"estimate round), got {max_episodes!r}"
        )
    return max_episodes


def estimate_rounds(pilot_returns: Sequence[float], target: float, round_size: int, max_episodes: int) -> int:
    """How many rounds of ``round_size`` episodes the estimate stage runs after this pilot.

    At least 1; at most what ``max_episodes`` leaves after the pilot (``round_size`` episodes).
    A pilot with a NaN or infinite return gives the most rounds the cap allows.
    """
    most = max((max_episodes - round_size) // round_size, 1)
    n0 = len(pilot_returns)
    if n0 < 2:
        raise ValueError(f"the pilot needs at least 2 returns to estimate their spread, got {n0}")
    if not all(map(math.isfinite, pilot_returns)):
        return most
    from scipy import stats

    mean = math.fsum(pilot_returns) / n0
    variance = math.fsum((value - mean) ** 2 for value in pilot_returns) / (n0 - 1)
    bound = variance * (n0 - 1) / float(stats.chi2.ppf(1 - SIGMA_BOUND_LEVEL, n0 - 1))
    needed = _Z * _Z * bound / (target * target)
    if needed > most * round_size:
        return most
    return max(math.ceil(needed / round_size), 1)
