"""space_spec / gym_space: known answers (docs/design/wire.md#space-spec), our deviations, the inverse."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.spaces import (
    Box,
    Dict,
    Discrete,
    Graph,
    MultiBinary,
    MultiDiscrete,
    OneOf,
    Sequence,
    Text,
    Tuple,
)

from rlmesh_gym.proto import spaces_pb2
from rlmesh_gym.spaces import UnrestrictedText, gym_space, space_spec

F32 = np.float32

# docs/design/wire.md#space-spec: the space and the SpaceSpec bytes a live b3 handshake carried.
SPEC_ROWS = [
    ("box_uniform", lambda: Box(-1, 1, (2,), F32), "0a010210065214121209000000000000f0bf11000000000000f03f"),
    (
        "box_elementwise",
        lambda: Box(np.array([-1, 0, 2], F32), np.array([1, 5, 3], F32)),
        "0a01031006523622340a18000000000000f0bf000000000000000000000000000000401218000000000000f03f"
        "00000000000014400000000000000840",
    ),
    ("box_unbounded_f64", lambda: Box(-np.inf, np.inf, (2,), np.float64), "0a0102100752020801"),
    (
        "box_half_infinite",
        lambda: Box(-np.inf, 1, (2,), F32),
        "0a010210065214121209000000000000f0ff11000000000000f03f",
    ),
    ("box_scalar", lambda: Box(0, 1, (), F32), "1006520b120911000000000000f03f"),
    ("box_uint8_image", lambda: Box(0, 255, (2, 2), np.uint8), "0a020202100252082a060a01001201ff"),
    (
        "box_int64",
        lambda: Box(0, 10, (2,), np.int64),
        "0a0102100452162a140a08000000000000000012080a00000000000000",
    ),
    (
        "box_int32_elementwise",
        lambda: Box(np.array([0, -5], np.int32), np.array([3, 5], np.int32), dtype=np.int32),
        "0a01021003521632140a0800000000fbffffff12080300000005000000",
    ),
    (
        "box_float16",
        lambda: Box(-1, 1, (2,), np.float16),
        "0a010210055214121209000000000000f0bf11000000000000f03f",
    ),
    ("box_bool", lambda: Box(0, 1, (3,), bool), "0a0103100152082a060a0100120101"),
    ("box_int8", lambda: Box(-100, 100, (2,), np.int8), "0a0102100852082a060a019c120164"),
    ("discrete", lambda: Discrete(3), "10045a020803"),
    ("discrete_start", lambda: Discrete(5, start=-2), "10045a0d080510feffffffffffffffff01"),
    ("discrete_int32", lambda: Discrete(4, dtype=np.int32), "10045a020804"),
    ("multi_binary_size", lambda: MultiBinary(4), "0a0104100262020804"),
    ("multi_binary_dims", lambda: MultiBinary([2, 3]), "0a0202031002620612040a020203"),
    ("multi_discrete_flat", lambda: MultiDiscrete([3, 4]), "0a010210046a060a040a020304"),
    (
        "multi_discrete_shaped",
        lambda: MultiDiscrete([[2, 3], [4, 5]]),
        "0a02020210046a0e120c0a040a0202030a040a020405",
    ),
    ("multi_discrete_int32", lambda: MultiDiscrete([3, 4], dtype=np.int32), "0a010210046a060a040a020304"),
    ("text_default", lambda: Text(8), "1002720408011008"),
    ("text_charset", lambda: Text(min_length=2, max_length=5, charset="ab "), "10027209080210051a03206162"),
    (
        "dict",
        lambda: Dict({"b": Discrete(3), "a": Box(-1, 1, (2,))}),
        "a2012b0a01610a0162121b0a010210065214121209000000000000f0bf11000000000000f03f120610045a020803",
    ),
    (
        "tuple",
        lambda: Tuple((Discrete(2), Box(0, 1, (1,)))),
        "aa011c0a0610045a0208020a120a01011006520b120911000000000000f03f",
    ),
    (
        "nested",
        lambda: Dict(
            {"pos": Box(-1, 1, (2,)), "inner": Tuple((Discrete(2), MultiBinary(3))), "txt": Text(5)}
        ),
        "a201500a05696e6e65720a03706f730a037478741216aa01130a0610045a0208020a090a0103100262020803121b0a0102"
        "10065214121209000000000000f0bf11000000000000f03f12081002720408011005",
    ),
]


@pytest.mark.parametrize(("label", "make", "hex_bytes"), SPEC_ROWS, ids=[row[0] for row in SPEC_ROWS])
def test_space_spec_matches_the_b3_bytes(label, make, hex_bytes):
    spec = space_spec(make())
    assert spec.SerializeToString(deterministic=True).hex() == hex_bytes
    assert spec == spaces_pb2.SpaceSpec.FromString(bytes.fromhex(hex_bytes))


@pytest.mark.parametrize(("label", "make", "hex_bytes"), SPEC_ROWS, ids=[row[0] for row in SPEC_ROWS])
def test_gym_space_inverts_space_spec(label, make, hex_bytes):
    spec = spaces_pb2.SpaceSpec.FromString(bytes.fromhex(hex_bytes))
    rebuilt = gym_space(spec)
    assert space_spec(rebuilt) == spec
    original = make()
    if not isinstance(original, (Discrete, MultiDiscrete)) or original.dtype == np.int64:
        assert rebuilt == original  # Discrete/MultiDiscrete come back int64 whatever gym dtype went in


def test_multi_discrete_start_is_refused_unless_dropping_is_requested():
    space = MultiDiscrete([3, 4], start=[1, 1])
    with pytest.raises(ValueError, match=r"space: MultiDiscrete start \[1, 1\] cannot be sent"):
        space_spec(space)
    with pytest.raises(ValueError, match=r"obs\['m'\]\[0\]: MultiDiscrete start"):
        space_spec(Dict({"m": Tuple((space,))}), name="obs")
    # Upstream drops the start, giving the same bytes as MultiDiscrete([3, 4]).
    dropped = space_spec(space, drop_multi_discrete_start=True)
    assert dropped.SerializeToString(deterministic=True).hex() == "0a010210046a060a040a020304"
    assert space_spec(MultiDiscrete([3, 4], start=[0, 0])) == dropped


class _NotASpace(gym.Space):
    pass


@pytest.mark.parametrize(
    ("space", "type_name"),
    [
        (Graph(node_space=Box(0, 1, (2,)), edge_space=None), "Graph"),
        (Sequence(Discrete(2)), "Sequence"),
        (OneOf((Discrete(2), Box(0, 1, (1,)))), "OneOf"),
        (_NotASpace(), "_NotASpace"),
    ],
)
def test_unsupported_spaces_raise_type_error_naming_the_space_and_supported_kinds(space, type_name):
    with pytest.raises(TypeError, match=rf"space: unsupported space .* of type {type_name}; .*Box, Discrete"):
        space_spec(space)
    with pytest.raises(TypeError, match=rf"obs\['x'\]\[1\]: unsupported space .* of type {type_name}"):
        space_spec(Dict({"x": Tuple((Discrete(2), space))}), name="obs")


def test_box_dtype_without_a_wire_dtype_is_refused():
    # Upstream maps unknown dtype names to UNSPECIFIED, which no peer can decode.
    with pytest.raises(
        TypeError, match=r"space: Box dtype float128 has no rlmesh wire dtype; use one of bool"
    ):
        space_spec(Box(0, 1, (2,), np.longdouble))


def test_non_str_dict_keys_are_refused():
    with pytest.raises(TypeError, match=r"space: Dict keys must be str .* got int key 1"):
        space_spec(Dict({1: Discrete(2)}))


def test_rank_3_multi_discrete_is_refused():
    with pytest.raises(TypeError, match=r"rank-3 nvec"):
        space_spec(MultiDiscrete(np.full((2, 2, 2), 3)))


def test_dict_keys_follow_byte_order_and_subclasses_are_dispatched_by_isinstance():
    class MyBox(Box):
        pass

    spec = space_spec(Dict({"é": Discrete(2), "z": Discrete(2), "Z": Discrete(2), "aa": MyBox(0, 1, (1,))}))
    assert list(spec.dict.keys) == ["Z", "aa", "z", "é"]
    assert spec.dict.spaces[1].WhichOneof("spec") == "box"


def test_text_charset_rules():
    assert space_spec(Text(4, charset="cba")).text.charset == "abc"
    assert (
        space_spec(
            Text(4, charset=frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
        ).text.charset
        == ""
    )
    assert space_spec(Text(4, charset="0123456789abcdef")).text.charset == "0123456789abcdef"
    # "" comes back as a Text of any characters that samples (and equals) the alphanumeric one.
    unrestricted = gym_space(spaces_pb2.SpaceSpec(text=spaces_pb2.TextSpec(min_length=1, max_length=3)))
    assert isinstance(unrestricted, UnrestrictedText) and unrestricted == Text(3)
    assert (
        "a b" in unrestricted
        and "a-b" in unrestricted
        and "" not in unrestricted
        and "abcd" not in unrestricted
    )
    assert all(set(unrestricted.sample()) <= set(Text(3).characters) for _ in range(20))
    assert space_spec(unrestricted) == space_spec(Text(3))
    restricted = gym_space(space_spec(Text(4, charset="ab")))
    assert type(restricted) is Text and "ab" in restricted and "a b" not in restricted


def test_float_bounds_use_bit_identity_like_upstream():
    # -0.0 and 0.0 differ bitwise, so the bounds are elementwise (verified against a live b3 server).
    spec = space_spec(Box(np.array([-0.0, 0.0], F32), np.array([1, 1], F32)))
    assert spec.box.WhichOneof("bounds") == "elementwise"
    assert (
        space_spec(Box(np.array([-np.inf, 0.0], F32), np.array([np.inf, 1.0], F32))).box.elementwise.high[0]
        == np.inf
    )


def test_zero_size_boxes():
    assert space_spec(Box(0, 1, (0,), F32)).box.unbounded
    assert space_spec(Box(0, 1, (0,), np.int32)).box.WhichOneof("bounds") == "typed_elementwise"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (spaces_pb2.SpaceSpec(), r"spec: SpaceSpec has no kind set"),
        (
            spaces_pb2.SpaceSpec(
                shape=[2], dtype=spaces_pb2.D_TYPE_BFLOAT16, box=spaces_pb2.BoxSpec(unbounded=True)
            ),
            r"spec: Box dtype bfloat16 has no numpy dtype",
        ),
        (
            spaces_pb2.SpaceSpec(shape=[2], box=spaces_pb2.BoxSpec(unbounded=True)),
            r"spec: Box dtype unspecified has no numpy dtype",
        ),
        (
            spaces_pb2.SpaceSpec(
                shape=[3],
                dtype=spaces_pb2.D_TYPE_FLOAT32,
                box=spaces_pb2.BoxSpec(elementwise=spaces_pb2.ElementwiseBounds(low=[0, 0], high=[1, 1])),
            ),
            r"elementwise bounds hold 2 low and 2 high values, expected numel\(shape\) = 3",
        ),
        (
            spaces_pb2.SpaceSpec(
                shape=[2],
                dtype=spaces_pb2.D_TYPE_INT32,
                box=spaces_pb2.BoxSpec(
                    typed_uniform=spaces_pb2.TypedUniformBounds(low=b"\x00", high=b"\x01")
                ),
            ),
            r"typed_uniform.low holds 1 bytes, expected 4",
        ),
        (
            spaces_pb2.SpaceSpec(dict=spaces_pb2.DictSpec(keys=["a", "b"], spaces=[spaces_pb2.SpaceSpec()])),
            r"DictSpec needs unique keys parallel to its spaces",
        ),
    ],
)
def test_gym_space_rejects_specs_it_cannot_represent(spec, message):
    with pytest.raises(ValueError, match=message):
        gym_space(spec)


def test_gym_space_accepts_every_bound_form_for_every_dtype():
    typed = spaces_pb2.SpaceSpec(
        shape=[2],
        dtype=spaces_pb2.D_TYPE_FLOAT32,
        box=spaces_pb2.BoxSpec(
            typed_elementwise=spaces_pb2.TypedElementwiseBounds(
                low=np.array([-1, -2], "<f4").tobytes(), high=np.array([1, 2], "<f4").tobytes()
            )
        ),
    )
    assert gym_space(typed) == Box(np.array([-1, -2], F32), np.array([1, 2], F32))
    uniform_int = spaces_pb2.SpaceSpec(
        shape=[2],
        dtype=spaces_pb2.D_TYPE_UINT8,
        box=spaces_pb2.BoxSpec(uniform=spaces_pb2.UniformBounds(low=0, high=9)),
    )
    assert gym_space(uniform_int) == Box(0, 9, (2,), np.uint8)
    unbounded_int = spaces_pb2.SpaceSpec(
        shape=[1], dtype=spaces_pb2.D_TYPE_INT8, box=spaces_pb2.BoxSpec(unbounded=True)
    )
    assert gym_space(unbounded_int) == Box(-128, 127, (1,), np.int8)


def test_importing_codec_and_meta_does_not_import_gymnasium_or_torch():
    code = (
        "import sys\n"
        "import rlmesh_gym.spaces, rlmesh_gym.spaces.codec, rlmesh_gym.spaces.meta\n"
        "from rlmesh_gym.spaces import SpaceCodec, encode_batch, to_meta_map\n"
        "assert 'gymnasium' not in sys.modules and 'torch' not in sys.modules, sorted(sys.modules)\n"
        "from rlmesh_gym.spaces import space_spec\n"
        "assert 'gymnasium' in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
