"""Tests that need an optional package say so with a marker, and are skipped where it is missing.

The other Python versions' lean venvs (``make test-pythons``) install the ``test`` extra only:
no torch, no notebook packages, no Stable-Baselines3, no selenium, ruff or mypy. A test that
needs one carries its marker (declared in pyproject.toml, ``--strict-markers``), on the test or
as the module's ``pytestmark``::

    pytestmark = pytest.mark.torch          # every test of the module

    @pytest.mark.notebook                    # one test
    def test_to_pandas(): ...

A module whose marker names a missing package is not even imported (so it may import torch at
the top); a marked test is skipped with the package named.

It also gives the suite a terminal's SIGINT (see :func:`pytest_configure`).
"""

from __future__ import annotations

import ast
import importlib.util
import signal
from pathlib import Path

import pytest

# Marker -> the packages the marked tests import (an optional extra of pyproject.toml, or a tool).
REQUIRES: dict[str, tuple[str, ...]] = {
    "torch": ("torch", "safetensors"),
    "sb3": ("stable_baselines3",),
    "ray": ("ray",),
    "notebook": ("pandas", "matplotlib", "traitlets", "nbclient", "nbformat"),
    "selenium": ("selenium",),
    "ruff": ("ruff",),
    "mypy": ("mypy",),
}
MISSING: dict[str, list[str]] = {
    marker: missing
    for marker, packages in REQUIRES.items()
    if (missing := [name for name in packages if importlib.util.find_spec(name) is None])
}


def pytest_configure(config: pytest.Config) -> None:
    """Restore Python's Ctrl+C handler when the suite was started with SIGINT ignored.

    A shell without job control starts a background command (``make test &``) with SIGINT
    ignored, and every process the suite starts would inherit that: the tests that press Ctrl+C
    in a real ``rlmesh-gym`` process, as a user at a terminal does, would see it ignored. With
    the handler back (in the runner and in each xdist worker), children start with the default.
    """
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _skip_reason(marker: str) -> str:
    return f"needs {', '.join(MISSING[marker])} (the {marker!r} marker), not installed here"


def _module_markers(path: Path) -> set[str]:
    """The marker names of the module's top-level ``pytestmark = pytest.mark.X`` (or a list of them)."""
    names = set()
    for statement in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(statement, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "pytestmark" for target in statement.targets
        ):
            values = (
                statement.value.elts
                if isinstance(statement.value, (ast.List, ast.Tuple))
                else [statement.value]
            )
            for value in values:
                node = value.func if isinstance(value, ast.Call) else value
                if isinstance(node, ast.Attribute) and ast.unparse(node.value) == "pytest.mark":
                    names.add(node.attr)
    return names


def pytest_ignore_collect(collection_path: Path) -> bool | None:
    if not MISSING or collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    return True if _module_markers(collection_path) & MISSING.keys() else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for marker in MISSING:
            if item.get_closest_marker(marker) is not None:
                item.add_marker(pytest.mark.skip(reason=_skip_reason(marker)))
                break
