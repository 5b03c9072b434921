"""lazy_exports: names loaded on first use, cached, listed by dir(), unknown names refused."""

from __future__ import annotations

import sys
import types

import pytest

from rlmesh_gym._lazy import lazy_exports


def test_a_lazy_name_loads_once_is_cached_and_listed():
    module = types.ModuleType("lazy_probe")
    module.__all__ = ["dumps"]
    sys.modules["lazy_probe"] = module
    loads: list[str] = []
    try:
        module.__getattr__, module.__dir__ = lazy_exports(
            "lazy_probe",
            {"dumps": "json"},
            before_load=lambda: loads.append("load"),
        )
        assert "dumps" in dir(module) and "dumps" not in vars(module)
        import json

        assert module.dumps is json.dumps
        assert vars(module)["dumps"] is json.dumps  # cached: later lookups skip __getattr__
        assert loads == ["load"]
        with pytest.raises(AttributeError, match="module 'lazy_probe' has no attribute 'nope'"):
            module.nope  # noqa: B018
        assert loads == ["load"]
    finally:
        del sys.modules["lazy_probe"]


def test_a_name_that_is_a_submodule_of_its_home_is_that_submodule():
    module = types.ModuleType("lazy_probe_sub")
    sys.modules["lazy_probe_sub"] = module
    try:
        homes = {"env_pb2_grpc": "rlmesh_gym.proto._generated"}
        module.__getattr__ = lazy_exports("lazy_probe_sub", homes)[0]
        assert module.env_pb2_grpc.__name__ == "rlmesh_gym.proto._generated.env_pb2_grpc"
    finally:
        del sys.modules["lazy_probe_sub"]
