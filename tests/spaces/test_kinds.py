"""The kind table: one handler per SpaceSpec arm, shared by the codec and the policies."""

from __future__ import annotations

import pytest

from rlmesh_gym.proto import spaces_pb2
from rlmesh_gym.spaces.codec import SpaceCodec
from rlmesh_gym.spaces.kinds import KINDS, RAW_KINDS, describe_space, kind_of


def test_every_spacespec_arm_has_exactly_one_kind():
    arms = [field.name for field in spaces_pb2.SpaceSpec.DESCRIPTOR.oneofs_by_name["spec"].fields]
    assert sorted(KINDS) == sorted(arms)
    assert RAW_KINDS == {"box", "discrete", "multi_binary", "multi_discrete"}


@pytest.mark.parametrize(
    ("spec", "description", "raw"),
    [
        (
            spaces_pb2.SpaceSpec(
                dtype=spaces_pb2.D_TYPE_INT64, discrete=spaces_pb2.DiscreteSpec(n=3, start=1)
            ),
            "Discrete(3, start=1)",
            True,
        ),
        (
            spaces_pb2.SpaceSpec(
                dtype=spaces_pb2.D_TYPE_UINT8, text=spaces_pb2.TextSpec(min_length=1, max_length=4)
            ),
            "Text(1, 4)",
            False,
        ),
    ],
)
def test_the_codec_and_the_description_read_the_same_kind(spec, description, raw):
    codec = SpaceCodec(spec)
    assert codec.handler is kind_of(spec) is KINDS[spec.WhichOneof("spec")]
    assert codec.raw is raw
    assert describe_space(spec) == description


def test_a_spec_without_a_kind_is_refused_by_name_and_described_as_such():
    with pytest.raises(ValueError, match="SpaceSpec has no kind set; expected one of Box, Discrete"):
        kind_of(spaces_pb2.SpaceSpec())
    assert describe_space(spaces_pb2.SpaceSpec()) == "SpaceSpec(no kind set)"
