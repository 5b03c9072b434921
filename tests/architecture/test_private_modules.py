"""A private module is its package's own (docs/design/layering.md#private-modules).

A module whose name starts with ``_`` (``evaluation/_evaluate.py``, ``policies/_spaces.py``) may
be imported only by modules of the same package: another package takes what it needs from a
public module (``envs/resolve.py``, ``policies/resolve.py``). The package-wide helpers at the top
(``rlmesh_gym/_audience.py``, ``rlmesh_gym/_wire.py``) belong to the lowest layer and are shared
by all. Checked on the source, every import statement, including the ones inside functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from test_layering import _write  # the fixture-tree writer of the layering test, beside this file

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "rlmesh_gym"


def _private_part(parts: list[str]) -> str | None:
    """The first private component below a unit (``_evaluate`` of ``evaluation._evaluate.x``)."""
    return next((part for part in parts[1:] if part.startswith("_") and part != "__init__"), None)


def foreign_private_imports(package_dir: Path) -> list[str]:
    """Every import of another package's private module in the package at ``package_dir``."""
    package = package_dir.name
    problems: list[str] = []
    for path in sorted(package_dir.rglob("*.py")):
        relative = path.relative_to(package_dir)
        if "_generated" in relative.parts:
            continue
        parts = list(relative.with_suffix("").parts)
        importer = parts[0] if len(parts) > 1 else ""  # "" for a top-level module
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name.split(".") for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                base = node.module.split(".")
                targets = [[*base, alias.name] for alias in node.names]
            else:
                continue  # relative imports stay within their own package
            for target in targets:
                if target[0] != package or len(target) < 3:
                    continue
                below = target[1:]
                private = _private_part(below)
                if private is not None and below[0] != importer:
                    problems.append(
                        f"{package}/{relative.as_posix()}:{node.lineno}: imports the private module "
                        f"{private!r} of {package}.{below[0]}"
                    )
    return problems


def test_no_package_imports_another_packages_private_module():
    assert foreign_private_imports(PACKAGE_DIR) == []


@pytest.fixture
def fixture_package(tmp_path) -> Path:
    """A package whose private modules are imported only from inside their own package."""
    root = tmp_path / "pkg"
    _write(root, "__init__.py")
    _write(root, "_audience.py")
    _write(root, "envs/__init__.py", "from pkg.envs._infos import lane_info\nfrom pkg import _audience\n")
    _write(root, "envs/_infos.py", "from pkg._audience import fix\n")
    _write(root, "envs/resolve.py", "from . import _infos\nfrom pkg.envs import _infos as again\n")
    _write(root, "cli/__init__.py", "from pkg.envs.resolve import make_env\nimport pkg._audience\n")
    return root


def test_the_fixture_package_passes(fixture_package):
    assert foreign_private_imports(fixture_package) == []


@pytest.mark.parametrize(
    ("relative", "source", "problem"),
    [
        (
            "cli/eval.py",
            "from pkg.evaluation._resolve import resolve_env\n",
            "pkg/cli/eval.py:1: imports the private module '_resolve' of pkg.evaluation",
        ),
        (
            "cli/eval.py",
            "def f():\n    from pkg.evaluation import _resolve\n",
            "pkg/cli/eval.py:2: imports the private module '_resolve' of pkg.evaluation",
        ),
        (
            "serve/x.py",
            "import pkg.policies._spaces.codec\n",
            "pkg/serve/x.py:1: imports the private module '_spaces' of pkg.policies",
        ),
        (
            "main.py",
            "from pkg.envs._infos import lane_info\n",
            "pkg/main.py:1: imports the private module '_infos' of pkg.envs",
        ),
    ],
    ids=["from-module", "from-package-inside-a-function", "import-statement", "top-level-module"],
)
def test_a_foreign_private_import_fails(fixture_package, relative, source, problem):
    _write(fixture_package, relative, source)
    assert foreign_private_imports(fixture_package) == [problem]
