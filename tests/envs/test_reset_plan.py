"""Reset planning on its own: every rule of plan_reset, with no env involved."""

from __future__ import annotations

import ast
import inspect

import pytest

from rlmesh_gym.envs import reset_plan
from rlmesh_gym.envs.reset_plan import EnvResetShape, InvalidReset, plan_reset

VECTOR = EnvResetShape(3, per_lane=True, disabled=True, mode_name="DISABLED", env_name="SyncVectorEnv")
NEXT_STEP = EnvResetShape(3, per_lane=True, disabled=False, mode_name="NEXT_STEP", env_name="X")
CUSTOM = EnvResetShape(3, per_lane=False, disabled=True, mode_name="DISABLED", env_name="CartPoleVectorEnv")
SINGLE = EnvResetShape(1, per_lane=True, disabled=True, mode_name="DISABLED", env_name="CartPoleEnv")


def test_the_module_needs_no_gymnasium():
    tree = ast.parse(inspect.getsource(reset_plan))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    imported |= {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert "gymnasium" not in imported


def test_whole_vector_resets():
    plan = plan_reset(VECTOR, [], [4, 5, 6], {"difficulty": 2})
    assert (plan.lanes, plan.lane_seeds, plan.seed, plan.options, plan.single_seed) == (
        [0, 1, 2],
        [4, 5, 6],
        [4, 5, 6],
        {"difficulty": 2},
        None,
    )
    unseeded = plan_reset(NEXT_STEP, [], [], None)
    assert (unseeded.lane_seeds, unseeded.seed, unseeded.options) == ([None] * 3, None, None)
    single = plan_reset(SINGLE, [], [9], None)
    assert (single.lanes, single.lane_seeds, single.seed) == ([0], [9], [9])
    custom = plan_reset(CUSTOM, [], [4, 5, 6], None)
    assert (custom.lane_seeds, custom.seed, custom.single_seed) == ([None] * 3, 4, 4)


def test_partial_resets_build_full_width_seeds_and_a_fresh_mask():
    options = {"level": 1}
    plan = plan_reset(VECTOR, [2], [], options)
    assert plan.lanes == [2] and plan.lane_seeds == [None] and plan.seed == [None, None, None]
    assert plan.options["reset_mask"].tolist() == [False, False, True] and plan.options["level"] == 1
    assert "reset_mask" not in options  # the caller's dict is never changed
    one_lane = plan_reset(SINGLE, [0], [3], None)
    assert one_lane.seed == [3] and one_lane.options["reset_mask"].tolist() == [True]


@pytest.mark.parametrize(
    ("shape", "indices", "seeds", "options", "message"),
    [
        (
            VECTOR,
            [],
            [1, -2, 3],
            None,
            r"seeds must be >= 0 \(gymnasium refuses negative seeds\), got \[-2\]",
        ),
        (VECTOR, [], [1], None, r"expected no seeds or one seed per lane \(3\), got 1 seeds"),
        (VECTOR, [], [], {"reset_mask": True}, r"options\['reset_mask'\] is reserved"),
        (
            NEXT_STEP,
            [1],
            [],
            None,
            r"partial reset \(env_indices=\[1\]\) needs DISABLED autoreset.*NEXT_STEP",
        ),
        (CUSTOM, [1], [], None, r"not supported for CartPoleVectorEnv"),
        (VECTOR, [3, -1], [], None, r"env_indices \[3, -1\] out of range; lanes are 0..2"),
        (VECTOR, [1, 1, 2], [], None, r"duplicate env_index \[1\]"),
        (VECTOR, [0, 1], [5], None, r"one seed per env_indices entry \(2\), got 1 seeds"),
    ],
)
def test_refused_resets_say_why(shape, indices, seeds, options, message):
    with pytest.raises(InvalidReset, match=message):
        plan_reset(shape, indices, seeds, options)
