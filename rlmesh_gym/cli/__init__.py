"""The ``rlmesh-gym`` command line.

Each subcommand lives in its own module with two functions: ``register(subparsers)`` adds
its parser (and sets ``run`` as the parser's ``func`` default), and ``run(args) -> int``
carries it out and returns the exit code.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from rlmesh_gym import __version__

# Subcommand modules, in the order `--help` lists them.
_COMMANDS: tuple[str, ...] = ("eval_command", "inspect_command", "episodes_command", "serve_command")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``rlmesh-gym`` with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="rlmesh-gym",
        description="Plug Gymnasium environments and PyTorch policies into the rlmesh runtime.",
    )
    parser.add_argument("--version", action="version", version=f"rlmesh-gym {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMANDS:
        importlib.import_module(f"rlmesh_gym.cli.{name}").register(subparsers)
    return parser


# The exit code of a command whose reader went away, as the shell reports one killed by SIGPIPE.
EXIT_BROKEN_PIPE = 128 + 13


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the process exit code.

    When the reader of the output goes away (``rlmesh-gym eval --json | head -1``), the command
    stops quietly with :data:`EXIT_BROKEN_PIPE` instead of a ``BrokenPipeError`` traceback.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command is None:
            parser.print_help(sys.stdout)
            code = 0
        else:
            code = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows up here when the output was still buffered
    except BrokenPipeError:
        # Python would try to flush stdout again at exit and print the error; point it at devnull.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE
    return code
