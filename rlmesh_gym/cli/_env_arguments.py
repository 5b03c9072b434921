"""The command-line options that say how a Gymnasium env id is built into a vector env."""

from __future__ import annotations

import argparse
import json
from typing import Any

__all__ = [
    "add_autoreset_argument",
    "add_env_package_arguments",
    "add_vectorization_argument",
    "env_kwargs_of",
]


def add_autoreset_argument(parser: argparse.ArgumentParser, *, evaluation: bool = False) -> None:
    """``--autoreset MODE``: next_step (default), same_step or disabled.

    With ``evaluation`` the default is left to ``evaluate()`` (same_step for the env it builds).
    """
    from rlmesh_gym.runtime.autoreset import AutoresetMode

    parser.add_argument(
        "--autoreset",
        default=None if evaluation else AutoresetMode.NEXT_STEP.value,
        choices=AutoresetMode.spellings(),
        type=str.lower,
        metavar="MODE",
        help=(
            "autoreset mode: same_step (default: a finished lane resets within its last step), "
            "next_step or disabled"
            if evaluation
            else "autoreset mode: next_step (default), same_step or disabled"
        ),
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


def add_env_package_arguments(parser: argparse.ArgumentParser) -> None:
    """``--env-kwargs`` (the env's make kwargs) and ``--import MODULE`` (env packages to import)."""
    parser.add_argument(
        "--env-kwargs",
        action="append",
        default=[],
        metavar="JSON|KEY=VALUE",
        help=(
            "keyword arguments of the env's constructor: a JSON object ('{\"max_episode_steps\": 50}') "
            "or KEY=VALUE with a JSON value (a VALUE that is not JSON is taken as a string, e.g. "
            "render_mode=rgb_array); repeatable"
        ),
    )
    parser.add_argument(
        "--import",
        dest="import_modules",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first, so the env ids it registers are known (e.g. --import ale_py); "
        "repeatable. An id may also name its package itself: MODULE:ENV_ID",
    )


def env_kwargs_of(args: argparse.Namespace) -> dict[str, Any]:
    """Import ``--import`` modules and return the ``--env-kwargs`` as one dict.

    Raises:
        ValueError: an item is neither a JSON object nor KEY=VALUE, nests deeper than 64
            levels, a key is given twice, or a module cannot be imported (or raises, or calls
            ``sys.exit``, while it is).
    """
    from rlmesh_gym.envs.env_ids import import_env_packages

    import_env_packages(args.import_modules)
    kwargs: dict[str, Any] = {}
    for item in args.env_kwargs:
        for key, value in _parse_item(item).items():
            if key in kwargs:
                raise ValueError(f"--env-kwargs: {key!r} is given twice")
            kwargs[key] = value
    return kwargs


_JSON_TYPES = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


# Deeper JSON is no env's keyword argument, and Python's parser would overflow its stack on it.
_MAX_NESTING = 64


def _nesting(text: str) -> int:
    """How deeply JSON arrays and objects nest in ``text`` (brackets inside strings do not count)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _parse_item(item: str) -> dict[str, Any]:
    text = item.strip()
    depth = _nesting(text)
    if depth > _MAX_NESTING:
        shown = text if len(text) <= 60 else f"{text[:60]}..."
        raise ValueError(
            f"--env-kwargs {shown!r} nests arrays or objects {depth} levels deep; at most {_MAX_NESTING} "
            "are accepted"
        )
    key, equals, raw = text.partition("=")
    if equals and key.strip().isidentifier():
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw  # a bare word such as rgb_array
        return {key.strip(): value}
    try:
        parsed = json.loads(text)
    except ValueError:
        raise ValueError(
            f"--env-kwargs {item!r} is neither a JSON object nor KEY=VALUE; "
            "expected e.g. '{\"max_episode_steps\": 50}' or max_episode_steps=50"
        ) from None
    if not isinstance(parsed, dict):
        raise ValueError(
            f"--env-kwargs {item!r} is a JSON {_JSON_TYPES.get(type(parsed), 'value')}, not a JSON object "
            "of keyword arguments; "
            "expected e.g. '{\"max_episode_steps\": 50}' or max_episode_steps=50"
        )
    return parsed
