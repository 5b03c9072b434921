"""Deterministic reset seeds: known-answer vectors (docs/design/runtime.md#reset-seeds), input checks."""

from __future__ import annotations

import re

import pytest

from rlmesh_gym.runtime import reset_seed
from rlmesh_gym.runtime.seeds import ResetSeeds

# (base_seed, session_id, route_id, reset_generation, env_index, h before masking, seed)
VECTORS = [
    (0, "", "", 0, 0, 0x1BD726E7A4E04031, 2006114935362306097),
    (1234, "session-1", "route-1", 0, 0, 0x76B03366EB9A1F4E, 8552392209508998990),
    (1234, "session-1", "route-1", 1, 0, 0xEAF21FFA31B4D101, 7706257071820558593),
    (-1, "s", "r", 3, 2, 0x28B652C7160E263D, 2933623222300452413),
    (2**63 - 1, "session-vec", "route-vec", 0, 3, 0xB10C03AF1DC46A07, 3534203858232568327),
    (-(2**63), "session-vec", "route-vec", 0, 0, 0x12DCD9F6B6FFCA4C, 1359200841214446156),
    (42, "sess-\u00e9", "route-a", 2**40 + 7, 7, 0x46ACD8C622D712BA, 5092683624148832954),
    (7, "session", "route", 5, 1, 0x22CF29A23C878C59, 2508269294245612633),
]


@pytest.mark.parametrize(("base", "session", "route", "generation", "index", "hashed", "seed"), VECTORS)
def test_known_answer_vectors(base, session, route, generation, index, hashed, seed) -> None:
    assert seed == hashed & 0x7FFFFFFFFFFFFFFF
    assert reset_seed(base, session, route, generation, index) == seed
    assert ResetSeeds(base, session, route).seeds(generation, [index]) == [seed]


def test_seeds_are_position_aligned_with_the_indices_given() -> None:
    seeds = ResetSeeds(1234, "session-1", "route-1")
    lanes = [3, 0, 2]
    assert seeds.seeds(4, lanes) == [reset_seed(1234, "session-1", "route-1", 4, lane) for lane in lanes]
    assert seeds.seeds(4, []) == []


def test_seed_is_a_plain_non_negative_int() -> None:
    seed = reset_seed(-5, "a", "b", 9, 1)
    assert type(seed) is int and 0 <= seed < 2**63


@pytest.mark.parametrize(
    ("args", "error", "text"),
    [
        (
            (2**63, "s", "r", 0, 0),
            ValueError,
            "base_seed must be a signed 64-bit integer; got 9223372036854775808",
        ),
        ((-(2**63) - 1, "s", "r", 0, 0), ValueError, "base_seed must be a signed 64-bit integer"),
        (
            (1.5, "s", "r", 0, 0),
            TypeError,
            "base_seed must be an int (a signed 64-bit integer); got float 1.5",
        ),
        ((True, "s", "r", 0, 0), TypeError, "base_seed must be an int"),
        ((1, 5, "r", 0, 0), TypeError, "session_id must be a str; got int 5"),
        ((1, "s", None, 0, 0), TypeError, "route_id must be a str; got NoneType None"),
        ((1, "s", "r", -1, 0), ValueError, "reset_generation must be in 0..2**64-1; got -1"),
        ((1, "s", "r", 2**64, 0), ValueError, "reset_generation must be in 0..2**64-1"),
        ((1, "s", "r", 0, -1), ValueError, "env_index must be in 0..2**64-1; got -1"),
        ((1, "s", "r", 0, "0"), TypeError, "env_index must be an int (in 0..2**64-1); got str '0'"),
    ],
)
def test_bad_inputs_are_refused_by_name(args, error, text) -> None:
    with pytest.raises(error, match=re.escape(text)):
        reset_seed(*args)


def test_driver_path_widens_negative_lane_indices_like_rust() -> None:
    # `index as usize` on -1 gives u64::MAX; the env then refuses the lane.
    seeds = ResetSeeds(7, "s", "r")
    assert seeds.seeds(1, [-1]) == seeds.seeds(1, [2**64 - 1])
