"""Shared by the test suite and the docstring examples of the package (pytest --doctest-modules)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _docstring_examples_run_in_a_scratch_directory(request: pytest.FixtureRequest) -> None:
    """Examples write files such as ``run.rec``; they land in a fresh temporary directory."""
    if isinstance(request.node, pytest.DoctestItem):
        request.getfixturevalue("monkeypatch").chdir(request.getfixturevalue("tmp_path"))
