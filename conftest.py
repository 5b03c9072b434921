"""Shared by the test suite, the docstring examples of the package (pytest --doctest-modules) and
the examples of README.md and docs/ (collected by Sybil; rules: tests/_doc_examples.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _doc_examples import EXAMPLE_TIMEOUT, doc_examples

pytest_collect_file = doc_examples(path=str(Path(__file__).parent)).pytest()


def pytest_ignore_collect(collection_path: Path) -> bool | None:
    """A ``conftest.py`` is never collected as a doctest module: ``--doctest-modules`` would import
    every one of them as the module ``conftest``, and two test directories given in one command
    (``pytest tests/serve tests/recording``) would collide. pytest still loads them as conftests."""
    return True if collection_path.name == "conftest.py" else None


@pytest.fixture(autouse=True)
def _docstring_examples_run_in_a_scratch_directory(request: pytest.FixtureRequest) -> None:
    """Examples write files such as ``run.rec``; they land in a fresh temporary directory."""
    if isinstance(request.node, pytest.DoctestItem):
        request.getfixturevalue("monkeypatch").chdir(request.getfixturevalue("tmp_path"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.suffix == ".md":
            item.add_marker(pytest.mark.timeout(EXAMPLE_TIMEOUT))
