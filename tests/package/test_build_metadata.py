"""The package's metadata builds without setuptools deprecation warnings (pyproject.toml's license)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_building_the_metadata_warns_of_nothing_and_states_the_spdx_license(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "rlmesh_gym").mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    (project / "rlmesh_gym" / "__init__.py").write_text("")
    (project / "out").mkdir()
    script = "from setuptools import build_meta; print(build_meta.prepare_metadata_for_build_wheel('out'))"
    run = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", script],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "deprecat" not in (run.stdout + run.stderr).lower(), run.stderr
    metadata = (project / "out" / run.stdout.strip().splitlines()[-1] / "METADATA").read_text()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
