"""Every notebook under ``notebooks/`` runs top to bottom without a cell error.

The notebooks are executed with nbclient on the ``python3`` kernel, which jupyter_client starts
with the interpreter running the tests (its kernelspec's ``python`` resolves to
``sys.executable``); a probe cell appended to each run checks that. Matplotlib uses the Agg
backend so no display is needed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

pytestmark = pytest.mark.notebook  # (tests/conftest.py)

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
_PROBE = "import sys; print(sys.executable)"


def test_there_are_notebooks():
    assert [path.name for path in NOTEBOOKS] == ["compare_policies.ipynb", "explore_episodes.ipynb"]


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[path.stem for path in NOTEBOOKS])
def test_notebook_executes_without_errors(path, monkeypatch):
    notebook = nbformat.read(path, as_version=4)
    # Outputs are stripped in git: a committed notebook carries no outputs or execution counts.
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{path.name} has outputs committed"
    notebook.cells.append(nbformat.v4.new_code_cell(_PROBE))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    client = NotebookClient(
        notebook,
        timeout=240,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    try:
        client.execute()
    except CellExecutionError as error:  # the message holds the failing cell and its traceback
        pytest.fail(f"{path.name}: a cell failed:\n{error}")
    probe = notebook.cells[-1].outputs
    printed = probe[0]["text"].strip() if probe else ""
    assert printed in {sys.executable, os.path.realpath(sys.executable)}, "the kernel is not this interpreter"
    errors = [
        o
        for cell in notebook.cells
        if cell.cell_type == "code"
        for o in cell.outputs
        if o.output_type == "error"
    ]
    assert errors == []
