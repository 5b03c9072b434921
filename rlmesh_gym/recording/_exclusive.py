"""Opening a recording for writing so that one writer at a time owns it.

The file is opened without truncating, then locked (``fcntl.flock``, exclusive, non-blocking);
only a writer that holds the lock truncates or replaces it, so a second run recording to the
same path is refused before it touches a byte. The lock lives as long as the open file. A FIFO
or device at the path is refused without blocking on it. Platforms without ``fcntl``
(Windows) take no lock.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import BinaryIO

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; writers are not serialised there
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCKS", "open_exclusive"]

LOCKS = fcntl is not None
"""Whether this platform locks recordings against a second writer."""


def open_exclusive(path: str, *, truncate: bool) -> tuple[BinaryIO, bool]:
    """``path`` open for binary writing, locked against other writers until it is closed, and
    whether this call created it. Truncated once locked when ``truncate`` (else left as it was).

    Raises:
        OSError: the path cannot be opened for writing (a directory, a missing folder, no
            permission), is not a regular file, or another writer holds its lock (``EBUSY``);
            the message names the path.
    """
    try:
        existing = os.stat(path).st_mode
    except OSError:
        existing = None  # nothing there yet (or unreadable: the open below names the reason)
    if existing is not None and not stat.S_ISREG(existing):
        kind = (
            "a directory" if stat.S_ISDIR(existing) else "a FIFO" if stat.S_ISFIFO(existing) else "a device"
        )
        raise OSError(
            errno.EISDIR if stat.S_ISDIR(existing) else errno.EINVAL,
            f"cannot write recording file {path!r}: it is {kind}, not a regular file",
        )
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    # O_NONBLOCK: opening a FIFO for writing would otherwise wait for a reader.
    flags |= getattr(os, "O_NONBLOCK", 0)
    created = True
    try:
        try:
            fd = os.open(path, flags | os.O_EXCL, 0o666)
        except FileExistsError:
            created = False
            fd = os.open(path, flags, 0o666)
    except OSError as error:
        raise OSError(error.errno, f"cannot create recording file {path!r}: {error.strerror}") from error
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, f"cannot write recording file {path!r}: it is not a regular file")
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise OSError(
                    errno.EBUSY,
                    f"cannot write recording file {path!r}: another run is writing it (it holds the "
                    "file's lock); record to another path, or wait until that run has ended",
                ) from None
            os.set_blocking(fd, True)
        if truncate:
            os.ftruncate(fd, 0)
        return os.fdopen(fd, "wb"), created
    except BaseException:
        os.close(fd)
        raise
