"""MetaMap conversion: known answers (docs/design/wire.md#meta-value), decoding, errors upstream lacks."""

from __future__ import annotations

import enum
import math
from collections import namedtuple

import numpy as np
import pytest

from rlmesh_gym.proto import spaces_pb2
from rlmesh_gym.spaces import MetaConversionError, from_meta_map, to_meta_map
from rlmesh_gym.spaces.meta import from_meta_value, to_meta_value

# (key, Python value, the complete MetaMap entry b3 sent, what decoding gives back).
ENTRY_ROWS = [
    ("int", 7, "0a090a03696e7412020807", 7),
    ("neg", -3, "0a120a036e6567120b08fdffffffffffffffff01", -3),
    ("big", 2**53 + 1, "0a100a036269671209088180808080808010", 2**53 + 1),
    ("float", 0.25, "0a120a05666c6f6174120911000000000000d03f", 0.25),
    ("bool", True, "0a0a0a04626f6f6c12022001", True),
    ("str", "hi", "0a0b0a0373747212041a026869", "hi"),
    ("bytes", b"\x00\xff", "0a0d0a05627974657312042a0200ff", b"\x00\xff"),
    ("none", None, "0a060a046e6f6e65", None),
    (
        "list",
        [1, 2.5, "x"],
        "0a1e0a046c697374121632140a0208010a091100000000000004400a031a0178",
        [1, 2.5, "x"],
    ),
    ("tuple", (1, 2), "0a130a057475706c65120a32080a0208010a020802", [1, 2]),
    ("dict", {"k": 1}, "0a130a0464696374120b3a090a070a016b12020801", {"k": 1}),
    ("np_i32", np.int32(5), "0a0c0a066e705f69333212020805", 5),
    ("np_f32", np.float32(1.5), "0a130a066e705f663332120911000000000000f83f", 1.5),
    ("np_bool", np.bool_(True), "0a0d0a076e705f626f6f6c12022001", True),
    ("np_arr_i", np.array([1, 2, 3]), "0a1a0a086e705f6172725f69120e320c0a0208010a0208020a020803", [1, 2, 3]),
    (
        "np_arr_f",
        np.array([[0.5, 1.0]], np.float32),
        "0a280a086e705f6172725f66121c321a0a1832160a0911000000000000e03f0a0911000000000000f03f",
        [[0.5, 1.0]],
    ),
    ("np_arr_b", np.array([True, False]), "0a160a086e705f6172725f62120a32080a0220010a022000", [True, False]),
]


@pytest.mark.parametrize(
    ("key", "value", "hex_entry", "decoded"), ENTRY_ROWS, ids=[row[0] for row in ENTRY_ROWS]
)
def test_meta_entries_match_b3_both_directions(key, value, hex_entry, decoded):
    b3_map = spaces_pb2.MetaMap.FromString(bytes.fromhex(hex_entry))
    ours = to_meta_map({key: value})
    assert ours == b3_map  # parsed equality: b3 omits a None value, protobuf writes an empty one
    result = from_meta_map(b3_map)
    assert result == {key: decoded}
    assert type(result[key]) is type(decoded)
    if value is not None:
        assert ours.SerializeToString(deterministic=True).hex() == hex_entry


def test_all_entries_in_one_map_round_trip():
    info = {key: value for key, value, _, _ in ENTRY_ROWS}
    expected = {key: decoded for key, _, _, decoded in ENTRY_ROWS}
    assert from_meta_map(spaces_pb2.MetaMap.FromString(to_meta_map(info).SerializeToString())) == expected


def test_decoding_rules():
    assert from_meta_value(to_meta_value(2.0)) == 2.0 and isinstance(
        from_meta_value(to_meta_value(2.0)), float
    )
    assert math.isnan(from_meta_value(to_meta_value(float("nan"))))
    assert from_meta_value(to_meta_value(-math.inf)) == -math.inf
    assert from_meta_value(spaces_pb2.MetaValue()) is None
    assert from_meta_value(to_meta_value(((1,), [2]))) == [[1], [2]]
    assert from_meta_value(to_meta_value(bytearray(b"ab"))) == b"ab"


class Mode(enum.Enum):
    NEXT_STEP = "NextStep"
    LEVEL = 3


class Named:
    name = "named-thing"


class Color(str, enum.Enum):
    RED = "red"


def test_normalization_follows_upstream_order():
    point = namedtuple("point", ["x", "y"])
    assert from_meta_value(to_meta_value(point(1, "a"))) == {"x": 1, "y": "a"}
    assert from_meta_value(to_meta_value(Mode.NEXT_STEP)) == "NextStep"
    assert from_meta_value(to_meta_value(Mode.LEVEL)) == 3
    assert from_meta_value(to_meta_value(Color.RED)) == "red"
    assert from_meta_value(to_meta_value(Named())) == "named-thing"
    assert from_meta_value(to_meta_value(np.str_("s"))) == "s"
    assert from_meta_value(to_meta_value(np.int64(2**62))) == 2**62
    assert to_meta_value(True).WhichOneof("kind") == "bool"  # bool is tested before int
    assert to_meta_value(False).SerializeToString().hex() == "2000"
    assert from_meta_map(to_meta_map(point(x=1, y=2))) == {"x": 1, "y": 2}


@pytest.mark.parametrize(
    ("info", "message"),
    [
        ({"big": 2**70}, r"infos\['big'\]: int 1180591620717411303424 is outside the int64 range"),
        (
            {"u64": np.uint64(2**64 - 1)},
            r"infos\['u64'\]: int 18446744073709551615 is outside the int64 range",
        ),
        (
            {"s": {1, 2}},
            r"infos\['s'\]: value of type set is not supported in rlmesh metadata; supported: None",
        ),
        (
            {"final_info": [{}, {}, {"x": object()}]},
            r"infos\['final_info'\]\[2\]\['x'\]: value of type object",
        ),
        ({"nested": {1: "a"}}, r"infos\['nested'\]: dict key 1 of type int is not a str"),
        ({3: "a"}, r"infos: dict key 3 of type int is not a str"),
        ({"arr": np.array([1 + 2j])}, r"infos\['arr'\]\[0\]: value of type complex"),
    ],
)
def test_unrepresentable_values_raise_naming_the_key_path(info, message):
    with pytest.raises(MetaConversionError, match=message):
        to_meta_map(info, name="infos")


def test_cycles_and_non_mappings_are_refused():
    looped: list = [1]
    looped.append(looped)
    with pytest.raises(MetaConversionError, match=r"meta\['l'\]\[1\]: the value contains itself"):
        to_meta_map({"l": looped})
    with pytest.raises(MetaConversionError, match=r"meta: expected a dict with str keys, got list"):
        to_meta_map([("a", 1)])
    assert issubclass(MetaConversionError, TypeError)


def test_shared_subobjects_are_not_cycles():
    shared = [1, 2]
    assert from_meta_map(to_meta_map({"a": shared, "b": {"c": shared, "d": shared}})) == {
        "a": [1, 2],
        "b": {"c": [1, 2], "d": [1, 2]},
    }


def test_decoded_maps_list_keys_in_sorted_order_at_every_depth():
    keys = ["zeta", "alpha", "mid", "beta", "omega", "a1", "a10", "a2"]
    info = {key: {inner: 1 for inner in reversed(keys)} for key in keys}
    decoded = from_meta_map(to_meta_map(info))
    assert list(decoded) == sorted(keys)
    assert all(list(value) == sorted(keys) for value in decoded.values())
    assert decoded == info
