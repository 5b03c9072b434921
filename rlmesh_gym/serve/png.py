"""A minimal PNG encoder for rendered frames (``RenderResponse.png_frame``), zlib and struct only.

Accepts the frame layouts upstream's env server encodes: ``HxW`` (grey), ``HxWx3`` / ``HxWx4``
(RGB / RGBA) and the channel-first ``3xHxW`` / ``4xHxW``; values are cast to uint8.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import numpy as np

__all__ = ["encode_png", "frame_to_hwc"]

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_COLOR_TYPES = {1: 0, 3: 2, 4: 6}  # channels -> PNG colour type (grey, RGB, RGBA)


def frame_to_hwc(frame: object) -> np.ndarray | None:
    """``frame`` as a C-contiguous uint8 ``HxWxC`` array (C in 1, 3, 4), or ``None`` for other layouts."""
    array = np.asarray(frame)
    if array.ndim == 2:
        array = array[:, :, None]
    elif array.ndim == 3 and array.shape[-1] not in (3, 4) and array.shape[0] in (3, 4):
        array = np.moveaxis(array, 0, -1)
    if array.ndim != 3 or array.shape[-1] not in _COLOR_TYPES or 0 in array.shape[:2]:
        return None
    return np.ascontiguousarray(array.astype(np.uint8, copy=False))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def encode_png(frame: Any, *, level: int = 6) -> bytes:
    """The PNG file of ``frame``; ValueError names the shape when the layout is not an image.

    >>> encode_png(np.zeros((2, 3, 3), np.uint8))[:8] == _SIGNATURE
    True
    """
    image = frame_to_hwc(frame)
    if image is None:
        raise ValueError(
            f"cannot encode a frame of shape {np.shape(frame)} as PNG: "
            "expected HxW, HxWx3, HxWx4, 3xHxW or 4xHxW"
        )
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
