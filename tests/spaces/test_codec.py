"""The message-bytes codec: docs/design/wire.md#known-answers, layouts, zero-copy, and every error path."""

from __future__ import annotations

import numpy as np
import pytest
from _space_values import assert_values_equal
from gymnasium.spaces import Box, Dict, Discrete, MultiBinary, MultiDiscrete, Text, Tuple

from rlmesh_gym.proto import spaces_pb2
from rlmesh_gym.spaces import CodecError, SpaceCodec, decode, decode_batch, encode, encode_batch, space_spec

F32 = np.float32
NESTED = Dict({"pos": Box(-1, 1, (2,)), "inner": Tuple((Discrete(2), MultiBinary(3))), "txt": Text(5)})

# Single values (num_envs = 1) captured from b3, and single-value actions (docs/design/wire.md#known-answers).
SINGLE_ROWS = [
    (Box(-5, 5, (2,), F32), [1.5, -2.0], "0000c03f000000c0"),
    (Box(-5, 5, (2,), F32), [0.0, 1.0], "000000000000803f"),
    (Box(-9, 9, (2, 2), F32), [[1, 2], [3, 4]], "0000803f000000400000404000008040"),
    (Box(np.array([-1, 0, 2], F32), np.array([1, 5, 3], F32)), [0.0, 2.5, 3.0], "000000000000204000004040"),
    (Box(0, 1, (), F32), 0.5, "0000003f"),
    (Box(-np.inf, np.inf, (2,), np.float64), [1.0, -0.5], "000000000000f03f000000000000e0bf"),
    (Box(-4, 4, (2,), np.float16), [0.5, -2.0], "003800c0"),
    (Box(0, 255, (2, 2), np.uint8), [[1, 2], [3, 255]], "010203ff"),
    (
        Box(np.array([0, -5], np.int32), np.array([3, 5], np.int32), dtype=np.int32),
        [3, -5],
        "03000000fbffffff",
    ),
    (Box(-100, 100, (2,), np.int8), [-1, 100], "ff64"),
    (Box(0, 1, (3,), bool), [True, False, True], "010001"),
    (Discrete(3), 2, "0200000000000000"),
    (Discrete(3), 1, "0100000000000000"),
    (Discrete(5, start=-2), -1, "ffffffffffffffff"),
    (MultiBinary(4), np.array([1, 0, 1, 1], np.int8), "01000101"),
    (MultiBinary([2, 3]), [[1, 0, 0], [0, 1, 1]], "010000000101"),
    (MultiDiscrete([3, 4]), [2, 3], "02000000000000000300000000000000"),
    (
        MultiDiscrete([[2, 3], [4, 5]]),
        [[1, 2], [3, 4]],
        "0100000000000000020000000000000003000000000000000400000000000000",
    ),
    (Text(8), "hi", "0a0422026869"),
    (
        Dict({"a": Box(-1, 1, (2,), F32), "b": Discrete(3)}),
        {"a": [0.5, -1.0], "b": 2},
        "0a1c321a0a0f0a0161120a0a080000003f000080bf0a070a016212021002",
    ),
    (Tuple((Discrete(2), Box(0, 1, (1,), F32))), (1, [0.25]), "0a0e2a0c0a0210010a060a040000803e"),
    (
        NESTED,
        {"pos": [0, 1], "inner": (1, [1, 0, 1]), "txt": "ok"},
        "0a3a32380a160a05696e6e6572120d2a0b0a0210010a051a030100010a110a03706f73120a0a08000000000000803f0a0b0a"
        "03747874120422026f6b",
    ),
    # Actions (client -> server and model -> runtime); the canonical (sorted) bytes.
    (
        Dict({"x": Discrete(4), "y": Box(-1, 1, (1,), F32)}),
        {"x": 3, "y": [0.5]},
        "0a1832160a070a0178120210030a0b0a017912060a040000003f",
    ),
    (Text(4), "go", "0a042202676f"),
    (Tuple((Discrete(4), MultiBinary(2))), (2, [1, 0]), "0a0c2a0a0a0210020a041a020100"),
]

