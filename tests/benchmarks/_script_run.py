"""Running a benchmark script as its user would, for the smoke tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

# What every wall-time benchmark prints before and after its figures (benchmarks/_machine.py).
LOAD_LINE = r"load average \d+\.\d\d \d+\.\d\d \d+\.\d\d \(1/5/15 min\), \d+ cores"


def run_script(name: str, *arguments: str) -> list[str]:
    """The output lines of ``benchmarks/<name> <arguments>``, which must exit 0."""
    ran = subprocess.run(
        [sys.executable, str(BENCHMARKS / name), *arguments], capture_output=True, text=True, timeout=580
    )
    assert ran.returncode == 0, ran.stderr
    return ran.stdout.splitlines()
