"""The ``rlmesh-gym`` command line.

Each subcommand lives in its own module, ``<name>_command.py``, with two functions:
``register(subparsers)`` adds its parser (and sets ``run`` as the parser's ``func`` default),
and ``run(args) -> int`` carries it out and returns the exit code. What several of them share
is in the ``_``-prefixed modules (docs/design/layering.md#cli).
"""

from __future__ import annotations

import _thread
import argparse
import importlib
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from rlmesh_gym import __version__
from rlmesh_gym._audience import command_line_audience
from rlmesh_gym.cli._report import report_error

# Subcommand modules, in the order `--help` lists them.
_COMMANDS: tuple[str, ...] = (
    "eval_command",
    "compare_command",
    "inspect_command",
    "episodes_command",
    "serve_env_command",
    "serve_policy_command",
)


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
    stops quietly with :data:`EXIT_BROKEN_PIPE` instead of a ``BrokenPipeError`` traceback. Ctrl+C
    at any moment ends it with one ``interrupted`` line and exit code 130.
    """
    # `--policy my_module:attr` finds modules in the working directory, as `python -m` would;
    # appended, so a local file never shadows an installed package.
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        with _ctrl_c_never_dropped():
            parser = build_parser()
            args = parser.parse_args(argv)
            if args.command is None:
                parser.print_help(sys.stdout)
                code = 0
            else:
                with command_line_audience():
                    code = int(args.func(args))
        sys.stdout.flush()  # a closed pipe shows up here when the output was still buffered
    except KeyboardInterrupt:  # subcommands report their own; this is Ctrl+C while starting up
        return report_error("interrupted", 130)
    except BrokenPipeError:
        # Python would try to flush stdout again at exit and print the error; point it at devnull.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE
    return code


@contextmanager
def _ctrl_c_never_dropped() -> Iterator[None]:
    """Deliver again a Ctrl+C whose ``KeyboardInterrupt`` was raised inside a finalizer or a
    weakref callback (an import's module-lock cleanup, a gRPC object's ``__del__``), where Python
    prints "Exception ignored" and drops it: the command would otherwise run on as if never
    interrupted."""
    previous = sys.unraisablehook

    def redeliver(unraisable: sys.UnraisableHookArgs) -> None:
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
            # From a new thread, not waited for: called here, the handler would run at once, still
            # inside the finalizer. Should it land in one again, this hook sends it once more.
            _thread.start_new_thread(_thread.interrupt_main, ())
        else:
            previous(unraisable)

    sys.unraisablehook = redeliver
    try:
        yield
    finally:
        sys.unraisablehook = previous
