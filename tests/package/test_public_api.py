"""The top-level names load lazily and are the same objects as in their home modules."""

import subprocess
import sys

import pytest

import rlmesh_gym

_TORCH_EXPORTS = ("TorchPolicy", "load_pretrained")  # resolving them imports torch


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=pytest.mark.torch) if name in _TORCH_EXPORTS else name
        for name in rlmesh_gym.__all__
        if name != "__version__"
    ],
)
def test_every_exported_name_resolves(name):
    assert getattr(rlmesh_gym, name) is getattr(sys.modules[rlmesh_gym._EXPORTS[name]], name)


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        rlmesh_gym.nope  # noqa: B018


def test_from_import_of_evaluate_works_in_a_fresh_interpreter():
    code = "from rlmesh_gym import evaluate, __version__; print(evaluate.__module__, __version__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["rlmesh_gym.evaluation._evaluate", rlmesh_gym.__version__]


def test_all_lists_exactly_the_lazy_exports():
    assert sorted(rlmesh_gym.__all__) == sorted(["__version__", *rlmesh_gym._EXPORTS])
