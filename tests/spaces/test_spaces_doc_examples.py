"""The examples in the spaces docstrings run and print what they claim."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "module_name", ["rlmesh_gym.spaces.spec", "rlmesh_gym.spaces.codec", "rlmesh_gym.spaces.meta"]
)
def test_docstring_examples(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
