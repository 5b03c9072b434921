"""The ``rlmesh-gym`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rlmesh_gym import __version__


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``rlmesh-gym`` with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="rlmesh-gym",
        description="Plug Gymnasium environments and PyTorch policies into the rlmesh runtime.",
    )
    parser.add_argument("--version", action="version", version=f"rlmesh-gym {__version__}")
    parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stdout)
        return 0
    return 0
