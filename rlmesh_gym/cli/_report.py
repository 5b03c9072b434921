"""How subcommands report problems: one ``rlmesh-gym: error:`` / ``warning:`` line on stderr."""

from __future__ import annotations

import sys

__all__ = ["report_error", "report_warning"]


def report_error(message: str, code: int) -> int:
    """Print ``message`` as the command's error and return ``code`` (the exit code)."""
    print(f"rlmesh-gym: error: {message}", file=sys.stderr)
    return code


def report_warning(message: str) -> None:
    """Print ``message`` as a warning; the command goes on."""
    print(f"rlmesh-gym: warning: {message}", file=sys.stderr, flush=True)