# Batches of vector envs (docs/design/wire.md#batch-count), values in gymnasium batch_space layout.
BATCH_ROWS = [
    (Discrete(10), 3, np.array([0, 1, 2]), "000000000000000001000000000000000200000000000000"),
    (Discrete(10), 3, np.array([1, 1, 6]), "010000000000000001000000000000000600000000000000"),
    (
        Box(-10, 10, (2,), F32),
        3,
        np.array([[0, 0], [1, -1], [2, -2]], F32),
        "00000000000000000000803f000080bf00000040000000c0",
    ),
    (
        Dict({"a": Box(-10, 10, (2,), F32), "b": Discrete(10)}),
        3,
        {"a": np.array([[0, 0], [1, -1], [2, -2]], F32), "b": np.array([0, 1, 2])},
        "0a1c321a0a0f0a0161120a0a0800000000000000000a070a0162120210000a1c321a0a0f0a0161120a0a080000803f000080bf"
        "0a070a0162120210010a1c321a0a0f0a0161120a0a0800000040000000c00a070a016212021002",
    ),
    (Text(6), 3, ("a0", "ab1", "a2"), "0a04220261300a0522036162310a0422026132"),
]


def _parsed(space, data: bytes):
    """Composite payloads compared as parsed ValueLists (map entry order is free upstream)."""
    if space_spec(space).WhichOneof("spec") in ("text", "dict", "tuple"):
        return spaces_pb2.ValueList.FromString(data)
    return data


@pytest.mark.parametrize(
    ("space", "value", "hex_bytes"), SINGLE_ROWS, ids=[row[2][:16] for row in SINGLE_ROWS]
)
def test_single_value_known_answers_both_directions(space, value, hex_bytes):
    spec, data = space_spec(space), bytes.fromhex(hex_bytes)
    encoded = encode(value, spec)
    assert _parsed(space, encoded) == _parsed(space, data)
    assert encoded == data  # our map entries are sorted, which is the canonical form
    assert_values_equal(decode(data, spec), value)
    assert_values_equal(SpaceCodec(spec).decode_batch(data, 1), _as_batch_of_one(value))


