"""The documented way to run a notebook outside the suite, ``jupyter execute``, is installed and works."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.notebook  # (tests/conftest.py)

JUPYTER = Path(sys.executable).with_name("jupyter")


def notebook(path: Path, *sources: str) -> Path:
    import nbformat

    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources]), path)
    return path


def execute(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(JUPYTER), "execute", *args], capture_output=True, text=True, timeout=300)


def test_jupyter_execute_runs_every_cell_and_saves_the_outputs_in_place(tmp_path: Path) -> None:
    import nbformat

    path = notebook(tmp_path / "tiny.ipynb", "import rlmesh_gym\nanswer = 6 * 7", "print(answer)")
    run = execute("--inplace", str(path))
    assert run.returncode == 0, run.stderr
    cells = nbformat.read(path, as_version=4).cells
    assert cells[1].outputs[0]["text"] == "42\n"


def test_jupyter_execute_fails_on_a_cell_that_raises(tmp_path: Path) -> None:
    run = execute(str(notebook(tmp_path / "broken.ipynb", "raise ValueError('cell 1 broke')")))
    assert run.returncode != 0
    assert "cell 1 broke" in run.stderr
