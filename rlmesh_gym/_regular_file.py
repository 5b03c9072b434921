"""Refusing a FIFO, socket or device where a file is read: opening one can block forever."""

from __future__ import annotations

import os
import stat
from os import PathLike

__all__ = ["require_regular_file"]


def require_regular_file(path: str | PathLike[str], who: str, expected: str) -> None:
    """Raise unless ``path`` is a regular file; ``who`` starts the message, ``expected`` ends it.

    Raises:
        FileNotFoundError: nothing is at ``path``, or it is a directory.
        ValueError: ``path`` is a FIFO, socket or device.
    """
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(f"{who}: {os.fspath(path)} is not a file; expected {expected}") from None
    if stat.S_ISDIR(mode):
        raise FileNotFoundError(f"{who}: {os.fspath(path)} is a directory, not a file; expected {expected}")
    if not stat.S_ISREG(mode):
        kind = "FIFO" if stat.S_ISFIFO(mode) else "socket" if stat.S_ISSOCK(mode) else "device"
        raise ValueError(
            f"{who}: {os.fspath(path)} is a {kind}, not a regular file (reading it could block forever); "
            f"expected {expected}"
        )
