"""Any combination of test directories collects in one pytest command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_two_test_directories_with_their_own_conftest_collect_together() -> None:
    # Both directories have a conftest.py; --doctest-modules (pyproject.toml) used to import both
    # as the module "conftest" and stop with "import file mismatch". The test modules themselves
    # are left out: only the directories' own files matter here.
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
               "--ignore-glob=*/test_*.py", "tests/serve", "tests/recording"]  # fmt: skip
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode in (0, 5), run.stdout + run.stderr  # 5: nothing but helpers collected
    assert "import file mismatch" not in run.stdout
    assert "error" not in run.stdout.lower(), run.stdout
