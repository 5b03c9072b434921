"""The linters, the type checker and the docstring examples run with the suite and pass.

``make test`` is pytest (on parallel workers), so every guard rail of
docs/design/layering.md#guard-rails that is not itself a test runs from here: ``ruff check``,
``ruff format --check`` and mypy, each configured in ``pyproject.toml``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


# A hang guard far above the slowest run: mypy without a cache (a fresh clone) takes ~20 s of CPU,
# several minutes on a busy machine. The test's own timeout is above it, so this one reports.
TOOL_TIMEOUT = 1200.0


# ruff and mypy are dev tools of the main venv: their tests carry markers, skipped in the other
# Python versions' lean venvs (tests/conftest.py).
def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv], cwd=ROOT, capture_output=True, text=True, timeout=TOOL_TIMEOUT
    )


@pytest.mark.ruff
def test_ruff_check_passes():
    result = _run("ruff", "check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.ruff
def test_ruff_format_check_passes():
    result = _run("ruff", "format", "--check", "--no-cache", ".")
    assert result.returncode == 0, "run `ruff format .`:\n" + result.stdout + result.stderr


@pytest.mark.mypy
@pytest.mark.slow
@pytest.mark.timeout(TOOL_TIMEOUT + 60)
def test_mypy_passes_on_the_package():
    result = _run("mypy")  # files and settings: [tool.mypy] in pyproject.toml
    assert result.returncode == 0, result.stdout + result.stderr


def test_pytest_collects_the_docstring_examples_of_every_module():
    config = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^testpaths = \[.*"rlmesh_gym".*\]$', config, re.MULTILINE)
    assert re.search(r'^addopts = ".*--doctest-modules.*"$', config, re.MULTILINE)


def test_no_docstring_example_is_skipped():
    skipped = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "rlmesh_gym").rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "doctest: +SKIP" in line
    ]
    assert skipped == [], "an example that does not run is not checked; make it run instead"
