"""The examples in the policy docstrings run and print what they claim."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "module_name",
    [
        "rlmesh_gym.policies.torch_policy",
        "rlmesh_gym.policies.random_policy",
        "rlmesh_gym.policies.callable_policy",
    ],
)
def test_docstring_examples(module_name: str) -> None:
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
