"""A minimal PNG encoder for rendered frames (``RenderResponse.png_frame``), zlib and struct only.

Frame layouts follow upstream's env server exactly, so a client sees the same image shape from
either server: a 2-D ``HxW`` array is grey; a 3-D array whose last axis is 3 or 4 is ``HxWxC``
(RGB / RGBA); otherwise a 3-D array whose first axis is 3 or 4 is channel-first ``CxHxW``. Any
other layout (``HxWx1`` included, unless H is 3 or 4, which reads as ``CxHxW``) is no image.
Values are cast to uint8.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import numpy.typing as npt

__all__ = ["encode_png", "frame_to_hwc", "png_of_frame"]

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_COLOR_TYPES = {1: 0, 3: 2, 4: 6}  # channels -> PNG colour type (grey, RGB, RGBA)
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
