"""No ``asyncio.wait_for`` in the package: before Python 3.12 it can drop the caller's
cancellation (a Ctrl+C or a server stop), so every deadline goes through ``_deadline.wait_within``
(docs/design/serving.md#client-deadlines)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "rlmesh_gym"


def wait_for_calls(source: str, filename: str) -> list[str]:
    """``file:line`` of every ``asyncio.wait_for`` / ``wait_for`` imported from asyncio in ``source``."""
    tree = ast.parse(source, filename)
    imported = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "asyncio"
        for alias in node.names
        if alias.name == "wait_for"
    }
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        on_asyncio = isinstance(function, ast.Attribute) and function.attr == "wait_for"
        on_asyncio = on_asyncio and isinstance(function.value, ast.Name) and function.value.id == "asyncio"
        if on_asyncio or (isinstance(function, ast.Name) and function.id in imported):
            found.append(f"{filename}:{node.lineno}")
    return found


def test_the_package_never_calls_asyncio_wait_for():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "_generated" not in path.parts:
            found += wait_for_calls(path.read_text(), str(path.relative_to(PACKAGE.parent)))
    assert found == [], "use rlmesh_gym._deadline.wait_within instead of asyncio.wait_for"


def test_the_check_finds_both_spellings():
    source = (
        "import asyncio\nfrom asyncio import wait_for as wf\n"
        "async def f(x):\n    await asyncio.wait_for(x, 1)\n    await wf(x, 1)\n    await other.wait_for(x)\n"
    )
    assert wait_for_calls(source, "m.py") == ["m.py:4", "m.py:5"]
