"""Who reads this process's messages: Python callers (the default) or ``rlmesh-gym`` users.

A hint that names a fix must name one the reader can apply: ``allow_pickle=True`` for a Python
caller is ``--allow-pickle`` on the command line. The command line declares itself once at
start-up with :func:`command_line_audience`; library code words its hints with :func:`fix`.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

__all__ = ["command_line_audience", "fix", "on_command_line", "warn_at_caller"]

_command_line = False
_PACKAGE_DIR = str(Path(__file__).resolve().parent)


@contextmanager
def command_line_audience() -> Iterator[None]:
    """Within the block, hints in this process name command-line flags and environment variables."""
    global _command_line
    previous, _command_line = _command_line, True
    try:
        yield
    finally:
        _command_line = previous


def fix(python: str, cli: str) -> str:
    """``python`` (how a Python caller applies the fix) or ``cli`` (how a command-line user does)."""
    return cli if _command_line else python


def warn_at_caller(message: str, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the first frame outside this package (the user's line)."""
    frame: FrameType | None = sys._getframe(1)
    level = 2  # warnings.warn's stacklevel of our caller's frame
    while frame is not None and str(Path(frame.f_code.co_filename).resolve()).startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level)


def on_command_line() -> bool:
    """Whether ``rlmesh-gym`` users read this process's messages (:func:`command_line_audience`)."""
    return _command_line
