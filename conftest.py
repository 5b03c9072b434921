"""Collects the examples of README.md and docs/ as tests (rules: tests/_doc_examples.py)."""

from pathlib import Path

from _doc_examples import doc_examples

pytest_collect_file = doc_examples(path=str(Path(__file__).parent)).pytest()
