"""A minimal PNG encoder and decoder for rendered frames (``RenderResponse.png_frame``), zlib and struct only.

Frame layouts follow upstream's env server exactly, so a client sees the same image shape from
either server: a 2-D ``HxW`` array is grey; a 3-D array whose last axis is 3 or 4 is ``HxWxC``
(RGB / RGBA); otherwise a 3-D array whose first axis is 3 or 4 is channel-first ``CxHxW``. Any
other layout (``HxWx1`` included, unless H is 3 or 4, which reads as ``CxHxW``) is no image.
Values are cast to uint8.

:func:`decode_png` reads back what an env server sends (ours or upstream's): 8-bit grey, RGB,
grey+alpha and RGBA images, non-interlaced, any of the five scanline filters.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import numpy.typing as npt

__all__ = ["PNGDecodeError", "decode_png", "encode_png", "frame_to_hwc", "png_of_frame"]

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_COLOR_TYPES = {1: 0, 3: 2, 4: 6}  # channels -> PNG colour type (grey, RGB, RGBA)
_CHANNELS_OF_COLOR_TYPE = {0: 1, 2: 3, 4: 2, 6: 4}  # grey, RGB, grey+alpha, RGBA
_MAX_PIXELS = 1 << 24  # a declared size past this (16 Mpixel) is refused before any allocation
_CHANNELS = (3, 4)


def frame_to_hwc(frame: object) -> np.ndarray | None:
    """``frame`` as a C-contiguous uint8 ``HxWxC`` array (C in 1, 3, 4), or ``None`` for other layouts.

    >>> [frame_to_hwc(np.zeros(shape)).shape for shape in [(4, 3), (4, 3, 3), (4, 3, 1)]]
    [(4, 3, 1), (4, 3, 3), (3, 1, 4)]
    """
    array = np.asarray(frame)
    if array.ndim == 2:
        array = array[:, :, None]
    elif array.ndim == 3 and array.shape[-1] not in _CHANNELS:
        if array.shape[0] not in _CHANNELS:
            return None
        array = np.moveaxis(array, 0, -1)
    elif array.ndim != 3:
        return None
    if 0 in array.shape:
        return None
    return np.ascontiguousarray(array.astype(np.uint8, copy=False))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _encode_hwc(image: np.ndarray, level: int) -> bytes:
    height, width, channels = image.shape
    header = struct.pack(">IIBBBBB", width, height, 8, _COLOR_TYPES[channels], 0, 0, 0)
    # Every scanline starts with filter byte 0 (None).
    rows = np.concatenate([np.zeros((height, 1), np.uint8), image.reshape(height, width * channels)], axis=1)
    return (
        _SIGNATURE
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(rows.tobytes(), level))
        + _chunk(b"IEND", b"")
    )


def png_of_frame(frame: object, *, level: int = 6) -> bytes | None:
    """The PNG file of ``frame``, or ``None`` when its layout is not an image (as upstream: no frame)."""
    image = frame_to_hwc(frame)
    return None if image is None else _encode_hwc(image, level)


def encode_png(frame: npt.ArrayLike, *, level: int = 6) -> bytes:
    """The PNG file of ``frame``; ValueError names the shape when the layout is not an image.

    >>> encode_png(np.zeros((2, 3, 3), np.uint8))[:8] == _SIGNATURE
    True
    """
    png = png_of_frame(frame, level=level)
    if png is None:
        raise ValueError(
            f"cannot encode a frame of shape {np.shape(frame)} as PNG: "
            "expected HxW, HxWx3, HxWx4, 3xHxW or 4xHxW"
        )
    return png


class PNGDecodeError(ValueError):
    """A PNG frame that :func:`decode_png` cannot read; the message says what was wrong."""


def decode_png(data: bytes) -> np.ndarray:
    """The image of a PNG file: ``(H, W)`` uint8 for grey, ``(H, W, C)`` for 2 to 4 channels.

    Reads 8-bit, non-interlaced grey, RGB, grey+alpha and RGBA images, as env servers send
    them. The declared size is checked against the data before anything is allocated for it.

    >>> frame = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)
    >>> bool((decode_png(encode_png(frame)) == frame).all())
    True
    """
    if not data.startswith(_SIGNATURE):
        raise PNGDecodeError("not a PNG file (the 8-byte signature is missing)")
    header: tuple[int, ...] | None = None
    compressed: list[bytes] = []
    offset = len(_SIGNATURE)
    while offset + 8 <= len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        if len(body) != length:
            raise PNGDecodeError(f"the {kind!r} chunk is cut short ({len(body)} of {length} bytes)")
        offset += 12 + length
        if kind == b"IHDR":
            if length != 13:
                raise PNGDecodeError(f"IHDR holds {length} bytes, expected 13")
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            compressed.append(body)
        elif kind == b"IEND":
            break
    if header is None:
        raise PNGDecodeError("the PNG file has no IHDR chunk")
    width, height, depth, color_type, _, _, interlace = header
    channels = _CHANNELS_OF_COLOR_TYPE.get(color_type)
    if depth != 8 or channels is None or interlace:
        raise PNGDecodeError(
            f"unsupported PNG layout (bit depth {depth}, colour type {color_type}, interlace {interlace}); "
            "expected 8-bit grey, RGB, grey+alpha or RGBA without interlacing"
        )
    if width * height > _MAX_PIXELS or width == 0 or height == 0:
        raise PNGDecodeError(f"a {width}x{height} image is outside 1..{_MAX_PIXELS} pixels")
    stride = width * channels
    expected = height * (stride + 1)
    inflater = zlib.decompressobj()
    try:
        raw = inflater.decompress(b"".join(compressed), expected)
    except zlib.error as error:
        raise PNGDecodeError(f"the image data does not inflate: {error}") from None
    if len(raw) != expected:
        raise PNGDecodeError(
            f"the image data holds {len(raw)} bytes, expected {expected} for {width}x{height}"
        )
    rows = np.frombuffer(raw, dtype=np.uint8).reshape(height, stride + 1)
    image = _unfilter(rows[:, 1:], rows[:, 0], channels)
    shape = (height, width) if channels == 1 else (height, width, channels)
    return image.reshape(shape)


def _unfilter(filtered: np.ndarray, filters: np.ndarray, bpp: int) -> np.ndarray:
    """The scanlines with their filters undone (PNG spec, section 9)."""
    height, stride = filtered.shape
    out = np.zeros((height, stride), dtype=np.uint8)
    previous = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        line, kind = filtered[y], int(filters[y])
        if kind == 0:
            row = line.copy()
        elif kind == 1:  # Sub: a running sum along each channel, modulo 256
            row = np.cumsum(line.reshape(-1, bpp), axis=0, dtype=np.uint8).reshape(-1)
        elif kind == 2:  # Up
            row = line + previous
        elif kind in (3, 4):  # Average, Paeth: each pixel depends on the one just decoded
            row = _unfilter_sequential(line, previous, bpp, kind)
        else:
            raise PNGDecodeError(f"scanline {y} has filter type {kind}, expected 0 to 4")
        out[y] = row
        previous = row
    return out


def _unfilter_sequential(line: np.ndarray, previous: np.ndarray, bpp: int, kind: int) -> np.ndarray:
    row = np.zeros(line.size, dtype=np.int32)
    above = previous.astype(np.int32)
    current = line.astype(np.int32)
    left = np.zeros(bpp, dtype=np.int32)
    upper_left = np.zeros(bpp, dtype=np.int32)
    for x in range(0, line.size, bpp):
        up = above[x : x + bpp]
        if kind == 3:
            predicted = (left + up) // 2
        else:
            estimate = left + up - upper_left
            to_left, to_up, to_corner = (
                np.abs(estimate - left),
                np.abs(estimate - up),
                np.abs(estimate - upper_left),
            )
            nearest_up = np.where(to_up <= to_corner, up, upper_left)
            predicted = np.where((to_left <= to_up) & (to_left <= to_corner), left, nearest_up)
        value = (current[x : x + bpp] + predicted) & 0xFF
        row[x : x + bpp] = value
        left, upper_left = value, up
    return row.astype(np.uint8)
