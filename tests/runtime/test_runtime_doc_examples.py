"""The docstring examples of the runtime modules run and hold."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "rlmesh_gym.runtime.cancellation",
    "rlmesh_gym.runtime.errors",
    "rlmesh_gym.runtime.hooks",
    "rlmesh_gym.runtime.seeds",
    "rlmesh_gym.runtime.state",
    "rlmesh_gym.runtime.telemetry",
]


@pytest.mark.parametrize("name", MODULES)
def test_doc_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
