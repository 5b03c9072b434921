"""Lane-ordinal seeds: lane i's k-th reset gets the driver's seed of generation k, and with
``first_lane`` the lanes are seeded as the lanes of a wider vector env (a Ray shard's slice)."""

from __future__ import annotations

import asyncio

import pytest

from rlmesh_gym.evaluation._lane_seeds import lane_ordinal_seeds
from rlmesh_gym.runtime.seeds import reset_seed


class _SeedTaker:
    """An array-form env that only keeps the seeds it was reset with."""

    contract = None

    def __init__(self) -> None:
        self.resets: list[tuple[list[int], list[int]]] = []

    async def reset_arrays(self, env_indices, seeds, options=None):
        self.resets.append((list(env_indices), list(seeds)))

    async def step_arrays(self, actions):  # pragma: no cover - never stepped here
        raise AssertionError("not stepped")


def _reset(env, indices, seeds):
    asyncio.run(env.reset_arrays(indices, seeds))


def test_first_lane_seeds_each_lane_as_the_same_lane_of_the_wider_env():
    inner = _SeedTaker()
    shard = lane_ordinal_seeds(inner, 2, 7, "eval-X", "lanes-4", first_lane=2)
    _reset(shard, [], [1, 1])  # the cold reset: the driver's own seeds are replaced
    _reset(shard, [1], [1])  # lane 1 (global lane 3) again: its episode 1
    assert inner.resets == [
        ([], [reset_seed(7, "eval-X", "lanes-4", 0, 2), reset_seed(7, "eval-X", "lanes-4", 0, 3)]),
        ([1], [reset_seed(7, "eval-X", "lanes-4", 1, 3)]),
    ]


def test_without_first_lane_the_lanes_are_numbered_from_zero_and_unseeded_resets_stay_unseeded():
    inner = _SeedTaker()
    env = lane_ordinal_seeds(inner, 2, 7, "s", "r")
    _reset(env, [0, 1], [5, 5])
    _reset(env, [0], [])  # no seeds asked for: none given
    assert inner.resets == [
        ([0, 1], [reset_seed(7, "s", "r", 0, 0), reset_seed(7, "s", "r", 0, 1)]),
        ([0], []),
    ]


@pytest.mark.parametrize("first_lane", [-1, True, 1.0])
def test_a_bad_first_lane_is_refused(first_lane):
    with pytest.raises(ValueError, match="first_lane must be an int >= 0"):
        lane_ordinal_seeds(_SeedTaker(), 2, 7, "s", "r", first_lane=first_lane)
