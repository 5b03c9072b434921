"""The recording file format: a stream of msgpack maps, numpy arrays as an ext type.

A recording is a plain concatenation of msgpack-encoded maps ("records"), each with a
``"kind"`` key. The first record is the header. Numpy arrays are ext type
:data:`NDARRAY_EXT` whose payload is the msgpack array ``[dtype.str, shape, raw bytes]``
(C order), so a load is one ``np.frombuffer`` per array and never a list of Python numbers.
"""

from __future__ import annotations

from typing import Any, BinaryIO

import msgpack
import numpy as np

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "MAX_LANES",
    "NDARRAY_EXT",
    "RecordingFormatError",
    "frame_problem",
    "new_packer",
    "new_unpacker",
    "read_records",
]

FORMAT_NAME = "rlmesh-gym-recording"
# 2: ``episode`` records carry ``counted`` (whether the evaluation counted the episode).
FORMAT_VERSION = 2
NDARRAY_EXT = 1
# The most lanes (num_envs) a recording may have: a header declaring more is refused on read, so
# that a few bytes cannot make a reader build per-lane structures for 10**8 lanes.
MAX_LANES = 65536

# Numpy dtype kinds a recording may hold: bool, ints, floats, complex, fixed-width str/bytes.
_ALLOWED_KINDS = frozenset("biufcUS")
# A single record (for example one long episode with frames) may exceed msgpack's 100 MiB default.
_MAX_RECORD_BYTES = 2**31 - 1


class RecordingFormatError(ValueError):
    """The file is not a recording, is damaged where it cannot be read, or is too new."""


# Channels a recorded frame may have, as the player and videos show them: grey, RGB, RGBA.
FRAME_CHANNELS = (1, 3, 4)


def frame_problem(frames: Any, leading: int) -> str | None:
    """Why ``frames`` cannot be shown as images, or ``None``. They are ``leading`` axes (0 for
    one frame, 1 for a stack) before ``(H, W, C)``: uint8, ``H, W >= 1``, ``C`` in 1, 3, 4."""
    if not isinstance(frames, np.ndarray):
        return f"a {type(frames).__name__}"
    what = f"a {frames.dtype} array of shape {frames.shape}"
    if frames.dtype != np.uint8 or frames.ndim != leading + 3:
        return what
    height, width, channels = frames.shape[leading:]
    if height < 1 or width < 1 or channels not in FRAME_CHANNELS:
        return what
    return None


def _pack_default(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in _ALLOWED_KINDS:
            raise TypeError(
                f"cannot record a numpy array of dtype {value.dtype}: expected a bool, numeric or "
                "fixed-width string dtype"
            )
        array = np.ascontiguousarray(value)
        payload = msgpack.packb([array.dtype.str, list(array.shape), array.data.cast("B")])
        return msgpack.ExtType(NDARRAY_EXT, payload)
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(
        f"cannot record a value of type {type(value).__name__}: expected msgpack data or a numpy array"
    )


def new_packer() -> msgpack.Packer:
    """A packer that writes numpy arrays as :data:`NDARRAY_EXT`."""
    return msgpack.Packer(default=_pack_default, use_bin_type=True)


def new_unpacker(stream: BinaryIO) -> msgpack.Unpacker:
    """An unpacker of ``stream`` that reads :data:`NDARRAY_EXT` back as numpy arrays."""
    return msgpack.Unpacker(
        stream,
        raw=False,
        ext_hook=_ext_hook,
        strict_map_key=False,
        max_buffer_size=_MAX_RECORD_BYTES,
    )


def _ext_hook(code: int, data: bytes) -> Any:
    if code != NDARRAY_EXT:
        raise RecordingFormatError(f"unknown msgpack ext type {code} (expected {NDARRAY_EXT}, a numpy array)")
    dtype_str, shape, raw = msgpack.unpackb(data, raw=False)
    dtype = np.dtype(dtype_str)
    if dtype.kind not in _ALLOWED_KINDS:
        raise RecordingFormatError(f"numpy array of dtype {dtype_str!r} is not allowed in a recording")
    array = np.frombuffer(raw, dtype=dtype)
    if dtype.kind == "U" and array.size:
        # Damaged bytes can hold code points no str can (numpy would fail only when one is read).
        points = np.frombuffer(raw, dtype=np.dtype("u4").newbyteorder(dtype.byteorder))
        if int(points.max()) > 0x10FFFF:
            raise RecordingFormatError("a unicode array holds a code point above U+10FFFF")
    # A writable copy: users edit arrays in notebooks, and frombuffer views of bytes are read-only.
    return array.reshape(shape).copy()


def read_records(stream: BinaryIO, size: int) -> tuple[list[dict[str, Any]], int, str | None]:
    """Every complete record of ``stream`` (``size`` bytes long).

    Returns ``(records, bytes_read, problem)``: ``problem`` is ``None`` when the whole file was
    read, else a sentence saying where and why reading stopped (a record cut off at the end of
    the file, or damaged bytes). Records before that point are all returned.
    """
    unpacker = new_unpacker(stream)
    records: list[dict[str, Any]] = []
    good_offset = 0
    problem: str | None = None
    while True:
        try:
            record = unpacker.unpack()
        except msgpack.OutOfData:
            break
        except (ValueError, TypeError, msgpack.UnpackException) as exc:
            problem = f"damaged record at byte {good_offset}: {exc}"
            break
        if not isinstance(record, dict) or not isinstance(record.get("kind"), str):
            got = type(record).__name__
            problem = f"the value at byte {good_offset} is not a recording record (got {got})"
            break
        records.append(record)
        good_offset = unpacker.tell()
    if problem is None and good_offset < size:
        problem = (
            f"the file ends with an incomplete record: read {good_offset} of {size} bytes "
            f"({size - good_offset} trailing bytes ignored)"
        )
    return records, good_offset, problem
