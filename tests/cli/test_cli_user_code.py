"""A user's module imported by the command line (``--import``, ``--policy module:attr``): one
error line and exit code 2 when it raises or calls ``sys.exit``, its prints kept off stdout
so ``--json`` stays parseable; ``--env-kwargs`` nested without bound is refused the same way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "rlmesh_gym"]
MODULES = {
    "raising_pkg": "raise RuntimeError('the package is broken')\n",
    "exiting_pkg": "import sys\nsys.exit(0)\n",
    "chatty_pkg": textwrap.dedent(
        """
        print("hello from chatty_pkg")

        def policy(observations):
            return (observations[:, 2] > 0).astype(int)
        """
    ),
}


@pytest.fixture
def modules(tmp_path: Path) -> Path:
    for name, source in MODULES.items():
        (tmp_path / f"{name}.py").write_text(source)
    return tmp_path


def _run(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(cwd), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([*CLI, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


EVAL = ("eval", "CartPole-v1", "--policy", "random", "--episodes", "2", "--no-progress", "--json")
COMPARE = ("compare", "CartPole-v1", "--policy", "a=random", "--policy", "b=random", "--episodes", "2",
           "--no-progress", "--json")  # fmt: skip


@pytest.mark.parametrize("command", [EVAL, COMPARE], ids=["eval", "compare"])
@pytest.mark.parametrize(
    ("module", "message"),
    [
        ("raising_pkg", "importing env package 'raising_pkg' raised RuntimeError: the package is broken"),
        ("exiting_pkg", "importing env package 'exiting_pkg' called sys.exit(0)"),
    ],
)
def test_an_import_that_raises_or_exits_is_one_error_line_with_exit_code_2(modules, command, module, message):
    done = _run(modules, *command, "--import", module)
    assert done.returncode == 2, (done.stdout, done.stderr)
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"rlmesh-gym: error: {message}")
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_a_policy_module_that_raises_is_one_error_line(modules):
    done = _run(
        modules, "eval", "CartPole-v1", "--policy", "raising_pkg:policy", "--episodes", "2", "--no-progress"
    )
    assert done.returncode == 2, done.stderr
    assert "importing module 'raising_pkg' for policy 'raising_pkg:policy' raised RuntimeError" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ("--import", "chatty_pkg", "--policy", "random"),
        ("--policy", "chatty_pkg:policy"),
    ],
    ids=["--import", "--policy module:attr"],
)
def test_what_a_module_prints_at_import_goes_to_stderr_and_json_stays_parseable(modules, argv):
    done = _run(modules, "eval", "CartPole-v1", *argv, "--episodes", "2", "--no-progress", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["summary"]["episodes"] == 2
    assert "hello from chatty_pkg" in done.stderr


def test_env_kwargs_nested_beyond_the_bound_are_one_error_line(tmp_path):
    done = _run(tmp_path, "eval", "CartPole-v1", "--policy", "random", "--env-kwargs", "x=" + "[" * 100_000)
    assert done.returncode == 2, done.stderr
    assert "nests arrays or objects 100000 levels deep; at most 64 are accepted" in done.stderr
    assert "Traceback" not in done.stderr and "RecursionError" not in done.stderr
    # 64 levels are still a value.
    done = _run(tmp_path, "inspect", "CartPole-v1", "--env-kwargs", "x=" + "[" * 64 + "]" * 64)
    assert "nests" not in done.stderr
