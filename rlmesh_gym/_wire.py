"""Hand-encoded protobuf wire pieces for the per-step hot paths.

Building a few fields as bytes and parsing them in one C call is cheaper than setting them
one by one from Python. Only what the runtime and the env adapter need is here.
"""

from __future__ import annotations

__all__ = ["length_delimited", "varint"]


def varint(value: int) -> bytes:
    """Protobuf base-128 varint of a non-negative integer.

    >>> varint(1), varint(300)
    (b'\\x01', b'\\xac\\x02')
    """
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def length_delimited(tag: bytes, data: bytes) -> bytes:
    """A length-delimited field, always written (as a repeated or submessage field is)."""
    return tag + varint(len(data)) + data
