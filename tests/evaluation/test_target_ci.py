"""``evaluate(..., target_ci=)``: whole rounds of per-lane quotas until the mean's CI is narrow
enough, on a synthetic env whose returns have a known spread; the overflow bookkeeping."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces

from rlmesh_gym.evaluation import EpisodeQuotas, bootstrap_interval, evaluate, lane_quotas
from rlmesh_gym.records import EpisodeRecord

SIGMA = 1.0


class NormalReturnEnv(gymnasium.Env):
    """One-step episodes whose return is drawn from N(0, SIGMA^2) with the env's seeded RNG."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action):
        return np.zeros(1, dtype=np.float32), float(self.np_random.normal(0.0, SIGMA)), True, False, {}


def _env(num_envs: int = 4):
    return gymnasium.vector.SyncVectorEnv(
        [NormalReturnEnv] * num_envs, autoreset_mode=gymnasium.vector.AutoresetMode.DISABLED
    )


def _first_per_lane(result, quotas):
    counts = [0] * len(quotas)
    kept = []
    for record in result.episodes:
        if counts[record.lane] < quotas[record.lane]:
            kept.append(record.episode_return)
            counts[record.lane] += 1
    return kept


def test_target_ci_stops_at_the_first_round_that_meets_the_target():
    target, round_size = 0.25, 8
    result = evaluate(_env(), "random", episodes=round_size, seed=1, progress=False, target_ci=target)
    used = len(result.episodes)
    assert used % round_size == 0 and result.episodes_per_lane == result.quotas
    assert result.quotas == tuple(q * used // round_size for q in lane_quotas(round_size, 4))
    assert result.target_ci == target and result.target_met is True and result.complete
    assert result.mean_return_ci.half_width <= target
    # One round fewer (each lane's first episodes) was not enough.
    fewer = [q * (used // round_size - 1) for q in lane_quotas(round_size, 4)]
    assert bootstrap_interval(_first_per_lane(result, fewer), "mean").half_width > target
    # About (1.96 sigma / target)^2 = 61.5 episodes for N(0, 1) returns.
    assert 40 <= used <= 96
    assert f"{used} ({used // round_size} round(s) of 8; target CI half-width 0.25 met)" in str(result)
    # Reproducible: the same seed stops after the same episodes.
    again = evaluate(_env(), "random", episodes=round_size, seed=1, progress=False, target_ci=target)
    assert again.returns == result.returns


def test_the_cap_stops_the_rounds_without_exceeding_it():
    result = evaluate(_env(2), "random", episodes=4, seed=0, progress=False, target_ci=0.01, max_episodes=14)
    assert len(result.episodes) == 12  # three whole rounds; a fourth would pass 14
    assert result.target_met is False and result.to_dict()["target_met"] is False
    assert "not met (episode cap)" in str(result)


def test_a_target_already_met_needs_one_round():
    result = evaluate(_env(2), "random", episodes=6, seed=0, progress=False, target_ci=100.0)
    assert len(result.episodes) == 6 and result.target_met is True


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"target_ci": 0.0}, "target_ci must be a positive number"),
        ({"target_ci": -1.0}, "target_ci must be a positive number"),
        ({"target_ci": "wide"}, "target_ci must be a positive number"),
        ({"target_ci": 1.0, "max_episodes": 3}, r"max_episodes must be an int >= episodes \(4"),
        ({"max_episodes": 40}, "max_episodes applies only with target_ci"),
    ],
)
def test_bad_target_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        evaluate(_env(2), "random", episodes=4, seed=0, progress=False, **kwargs)


def _record(lane: int, ret: float) -> EpisodeRecord:
    return EpisodeRecord(lane, f"{lane}-{ret}", None, ret, 1, True, False, 0, None)


def test_a_new_round_counts_the_episodes_a_lane_finished_ahead_first():
    quotas = EpisodeQuotas((1, 1), keep_overflow=True)
    assert quotas.offer(_record(0, 1.0))
    assert not quotas.offer(_record(0, 2.0))  # lane 0 runs ahead while lane 1 is still going
    assert not quotas.offer(_record(0, 3.0))
    assert not quotas.offer(_record(0, 4.0))
    assert quotas.offer(_record(1, 10.0)) and quotas.met
    counted = quotas.add_round((1, 1))
    assert [r.episode_return for r in counted] == [2.0]  # its second episode, not its fourth
    assert not quotas.met and quotas.counts == (2, 1)
    assert quotas.offer(_record(1, 11.0)) and quotas.met
    assert [r.episode_return for r in quotas.add_round((1, 1))] == [3.0]
    assert [r.episode_return for r in quotas.records] == [1.0, 10.0, 2.0, 11.0, 3.0]


def test_add_round_needs_kept_overflow():
    with pytest.raises(RuntimeError, match="keep_overflow"):
        EpisodeQuotas((1,)).add_round((1,))
