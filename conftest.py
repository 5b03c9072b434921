"""Shared by the test suite, the docstring examples of the package (pytest --doctest-modules) and
the examples of README.md and docs/ (collected by Sybil; rules: tests/_doc_examples.py), and how
``make test`` shares them among parallel workers (tests/_parallel.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _doc_examples import EXAMPLE_TIMEOUT, doc_examples, runs_processes
from _parallel import FileScheduling, slow_files_first

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


@pytest.hookimpl(tryfirst=True)  # before `-m "not slow"` deselects by the marks added here
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    pages = [item for item in items if item.path.suffix == ".md"]
    # A page whose commands start processes is slow as a whole: its examples share one namespace.
    slow_pages = {item.path for item in pages if runs_processes(item.example)}
    for item in pages:
        item.add_marker(pytest.mark.timeout(EXAMPLE_TIMEOUT))
        if item.path in slow_pages:
            item.add_marker(pytest.mark.slow)
    slow_files_first(items)


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before pytest-xdist's own loadfile scheduler
def pytest_xdist_make_scheduler(config: pytest.Config, log) -> FileScheduling | None:
    return FileScheduling(config, log) if config.getvalue("dist") == "loadfile" else None
