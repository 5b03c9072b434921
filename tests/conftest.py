"""Tests that need an optional package are skipped cleanly where it is not installed.

The other Python versions' lean venvs (``make test-pythons``) have neither torch nor the notebook
packages. A test module that imports one of them at top level is not collected there; any other
test that uses a torch policy (the shipped ``pretrained:`` policies, ``TorchPolicy``) or carries
the ``torch`` marker is skipped.
"""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path

import pytest

_OPTIONAL = (
    "torch",
    "nbclient",
    "nbformat",
    "pandas",
    "matplotlib",
    "traitlets",
    "safetensors",
    "stable_baselines3",
)
MISSING = [name for name in _OPTIONAL if importlib.util.find_spec(name) is None]
_HERE = Path(__file__).parent
_TOP_LEVEL_IMPORT = re.compile(rf"^(?:import|from) ({'|'.join(_OPTIONAL)})\b", re.MULTILINE)
# Names of the package whose import loads torch.
_TORCH_NAMES = re.compile(
    r"^from rlmesh_gym[\w.]* import [^\n]*\b(TorchPolicy|MLPPolicy|load_pretrained|PRETRAINED)\b", re.M
)
# A test that mentions these (in its source or its parameters) needs the package.
_USES = {
    "torch": re.compile(r"pretrained|TorchPolicy|MLPPolicy|torch_policy"),
    "pandas": re.compile(r"to_pandas|steps_frame"),
}


def _needs_missing(path: Path) -> bool:
    text = path.read_text()
    if "torch" in MISSING and _TORCH_NAMES.search(text):
        return True
    return any(name in MISSING for name in _TOP_LEVEL_IMPORT.findall(text))


collect_ignore = [str(path.relative_to(_HERE)) for path in _HERE.rglob("test_*.py") if _needs_missing(path)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    uses = {name: pattern for name, pattern in _USES.items() if name in MISSING}
    if not uses:
        return
    for item in items:
        try:
            source = inspect.getsource(item.function)  # type: ignore[attr-defined]
        except (AttributeError, OSError, TypeError):
            source = ""
        for name, pattern in uses.items():
            if item.get_closest_marker(name) or pattern.search(source) or pattern.search(item.name):
                item.add_marker(pytest.mark.skip(reason=f"needs {name}, which is not installed here"))
                break
