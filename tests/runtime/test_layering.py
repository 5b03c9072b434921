"""rlmesh_gym.runtime never imports gymnasium or torch."""

from __future__ import annotations

import subprocess
import sys


def test_runtime_imports_neither_gymnasium_nor_torch() -> None:
    code = (
        "import sys, rlmesh_gym.runtime, rlmesh_gym.runtime.driver, rlmesh_gym.runtime.telemetry\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'gymnasium', 'torch'}))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
