"""The command-line options that say how a Gymnasium env id is built into a vector env."""

from __future__ import annotations

import argparse

__all__ = ["add_autoreset_argument", "add_vectorization_argument"]


def add_autoreset_argument(parser: argparse.ArgumentParser) -> None:
    """``--autoreset MODE``: next_step (default), same_step or disabled."""
    parser.add_argument(
        "--autoreset",
        default="next_step",
        choices=("next_step", "same_step", "disabled"),
        type=str.lower,
        metavar="MODE",
        help="autoreset mode: next_step (default), same_step or disabled",
    )


def add_vectorization_argument(parser: argparse.ArgumentParser) -> None:
    """``--vectorization``: sync (default) or async."""
    parser.add_argument(
        "--vectorization",
        default="sync",
        choices=("sync", "async"),
        type=str.lower,
        help="sync (default) or async (one subprocess per lane)",
    )
