"""The public API is what ``public_api.txt`` says: an export added or removed by accident fails.

To change the API on purpose, regenerate the snapshot and commit it with the change::

    UPDATE_API_SNAPSHOT=1 python -m pytest tests/package/test_api_snapshot.py
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

SNAPSHOT = Path(__file__).with_name("public_api.txt")

# The public packages (and the one public top-level module); each lists its API in __all__.
PUBLIC = (
    "rlmesh_gym",
    "rlmesh_gym.envs",
    "rlmesh_gym.evaluation",
    "rlmesh_gym.policies",
    "rlmesh_gym.proto",
    "rlmesh_gym.recording",
    "rlmesh_gym.runtime",
    "rlmesh_gym.serve",
    "rlmesh_gym.spaces",
)


def current_api() -> list[str]:
    """``module: name`` for every name of every public ``__all__``, sorted."""
    lines = []
    for module_name in PUBLIC:
        module = importlib.import_module(module_name)
        names = getattr(module, "__all__", None)
        assert names is not None, f"{module_name} has no __all__"
        assert len(set(names)) == len(names), f"{module_name}.__all__ lists a name twice"
        lines += [f"{module_name}: {name}" for name in names]
    return sorted(lines)


@pytest.mark.torch  # the shipped policy / every public module, torch included
def test_every_exported_name_exists():
    missing = [
        line
        for line in current_api()
        if not hasattr(importlib.import_module(line.split(":")[0]), line.split()[1])
    ]
    assert missing == []


def test_public_api_matches_the_snapshot():
    current = current_api()
    if os.environ.get("UPDATE_API_SNAPSHOT") == "1":
        SNAPSHOT.write_text("\n".join(current) + "\n", encoding="utf-8")
    recorded = SNAPSHOT.read_text(encoding="utf-8").splitlines()
    added = sorted(set(current) - set(recorded))
    removed = sorted(set(recorded) - set(current))
    assert not added and not removed, (
        "the public API changed:\n"
        + "".join(f"  + {line}\n" for line in added)
        + "".join(f"  - {line}\n" for line in removed)
        + "If this is on purpose, update the snapshot and commit it with the change:\n"
        "  UPDATE_API_SNAPSHOT=1 python -m pytest tests/package/test_api_snapshot.py"
    )