def _as_batch_of_one(value):
    if isinstance(value, dict):
        return {key: _as_batch_of_one(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return tuple(_as_batch_of_one(item) for item in value)
    if isinstance(value, str):
        return (value,)
    return np.asarray(value)[None]


def test_b3_map_order_decodes_to_the_same_value():
    space = Dict({"x": Discrete(4), "y": Box(-1, 1, (1,), F32)})
    spec = space_spec(space)
    b3_bytes = bytes.fromhex(
        "0a1832160a0b0a017912060a040000803e0a070a017812021002"
    )  # model -> runtime, y first
    assert_values_equal(decode(b3_bytes, spec), {"x": 2, "y": [0.25]})
    assert encode({"x": 2, "y": [0.25]}, spec) == bytes.fromhex(
        "0a1832160a070a0178120210020a0b0a017912060a040000803e"
    )


@pytest.mark.parametrize(
    ("space", "n", "values", "hex_bytes"), BATCH_ROWS, ids=[row[3][:16] for row in BATCH_ROWS]
)
def test_batch_known_answers_both_directions(space, n, values, hex_bytes):
    spec, data = space_spec(space), bytes.fromhex(hex_bytes)
    encoded = encode_batch(values, spec, n)
    assert _parsed(space, encoded) == _parsed(space, data)
    assert encoded == data
    assert_values_equal(decode_batch(data, spec, n), values, strict_dtype=True)
    assert_values_equal(decode_batch(data, spec, None), values)  # n inferred from the payload


@pytest.mark.parametrize(
    ("space", "hex_bytes"),
    [
        (Text(8), "1a026869"),
        (
            Dict({"a": Box(-1, 1, (2,), F32), "b": Discrete(3)}),
            "321a0a0f0a0161120a0a080000003f000080bf0a070a016212021002",
        ),
    ],
    ids=["text_as_protobuf_value", "dict_without_value_list"],
)
def test_codec_a_forms_are_rejected(space, hex_bytes):
    with pytest.raises(CodecError, match=r"obs: expected a ValueList of 1 item\(s\), got 0"):
        decode(bytes.fromhex(hex_bytes), space_spec(space), name="obs")


def test_raw_decode_is_a_zero_copy_read_only_view():
    codec = SpaceCodec(space_spec(Box(0, 255, (84, 84, 3), np.uint8)), name="obs")
    data = np.random.default_rng(0).integers(0, 256, 8 * 84 * 84 * 3, dtype=np.uint8).tobytes()
    batch = codec.decode_batch(data, 8)
    assert batch.shape == (8, 84, 84, 3) and batch.dtype == np.uint8
    assert np.shares_memory(batch, np.frombuffer(data, np.uint8))
    assert batch.base is data and batch.tobytes() == data
    assert not batch.flags.writeable
    single = SpaceCodec(space_spec(Box(-1, 1, (4,), F32))).decode(np.arange(4, dtype=F32).tobytes())
    assert single.shape == (4,) and not single.flags.writeable


def test_raw_decode_reads_any_c_contiguous_buffer_as_its_bytes():
    codec = SpaceCodec(space_spec(Box(-9, 9, (2,), F32)), name="obs")
    values = np.array([[1.5, -2.0], [3.0, 4.0]], F32)
    data = values.tobytes()
    # A memoryview of 4-byte items: 4 items, but 16 bytes, i.e. two lanes.
    as_ints = memoryview(np.frombuffer(data, "<i4").copy())
    assert len(as_ints) == 4 and as_ints.nbytes == 16
    np.testing.assert_array_equal(codec.decode_batch(as_ints, 2), values)
    np.testing.assert_array_equal(codec.decode_batch(as_ints, None), values)  # n inferred from bytes
    buffer = bytearray(data)
    batch = codec.decode_batch(buffer, 2)
    assert np.shares_memory(batch, np.frombuffer(buffer, np.uint8)) and batch.flags.writeable  # zero-copy
    np.testing.assert_array_equal(codec.decode_batch(np.frombuffer(data, np.uint8).reshape(4, 4), 2), values)
    composite = SpaceCodec(space_spec(Tuple((Discrete(3),))), name="obs")
    assert composite.decode_batch(memoryview(bytearray(composite.encode((2,)))), 1)[0].tolist() == [2]


@pytest.mark.parametrize(
    ("data", "got"),
    [
        ("00000000", r"got str \(memoryview: a bytes-like object is required"),
        (memoryview(bytes(16))[::2], r"got memoryview \(memoryview: casts are restricted to C-contiguous"),
        (np.zeros((4, 2), F32, order="F"), r"got ndarray \(memoryview: casts are restricted to C-contiguous"),
        (12345678, r"got int"),
    ],
    ids=["str", "strided-memoryview", "fortran-array", "int"],
)
def test_non_buffer_payloads_raise_codec_error(data, got):
    for space in (Box(-9, 9, (2,), F32), Dict({"a": Discrete(2)})):
        with pytest.raises(
            CodecError,
            match=r"^obs: expected the payload as bytes or a C-contiguous bytes-like buffer .*" + got,
        ):
            SpaceCodec(space_spec(space), name="obs").decode_batch(data, 1)


def test_multi_binary_decode_reads_any_non_zero_byte_as_one():
    codec = SpaceCodec(space_spec(MultiBinary(3)), name="act")
    data = bytes([1, 0, 2, 0, 255, 1])
    batch = codec.decode_batch(data, 2)
    assert batch.dtype == np.uint8 and batch.tolist() == [[1, 0, 1], [0, 1, 1]]
    clean = bytes([1, 0, 1, 0, 0, 1])
    view = codec.decode_batch(clean, 2)
    assert view.base is clean and view.tolist() == [[1, 0, 1], [0, 0, 1]]  # 0/1 payloads stay zero-copy
    nested = SpaceCodec(space_spec(Tuple((MultiBinary(2),))), name="act")
    payload = spaces_pb2.ValueList()
    payload.items.add().tuple.items.add().multi = bytes([3, 0])
    assert nested.decode_batch(payload.SerializeToString(), 1)[0].tolist() == [[1, 0]]


def test_decoded_arrays_are_in_native_byte_order():
    for space in (Box(-9, 9, (2,), F32), Box(-9, 9, (2,), np.float64), Discrete(3), MultiDiscrete([2, 3])):
        codec = SpaceCodec(space_spec(space))
        assert codec.numpy_dtype.isnative
        assert codec.decode_batch(codec.encode(space.sample()), 1).dtype.isnative


def test_native_order_converts_big_endian_arrays_and_keeps_native_ones():
    from rlmesh_gym.spaces.codec import _native_order

    big = np.array([1.5, -2.0], ">f4")  # what a '<f4' wire view is on a big-endian host
    converted = _native_order(big)
    assert converted.dtype.isnative and converted.dtype == np.float32
    assert converted.tolist() == [1.5, -2.0]
    native = np.array([1.5], np.float32)
    assert _native_order(native) is native  # no copy (every wire array, on a little-endian host)
    torch = pytest.importorskip("torch")
    assert torch.from_numpy(_native_order(big)).tolist() == [1.5, -2.0]


def test_raw_encode_accepts_non_contiguous_input_and_writes_c_order():
    codec = SpaceCodec(space_spec(Box(-9, 9, (2, 3), F32)))
    values = np.arange(24, dtype=F32).reshape(3, 2, 4)[..., :3].transpose(0, 1, 2)[:, ::-1]
    assert not values.flags.c_contiguous
    assert codec.encode_batch(values, 3) == np.ascontiguousarray(values).tobytes()


def test_raw_encode_converts_exactly_representable_values():
    box = SpaceCodec(space_spec(Box(-9, 9, (2,), np.int32)))
    assert box.encode_batch(np.array([[1.0, -2.0]]), 1) == np.array([1, -2], "<i4").tobytes()
    assert box.encode_batch([[1, 2]], 1) == np.array([1, 2], "<i4").tobytes()
    flags = SpaceCodec(space_spec(Box(0, 1, (2,), bool)))
    assert flags.encode_batch(np.array([[1, 0]], np.int64), 1) == b"\x01\x00"
    floats = SpaceCodec(space_spec(Box(-1, 1, (2,), F32)))
    assert floats.encode_batch(np.array([[0.5, 1]], np.float64), 1) == np.array([0.5, 1], "<f4").tobytes()
    assert floats.encode_batch(np.array([[True, False]]), 1) == np.array([1, 0], "<f4").tobytes()


def test_discrete_and_multi_binary_use_their_wire_dtypes():
    discrete = SpaceCodec(space_spec(Discrete(4, dtype=np.int32)))
    assert discrete.numpy_dtype == np.dtype("<i8") and discrete.shape == () and discrete.kind == "discrete"
    assert discrete.decode_batch(discrete.encode_batch(np.array([3, 1], np.int32), 2), 2).dtype == np.int64
    binary = SpaceCodec(space_spec(MultiBinary(3)))
    assert binary.numpy_dtype == np.uint8 and binary.shape == (3,) and binary.lane_nbytes == 3
    assert binary.decode(binary.encode(MultiBinary(3).sample())).dtype == np.uint8


def test_single_values_have_gymnasium_shapes():
    assert SpaceCodec(space_spec(Box(0, 1, (), F32))).decode(b"\x00\x00\x00\x3f").shape == ()
    value = SpaceCodec(space_spec(Discrete(3))).decode(bytes.fromhex("0200000000000000"))
    assert value == 2 and isinstance(value, np.int64)


def test_codec_attributes_for_composites():
    codec = SpaceCodec(space_spec(NESTED), name="obs")
    assert codec.kind == "dict" and codec.keys == ("inner", "pos", "txt") and codec.numpy_dtype is None
    assert [child.name for child in codec.children] == ["obs['inner']", "obs['pos']", "obs['txt']"]
    assert codec.children[0].children[1].name == "obs['inner'][1]"
    assert codec.children[1].numpy_dtype == np.dtype("<f4") and codec.children[1].shape == (2,)


def _bf16_spec(shape):
    return spaces_pb2.SpaceSpec(
        shape=shape, dtype=spaces_pb2.D_TYPE_BFLOAT16, box=spaces_pb2.BoxSpec(unbounded=True)
    )


def test_bfloat16_is_float32_in_python_and_the_top_16_bits_on_the_wire():
    codec = SpaceCodec(_bf16_spec([3]), name="obs")
    assert codec.numpy_dtype == np.dtype("<f4") and codec.lane_nbytes == 6
    values = np.array([[1.0, -2.5, 3.140625]], F32)
    data = codec.encode_batch(values, 1)
    assert data == bytes.fromhex("803f20c04940")
    assert_values_equal(codec.decode_batch(data, 1), values, strict_dtype=True)
    # Truncation, as upstream: 1 + 2**-10 keeps only the top 16 bits, i.e. 1.0.
    assert codec.encode_batch(np.array([[1 + 2**-10, 0, 0]], F32), 1)[:2] == bytes.fromhex("803f")
    nested = SpaceCodec(spaces_pb2.SpaceSpec(tuple=spaces_pb2.TupleSpec(spaces=[_bf16_spec([2])])))
    assert_values_equal(
        nested.decode(nested.encode((np.array([0.5, -1.0], F32),))), (np.array([0.5, -1.0], F32),)
    )


def test_module_functions_cache_compiled_codecs():
    spec = space_spec(Box(-1, 1, (2,), F32))
    from rlmesh_gym.spaces import codec as codec_module

    first = codec_module._codec(spec, "obs")
    assert codec_module._codec(space_spec(Box(-1, 1, (2,), F32)), "obs") is first
    assert codec_module._codec(first, "ignored") is first
    assert encode_batch(np.zeros((2, 2), F32), first, 2) == bytes(16)


# ---------------------------------------------------------------------------- bad payloads


def _codec(space, name="obs"):
    return SpaceCodec(space_spec(space), name=name)


def _value_list(*nodes: spaces_pb2.SpaceValueNode) -> bytes:
    return spaces_pb2.ValueList(items=list(nodes)).SerializeToString()


@pytest.mark.parametrize(
    ("space", "data", "n", "message"),
    [
        (
            Box(-1, 1, (2,), F32),
            bytes(7),
            None,
            r"obs: payload length 7 is not a multiple of 8 bytes per value",
        ),
        (
            Box(-1, 1, (2,), F32),
            bytes(16),
            1,
            r"obs: expected 1 value\(s\) of 8 bytes per value .* = 8 bytes, got 16",
        ),
        (
            Discrete(3),
            bytes(4),
            1,
            r"obs: expected 1 value\(s\) of 8 bytes per value \(discrete \(\) int64\)",
        ),
        (Box(-1, 1, (2,), F32), bytes(8), -1, r"obs: the batch size n must be an int >= 0, got -1"),
        (Box(-1, 1, (0,), F32), b"", None, r"obs: cannot infer the batch size of a zero-size space; pass n"),
        (Text(4), b"\xff", 1, r"obs: payload is not a valid ValueList message \(DecodeError"),
        (Text(4), bytes.fromhex("0a04220268ff"), 1, r"obs: payload is not a valid ValueList message .*UTF-8"),
        (Text(4), bytes.fromhex("0a0422026869"), 2, r"obs: expected a ValueList of 2 item\(s\), got 1"),
        (
            Text(4),
            _value_list(spaces_pb2.SpaceValueNode(discrete=1)),
            1,
            r"obs \(lane 0\): expected a 'text' node for a text space, got 'discrete'",
        ),
        (
            Dict({"camera": Box(0, 255, (2,), np.uint8)}),
            _value_list(
                spaces_pb2.SpaceValueNode(
                    dict=spaces_pb2.ValueMap(entries={"camera": spaces_pb2.SpaceValueNode(multi=b"\x01\x02")})
                )
            ),
            1,
            r"obs\['camera'\] \(lane 0\): expected a 'tensor' node for a box space, got 'multi'",
        ),
        (
            Dict({"camera": Box(0, 255, (2,), np.uint8)}),
            _value_list(
                spaces_pb2.SpaceValueNode(
                    dict=spaces_pb2.ValueMap(entries={"camera": spaces_pb2.SpaceValueNode(tensor=b"\x01")})
                )
            ),
            1,
            r"obs\['camera'\] \(lane 0\): expected 2 bytes \(\(2,\) uint8\), got 1",
        ),
        (
            Dict({"a": Discrete(2), "b": Discrete(2)}),
            _value_list(
                spaces_pb2.SpaceValueNode(
                    dict=spaces_pb2.ValueMap(entries={"a": spaces_pb2.SpaceValueNode(discrete=1)})
                )
            ),
            1,
            r"obs \(lane 0\): missing key 'b'; the space has keys \['a', 'b'\], the payload has \['a'\]",
        ),
        (
            Tuple((Discrete(2), Discrete(3))),
            _value_list(
                spaces_pb2.SpaceValueNode(
                    tuple=spaces_pb2.ValueList(items=[spaces_pb2.SpaceValueNode(discrete=1)])
                ),
            ),
            1,
            r"obs \(lane 0\): expected a tuple of 2 element\(s\), got 1",
        ),
        (
            Tuple((Discrete(2), Tuple((Text(3),)))),
            _value_list(
                spaces_pb2.SpaceValueNode(
                    tuple=spaces_pb2.ValueList(
                        items=[
                            spaces_pb2.SpaceValueNode(discrete=1),
                            spaces_pb2.SpaceValueNode(
                                tuple=spaces_pb2.ValueList(items=[spaces_pb2.SpaceValueNode()])
                            ),
                        ]
                    )
                ),
            ),
            1,
            r"obs\[1\]\[0\] \(lane 0\): expected a 'text' node for a text space, got None",
        ),
    ],
)
def test_bad_payloads_raise_codec_error_naming_the_path(space, data, n, message):
    with pytest.raises(CodecError, match=message):
        _codec(space).decode_batch(data, n)


def test_extra_dict_keys_in_a_payload_are_ignored():
    data = _value_list(
        spaces_pb2.SpaceValueNode(
            dict=spaces_pb2.ValueMap(
                entries={
                    "a": spaces_pb2.SpaceValueNode(discrete=1),
                    "zz": spaces_pb2.SpaceValueNode(text="extra"),
                }
            )
        )
    )
    assert_values_equal(_codec(Dict({"a": Discrete(2)})).decode(data), {"a": 1})


def test_codec_error_is_a_value_error():
    assert issubclass(CodecError, ValueError)


# ---------------------------------------------------------------------------- bad values


@pytest.mark.parametrize(
    ("space", "values", "n", "message"),
    [
        (
            Box(-1, 1, (2,), F32),
            np.zeros((2, 3), F32),
            2,
            r"obs: expected a batch of shape \(2, 2\) \(n=2 lanes of \(2,\)\), got shape \(2, 3\)",
        ),
        (Box(-1, 1, (2,), F32), np.zeros((3, 2), F32), 2, r"obs: expected a batch of shape \(2, 2\)"),
        (
            Box(-1, 1, (2,), F32),
            [[1, 2], [3]],
            2,
            r"obs: expected an array-like of shape \(2, 2\) and dtype float32",
        ),
        (
            Box(-1, 1, (2,), F32),
            np.array([["a", "b"]]),
            1,
            r"obs: expected numeric values convertible to float32, got dtype <U1",
        ),
        (
            Box(0, 9, (2,), np.int32),
            np.array([[1.5, 2.0]]),
            1,
            r"obs: expected int32 values, got float64 value 1.5 that is not an integer",
        ),
        (
            Box(0, 9, (2,), np.int32),
            np.array([[np.nan, 2.0]]),
            1,
            r"obs: expected int32 values, got float64 value nan",
        ),
        (
            Box(0, 9, (1,), np.uint8),
            np.array([[300]]),
            1,
            r"obs: expected uint8 values, got int64 value 300 outside \[0, 255\]",
        ),
        (
            Box(0, 9, (1,), np.uint8),
            np.array([[256.0]]),
            1,
            r"obs: expected uint8 values, got float64 value 256.0",
        ),
        (
            Box(0, 1, (1,), bool),
            np.array([[2]]),
            1,
            r"obs: expected bool values \(0 or 1\), got int64 value 2",
        ),
        (MultiBinary(2), np.array([[-1, 0]], np.int8), 1, r"obs: expected uint8 values, got int8 value -1"),
        (MultiBinary(2), np.array([[1, 2]], np.uint8), 1, r"obs: expected MultiBinary values 0 or 1, got 2"),
        (MultiBinary(2), np.array([[0, 7]]), 1, r"obs: expected MultiBinary values 0 or 1, got 7"),
        (Discrete(3), np.array([0.5]), 1, r"obs: expected int64 values, got float64 value 0.5"),
        (Discrete(3), np.array([1, 2]), 1, r"obs: expected a batch of shape \(1,\)"),
        (
            Box(-1, 1, (2,), F32),
            np.zeros((1, 2), F32),
            None,
            r"obs: the batch size n must be an int >= 0, got None",
        ),
        (Text(4), "hi", 1, r"obs: expected a sequence of 1 str \(one per lane\), got str"),
        (Text(4), ("a", "b"), 1, r"obs: expected 1 str \(one per lane\), got 2"),
        (Text(4), ("a", 3), 2, r"obs \(lane 1\): expected a str, got int"),
        (
            Dict({"camera": Box(0, 1, (2,))}),
            {},
            1,
            r"obs: missing key\(s\) \['camera'\]; the space has keys \['camera'\]",
        ),
        (
            Dict({"camera": Box(0, 1, (2,))}),
            {"camera": np.zeros((1, 2)), "extra": 1},
            1,
            r"obs: unexpected key\(s\) \['extra'\]",
        ),
        (
            Dict({"camera": Box(0, 1, (2,))}),
            [np.zeros((1, 2))],
            1,
            r"obs: expected a dict with keys \['camera'\] \(a dict of 1-lane batches\), got list",
        ),
        (
            Dict({"camera": Box(0, 1, (2,), np.uint8)}),
            {"camera": np.zeros((1, 3))},
            1,
            r"obs\['camera'\]: expected a batch of shape \(1, 2\)",
        ),
        (
            Tuple((Discrete(2), Box(0, 1, (1,)))),
            (np.zeros(1),),
            1,
            r"obs: expected a tuple of 2 element\(s\), got 1",
        ),
        (
            Tuple((Discrete(2), Box(0, 1, (1,)))),
            (np.zeros(1), np.zeros((1, 2))),
            1,
            r"obs\[1\]: expected a batch of shape \(1, 1\)",
        ),
        (
            Tuple((Discrete(2), Text(2))),
            (np.zeros(1, np.int64), (b"x",)),
            1,
            r"obs\[1\] \(lane 0\): expected a str, got bytes",
        ),
        (
            Tuple((Discrete(2),)),
            np.zeros((1, 1)),
            1,
            r"obs: expected a tuple of 1 element\(s\) \(a tuple of 1-lane batches\), got ndarray",
        ),
    ],
)
def test_bad_batches_raise_codec_error_naming_the_path(space, values, n, message):
    with pytest.raises(CodecError, match=message):
        _codec(space).encode_batch(values, n)


@pytest.mark.parametrize(
    ("space", "value", "message"),
    [
        (Box(-1, 1, (2,), F32), [1.0, 2.0, 3.0], r"action: expected shape \(2,\), got shape \(3,\)"),
        (Discrete(3), [1], r"action: expected shape \(\), got shape \(1,\)"),
        (Text(4), 5, r"action: expected a str, got int"),
        (Dict({"x": Discrete(4)}), {"y": 1}, r"action: missing key\(s\) \['x'\]"),
        (
            Tuple((Discrete(4), Dict({"cam": Box(0, 1, (1,))}))),
            (1, {"cam": [1, 2]}),
            r"action\[1\]\['cam'\]: expected shape \(1,\), got shape \(2,\)",
        ),
        (
            Tuple((Discrete(4), MultiDiscrete([2, 2]))),
            (1, [0.5, 1]),
            r"action\[1\]: expected int64 values, got float64 value 0.5",
        ),
    ],
)
def test_bad_single_values_raise_codec_error_naming_the_path(space, value, message):
    with pytest.raises(CodecError, match=message):
        _codec(space, name="action").encode(value)


def test_named_tuples_are_accepted_as_dicts():
    from collections import namedtuple

    point = namedtuple("point", ["x", "y"])
    codec = _codec(Dict({"x": Discrete(4), "y": Discrete(4)}))
    assert codec.encode(point(1, 2)) == codec.encode({"x": 1, "y": 2})


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (spaces_pb2.SpaceSpec(), r"obs: the SpaceSpec has no kind set"),
        (
            spaces_pb2.SpaceSpec(shape=[2], box=spaces_pb2.BoxSpec(unbounded=True)),
            r"obs: box spec has dtype unspecified",
        ),
        (
            spaces_pb2.SpaceSpec(dtype=spaces_pb2.D_TYPE_FLOAT32, discrete=spaces_pb2.DiscreteSpec(n=3)),
            r"Discrete spec has dtype float32",
        ),
        (
            spaces_pb2.SpaceSpec(
                shape=[3], dtype=spaces_pb2.D_TYPE_UINT8, multi_binary=spaces_pb2.MultiBinarySpec(size=4)
            ),
            r"obs: MultiBinary spec shape \[3\] disagrees with its arm's shape \[4\]",
        ),
        (
            spaces_pb2.SpaceSpec(
                dict=spaces_pb2.DictSpec(keys=["a", "a"], spaces=[spaces_pb2.SpaceSpec()] * 2)
            ),
            r"obs: DictSpec needs unique keys",
        ),
        (
            spaces_pb2.SpaceSpec(tuple=spaces_pb2.TupleSpec(spaces=[spaces_pb2.SpaceSpec()])),
            r"obs\[0\]: the SpaceSpec has no kind set",
        ),
    ],
)
def test_invalid_specs_are_refused_at_compile_time(spec, message):
    with pytest.raises(CodecError, match=message):
        SpaceCodec(spec, name="obs")


def test_multi_binary_shape_comes_from_the_arm_when_the_spec_omits_it():
    spec = spaces_pb2.SpaceSpec(
        dtype=spaces_pb2.D_TYPE_UINT8, multi_binary=spaces_pb2.MultiBinarySpec(size=4)
    )
    assert SpaceCodec(spec).shape == (4,)


def test_zero_lane_batches():
    box = _codec(Box(-1, 1, (2,), F32))
    assert box.encode_batch(np.zeros((0, 2), F32), 0) == b""
    assert box.decode_batch(b"", 0).shape == (0, 2)
    text = _codec(Text(3))
    assert text.encode_batch((), 0) == b""
    assert text.decode_batch(b"", 0) == ()
