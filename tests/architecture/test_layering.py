"""Dependencies point one way (docs/design/layering.md#layers): each layer imports only what lies below it."""

import subprocess
import sys

import pytest

# module -> third-party packages it must not load
FORBIDDEN = {
    "rlmesh_gym": ("gymnasium", "torch", "grpc"),
    "rlmesh_gym.proto": ("gymnasium", "torch", "grpc"),
    "rlmesh_gym.spaces.codec": ("gymnasium", "torch"),
    "rlmesh_gym.spaces.meta": ("gymnasium", "torch"),
    "rlmesh_gym.runtime": ("gymnasium", "torch", "grpc"),
    "rlmesh_gym.envs": ("torch", "grpc"),
    "rlmesh_gym.policies": ("gymnasium", "torch", "grpc"),
    "rlmesh_gym.policies.torch_policy": ("gymnasium",),
    "rlmesh_gym.policies.pretrained": ("gymnasium",),
}


@pytest.mark.parametrize("module", sorted(FORBIDDEN))
def test_module_does_not_load_forbidden_packages(module):
    code = (
        "import sys, importlib\n"
        f"importlib.import_module({module!r})\n"
        f"print(','.join(sorted(p for p in {FORBIDDEN[module]!r} if p in sys.modules)))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "", f"{module} loads {result.stdout.strip()}"
