"""Collects the examples of README.md and docs/ as tests (rules: tests/_doc_examples.py)."""

from pathlib import Path

import pytest
from _doc_examples import EXAMPLE_TIMEOUT, doc_examples

pytest_collect_file = doc_examples(path=str(Path(__file__).parent)).pytest()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.suffix == ".md":
            item.add_marker(pytest.mark.timeout(EXAMPLE_TIMEOUT))
