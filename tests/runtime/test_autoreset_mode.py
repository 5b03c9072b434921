"""The one autoreset-mode type: its user spellings, its wire numbers and what it accepts."""

from __future__ import annotations

import enum

import pytest

from rlmesh_gym import envs, runtime
from rlmesh_gym.proto import env_pb2
from rlmesh_gym.runtime import AutoresetMode


def test_each_mode_has_its_spelling_and_wire_number():
    assert [(mode.name, mode.value, mode.wire) for mode in AutoresetMode] == [
        ("NEXT_STEP", "next_step", env_pb2.AUTORESET_MODE_NEXT_STEP),
        ("SAME_STEP", "same_step", env_pb2.AUTORESET_MODE_SAME_STEP),
        ("DISABLED", "disabled", env_pb2.AUTORESET_MODE_DISABLED),
    ]
    assert AutoresetMode.spellings() == ("next_step", "same_step", "disabled")
    assert [mode.observational for mode in AutoresetMode] == [True, True, False]


def test_envs_re_exports_the_same_type():
    assert envs.AutoresetMode is runtime.AutoresetMode is AutoresetMode


@pytest.mark.parametrize(
    ("spelling", "mode"),
    [
        ("next_step", AutoresetMode.NEXT_STEP),
        (" NEXT_STEP ", AutoresetMode.NEXT_STEP),
        ("next-step", AutoresetMode.NEXT_STEP),
        ("NextStep", AutoresetMode.NEXT_STEP),  # gymnasium's spelling
        ("Same_Step", AutoresetMode.SAME_STEP),
        ("DISABLED", AutoresetMode.DISABLED),
        (AutoresetMode.SAME_STEP, AutoresetMode.SAME_STEP),
    ],
)
def test_parse_accepts_every_spelling(spelling, mode):
    assert AutoresetMode.parse(spelling) is mode


def test_parse_accepts_an_enum_member_carrying_a_spelling():
    class Foreign(enum.Enum):  # as gymnasium.vector.AutoresetMode, without importing gymnasium
        SAME_STEP = "SameStep"

    assert AutoresetMode.parse(Foreign.SAME_STEP) is AutoresetMode.SAME_STEP


@pytest.mark.parametrize("value", ["sometimes", "", 1, None, "next step"])
def test_parse_refuses_anything_else_naming_the_choices(value):
    with pytest.raises(ValueError, match=r"unknown autoreset mode .*; expected 'next_step', 'same_step'"):
        AutoresetMode.parse(value)


def test_from_wire_reads_unspecified_as_disabled_and_refuses_unknown_numbers():
    assert AutoresetMode.from_wire(env_pb2.AUTORESET_MODE_UNSPECIFIED) is AutoresetMode.DISABLED
    for mode in AutoresetMode:
        assert AutoresetMode.from_wire(mode.wire) is mode
    with pytest.raises(ValueError, match="unknown autoreset mode 7 on the wire"):
        AutoresetMode.from_wire(7)
