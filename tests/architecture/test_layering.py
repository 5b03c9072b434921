"""Dependencies point one way (docs/design/layering.md#layers): each layer imports only what lies below it.

Two checks: our own packages import only downward (read from the source, every import
statement, including the ones inside functions and under ``TYPE_CHECKING``), and each module
loads only the third-party packages its layer may use (docs/design/layering.md#third-party).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "rlmesh_gym"

# Bottom to top. A module may import its own unit and every unit of an earlier layer; units of
# one layer (envs and policies) never import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("_lazy", "_deadline", "_regular_file"),
    ("_daemon_thread",),
    ("proto", "_wire", "_audience", "assets"),
    ("_user_code",),
    ("spaces",),
    ("runtime",),
    ("envs", "policies"),
    ("recording",),
    ("evaluation",),
    ("serve",),
    ("cli",),
    ("__main__",),
)
# What any layer may take from the facade (the package's own __init__), which sits above all.
FROM_FACADE = frozenset({"__version__"})
# The one sanctioned upward import, each with its reason (docs/design/layering.md#exceptions).
ALLOWED_UPWARD: dict[tuple[str, str], str] = {
    ("evaluation/fleet.py", "serve"): "evaluate_fleet([address, ...]) connects to env servers; the gRPC "
    "transport is loaded on demand inside the fleet module only",
}


def _unit_of(parts: Sequence[str]) -> str:
    """The layer unit of a module path below the package (``""`` for the facade itself)."""
    return parts[0] if parts else ""


def _imported_modules(
    node: ast.AST, module_parts: list[str], is_package: bool
) -> list[tuple[list[str], str]]:
    """(the imported module's path, the name taken from it) for each alias of one import node.

    Relative imports are resolved against ``module_parts``; their path ends in ``"<rel>"``.
    """
    if isinstance(node, ast.Import):
        return [(alias.name.split("."), "") for alias in node.names]
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        base = module_parts if is_package else module_parts[:-1]
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        target = [*base, *(node.module.split(".") if node.module else [])]
        return [([*target, "<rel>"], alias.name) for alias in node.names]
    return [(node.module.split("."), alias.name) for alias in node.names] if node.module else []


def upward_imports(
    package_dir: Path,
    layers: Sequence[Sequence[str]] = LAYERS,
    allowed: Mapping[tuple[str, str], str] = ALLOWED_UPWARD,
) -> list[str]:
    """Every import in the package at ``package_dir`` that does not point down, as readable lines.

    A unit (first path component below the package) missing from ``layers`` is reported too, so
    a new subpackage gets a place in the layering before it can import anything.
    """
    package = package_dir.name
    rank = {unit: index for index, layer in enumerate(layers) for unit in layer}
    problems: list[str] = []
    for path in sorted(package_dir.rglob("*.py")):
        relative = path.relative_to(package_dir)
        if "_generated" in relative.parts:
            continue
        is_package = path.name == "__init__.py"
        module_parts = list(
            relative.with_suffix("").parts[:-1] if is_package else relative.with_suffix("").parts
        )
        importer = _unit_of(module_parts)
        if importer and importer not in rank:
            problems.append(f"{package}/{relative}: unit {importer!r} has no layer (add it to LAYERS)")
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target, name in _imported_modules(node, [package, *module_parts], is_package):
                if target[0] != package:
                    continue  # third-party and standard library: the second check
                below = [part for part in target[1:] if part != "<rel>"]
                if not below and name and name not in FROM_FACADE:
                    below = [name] if name in rank else []
                imported = _unit_of(below)
                line = f"{package}/{relative}:{node.lineno}"
                if not importer:
                    continue  # the facade sits above everything
                if not imported:
                    if name not in FROM_FACADE:
                        problems.append(f"{line}: imports {name or package!r} from the facade {package!r}")
                    continue
                if imported == importer:
                    continue
                if imported not in rank:
                    problems.append(f"{line}: imports {package}.{imported}, which has no layer")
                elif rank[imported] >= rank[importer] and (relative.as_posix(), imported) not in allowed:
                    kind = "a sibling" if rank[imported] == rank[importer] else "an upper layer"
                    problems.append(f"{line}: {importer} imports {imported} ({kind})")
    return problems


def test_our_packages_import_only_downward():
    assert upward_imports(PACKAGE_DIR) == []


def test_every_unit_of_the_package_has_a_layer():
    units = {p.name.removesuffix(".py") for p in PACKAGE_DIR.iterdir() if p.name != "__pycache__"}
    units = {u for u in units if u != "__init__" and not u.startswith(".") and u != "py.typed"}
    assert units <= {unit for layer in LAYERS for unit in layer}


def _write(root: Path, relative: str, source: str = "") -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)


@pytest.fixture
def fixture_package(tmp_path) -> Path:
    """A package laid out like ours whose imports all point down."""
    root = tmp_path / "pkg"
    _write(
        root,
        "__init__.py",
        "__version__ = '1'\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.cli\n",
    )
    _write(root, "proto/__init__.py")
    _write(root, "spaces/__init__.py", "from pkg.proto import x\n")
    _write(root, "runtime/__init__.py", "from ..spaces import codec\nfrom . import state\n")
    _write(root, "runtime/state.py", "from pkg import __version__\nimport pkg.proto\n")
    _write(root, "envs/__init__.py", "from pkg.runtime import seams\n")
    _write(root, "policies/__init__.py", "from pkg.runtime import seams\n")
    _write(root, "cli/__init__.py", "from pkg.envs import GymVectorEnv\nfrom pkg import policies\n")
    return root


def test_the_fixture_package_passes(fixture_package):
    assert upward_imports(fixture_package) == []


@pytest.mark.parametrize(
    ("relative", "source", "problem"),
    [
        (
            "spaces/codec.py",
            "from pkg.runtime import state\n",
            "pkg/spaces/codec.py:1: spaces imports runtime (an upper layer)",
        ),
        (
            "spaces/codec.py",
            "def f():\n    import pkg.envs.x\n",
            "pkg/spaces/codec.py:2: spaces imports envs (an upper layer)",
        ),
        (
            "runtime/hooks.py",
            "from ..cli import main\n",
            "pkg/runtime/hooks.py:1: runtime imports cli (an upper layer)",
        ),
        (
            "envs/gym.py",
            "from pkg.policies import TorchPolicy\n",
            "pkg/envs/gym.py:1: envs imports policies (a sibling)",
        ),
        ("policies/x.py", "from pkg import envs\n", "pkg/policies/x.py:1: policies imports envs (a sibling)"),
        (
            "runtime/spec.py",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.evaluation import run\n",
            "pkg/runtime/spec.py:3: runtime imports evaluation (an upper layer)",
        ),
        (
            "spaces/meta.py",
            "from pkg import evaluate\n",
            "pkg/spaces/meta.py:1: imports 'evaluate' from the facade 'pkg'",
        ),
        ("extras/__init__.py", "", "pkg/extras/__init__.py: unit 'extras' has no layer (add it to LAYERS)"),
    ],
    ids=[
        "upward",
        "inside-a-function",
        "relative",
        "sibling",
        "sibling-via-facade",
        "type-checking",
        "facade",
        "new-unit",
    ],
)
def test_an_import_that_does_not_point_down_fails(fixture_package, relative, source, problem):
    _write(fixture_package, relative, source)
    assert upward_imports(fixture_package) == [problem]


# module -> third-party packages it must not load
FORBIDDEN = {
    "rlmesh_gym": ("gymnasium", "torch", "grpc", "ray"),
    "rlmesh_gym.proto": ("gymnasium", "torch", "grpc"),
    "rlmesh_gym.spaces.codec": ("gymnasium", "torch"),
    "rlmesh_gym.spaces.meta": ("gymnasium", "torch"),
    "rlmesh_gym.runtime": ("gymnasium", "torch", "grpc"),
    "rlmesh_gym.envs": ("torch", "grpc"),
    "rlmesh_gym.policies": ("gymnasium", "torch", "grpc"),
    "rlmesh_gym.policies.torch_policy": ("gymnasium",),
    "rlmesh_gym.policies.pretrained": ("gymnasium",),
    "rlmesh_gym.evaluation": ("ray",),  # loaded when evaluate_on_ray runs, not before
    "rlmesh_gym.cli": ("ray",),
}


@pytest.mark.parametrize(
    "module",
    [
        pytest.param(module, marks=pytest.mark.torch) if "torch" not in FORBIDDEN[module] else module
        for module in sorted(FORBIDDEN)
    ],
)
def test_module_does_not_load_forbidden_packages(module):
    code = (
        "import sys, importlib\n"
        f"importlib.import_module({module!r})\n"
        f"print(','.join(sorted(p for p in {FORBIDDEN[module]!r} if p in sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "", f"{module} loads {result.stdout.strip()}"
