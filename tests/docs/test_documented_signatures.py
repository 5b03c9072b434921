"""Signatures written out in the docs match the code (names, order, keyword-only marker, defaults)."""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from rlmesh_gym.evaluation import compare, evaluate, evaluate_fleet, evaluate_on_ray

DOCS = Path(__file__).resolve().parent.parent.parent / "docs"

DOCUMENTED = [
    ("evaluation.md", "evaluate", evaluate),
    ("evaluation.md", "compare", compare),
    ("evaluation.md", "evaluate_fleet", evaluate_fleet),
    ("evaluation.md", "evaluate_on_ray", evaluate_on_ray),
]


def documented_parameters(page: str, name: str) -> list[str]:
    """The parameters of the page's ```name(...)``` that writes them all out (no ``...``)."""
    text = (DOCS / page).read_text()
    calls = re.finditer(rf"`{name}\((?P<params>[^`]+)\)`", text)
    match = next((call for call in calls if "..." not in call["params"]), None)
    assert match, f"docs/{page} no longer writes out `{name}(...)` with its parameters"
    arguments = ast.parse(f"def f({' '.join(match['params'].split())}): pass").body[0].args
    positional = [a.arg for a in arguments.args]
    defaults = dict(zip(reversed(positional), reversed(arguments.defaults), strict=False))
    defaults.update(
        (a.arg, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True) if d is not None
    )
    written = [_parameter(a.arg, defaults.get(a.arg)) for a in arguments.args]
    if arguments.kwonlyargs:
        written.append("*")
    return written + [_parameter(a.arg, defaults.get(a.arg)) for a in arguments.kwonlyargs]


def _parameter(name: str, default: ast.expr | None) -> str:
    return name if default is None else f"{name}={ast.literal_eval(default)!r}"


def code_parameters(function: Callable[..., object]) -> list[str]:
    written: list[str] = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind is parameter.KEYWORD_ONLY and "*" not in written:
            written.append("*")
        empty = parameter.default is inspect.Parameter.empty
        written.append(parameter.name if empty else f"{parameter.name}={parameter.default!r}")
    return written


@pytest.mark.parametrize(("page", "name", "function"), DOCUMENTED)
def test_documented_signature_matches_the_code(page, name, function):
    assert documented_parameters(page, name) == code_parameters(function)
