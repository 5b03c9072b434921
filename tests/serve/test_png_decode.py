"""decode_png: every scanline filter and colour type env servers send, and clear errors for the rest."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest

from rlmesh_gym.serve.png import PNGDecodeError, decode_png, encode_png

SIGNATURE = b"\x89PNG\r\n\x1a\n"


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


def filtered_png(image: np.ndarray, filters: list[int], color_type: int) -> bytes:
    """A PNG of ``image`` whose row ``y`` uses filter ``filters[y]`` (the PNG spec's definitions)."""
    height, width = image.shape[:2]
    channels = 1 if image.ndim == 2 else image.shape[2]
    rows = image.reshape(height, width * channels).astype(np.int64)
    out = bytearray()
    for y in range(height):
        kind = filters[y]
        out.append(kind)
        for x in range(width * channels):
            raw = int(rows[y, x])
            a = int(rows[y, x - channels]) if x >= channels else 0
            b = int(rows[y - 1, x]) if y else 0
            c = int(rows[y - 1, x - channels]) if y and x >= channels else 0
            predictor = [0, a, b, (a + b) // 2, paeth(a, b, c)][kind]
            out.append((raw - predictor) % 256)
    header = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    return (
        SIGNATURE + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(bytes(out))) + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize(("channels", "color_type"), [(1, 0), (2, 4), (3, 2), (4, 6)])
def test_every_filter_of_every_colour_type_decodes_to_the_image(channels, color_type):
    rng = np.random.default_rng(channels)
    shape = (10, 7) if channels == 1 else (10, 7, channels)
    image = rng.integers(0, 256, shape, dtype=np.uint8)
    png = filtered_png(image, [0, 1, 2, 3, 4, 4, 3, 2, 1, 0], color_type)
    decoded = decode_png(png)
    assert decoded.shape == shape and decoded.dtype == np.uint8
    np.testing.assert_array_equal(decoded, image)


def test_our_encoders_frames_decode_to_themselves():
    frame = np.arange(5 * 3 * 4, dtype=np.uint8).reshape(5, 3, 4)
    np.testing.assert_array_equal(decode_png(encode_png(frame)), frame)


def header(width: int, height: int, depth: int = 8, color_type: int = 2, interlace: int = 0) -> bytes:
    return chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, color_type, 0, 0, interlace))


@pytest.mark.parametrize(
    ("png", "message"),
    [
        (b"GIF89a", "not a PNG file"),
        (SIGNATURE + header(2, 2)[:10], "chunk is cut short"),
        (SIGNATURE + chunk(b"IEND", b""), "no IHDR chunk"),
        (SIGNATURE + header(2, 2, depth=16), "bit depth 16"),
        (SIGNATURE + header(2, 2, interlace=1), "interlace 1"),
        (SIGNATURE + header(2, 2, color_type=3), "colour type 3"),
        (
            SIGNATURE + header(100_000, 100_000) + chunk(b"IDAT", zlib.compress(b"")),
            "outside 1..16777216 pixels",
        ),
        (SIGNATURE + header(2, 2) + chunk(b"IDAT", zlib.compress(b"\x00" * 5)), "holds 5 bytes, expected 14"),
        (SIGNATURE + header(1, 1) + chunk(b"IDAT", b"not zlib"), "does not inflate"),
        (SIGNATURE + header(1, 1) + chunk(b"IDAT", zlib.compress(b"\x07abc")), "filter type 7"),
    ],
    ids=["signature", "cut", "no-ihdr", "depth", "interlace", "palette", "huge", "short", "zlib", "filter"],
)
def test_what_it_cannot_read_is_refused_saying_why(png, message):
    with pytest.raises(PNGDecodeError, match=message):
        decode_png(png)
