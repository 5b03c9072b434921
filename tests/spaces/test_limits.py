"""Declared sizes of a SpaceSpec are checked before anything is allocated for them."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from rlmesh_gym.proto import env_pb2, spaces_pb2
from rlmesh_gym.spaces import CodecError, SpaceCodec, gym_space
from rlmesh_gym.spaces.limits import (
    DEFAULT_MAX_SPACE_ELEMENTS,
    MAX_SPACE_ELEMENTS_ENV,
    SpaceSpecError,
    check_space_spec,
    max_space_elements,
    set_max_space_elements,
)

F64 = spaces_pb2.D_TYPE_FLOAT64


def box(shape: list[int], dtype: int = F64) -> spaces_pb2.SpaceSpec:
    return spaces_pb2.SpaceSpec(shape=shape, dtype=dtype, box=spaces_pb2.BoxSpec(unbounded=True))


@pytest.fixture(autouse=True)
def default_limit(monkeypatch):
    monkeypatch.delenv(MAX_SPACE_ELEMENTS_ENV, raising=False)
    set_max_space_elements(None)
    yield
    set_max_space_elements(None)


BAD_SPECS = [
    (box([-1]), r"spec\.shape\[0\] = -1: a dimension must be >= 0"),
    (box([3, -2]), r"spec\.shape\[1\] = -2: a dimension must be >= 0"),
    (
        box([2**62, 4]),
        r"spec\.shape \[4611686018427387904, 4\]: the element count 18446744073709551616 overflows",
    ),
    (box([2**61]), r"spec\.shape \[2305843009213693952\]: .* past the int64 byte-length limit"),
    (
        box([16000, 16000]),
        r"spec: one value declares 256,000,000 elements, more than the limit of 33,554,432",
    ),
    (
        spaces_pb2.SpaceSpec(dtype=spaces_pb2.D_TYPE_INT64, discrete=spaces_pb2.DiscreteSpec(n=0)),
        r"spec\.discrete\.n = 0: a Discrete space needs n >= 1",
    ),
    (
        spaces_pb2.SpaceSpec(
            dtype=spaces_pb2.D_TYPE_INT64, discrete=spaces_pb2.DiscreteSpec(n=2, start=2**63 - 1)
        ),
        r"spec\.discrete: start 9223372036854775807 \+ n 2 - 1 overflows int64",
    ),
    (
        spaces_pb2.SpaceSpec(
            shape=[2],
            dtype=spaces_pb2.D_TYPE_INT64,
            multi_discrete=spaces_pb2.MultiDiscreteSpec(flat=spaces_pb2.VectorInt(data=[3, 0])),
        ),
        r"spec\.multi_discrete nvec entry 0: every entry must be >= 1",
    ),
    (
        spaces_pb2.SpaceSpec(dtype=spaces_pb2.D_TYPE_UINT8, multi_binary=spaces_pb2.MultiBinarySpec(size=-3)),
        r"spec\.multi_binary\.size\[0\] = -3: a dimension must be >= 0",
    ),
    (
        spaces_pb2.SpaceSpec(
            dtype=spaces_pb2.D_TYPE_UINT8,
            multi_binary=spaces_pb2.MultiBinarySpec(dims=spaces_pb2.VectorInt(data=[2**40, 2**40])),
        ),
        r"spec\.multi_binary\.dims \[1099511627776, 1099511627776\]: the element count \d+ overflows int64",
    ),
    (
        spaces_pb2.SpaceSpec(
            dtype=spaces_pb2.D_TYPE_UINT8, text=spaces_pb2.TextSpec(min_length=-1, max_length=3)
        ),
        r"spec\.text\.min_length = -1: a length must be >= 0",
    ),
    (
        spaces_pb2.SpaceSpec(
            dtype=spaces_pb2.D_TYPE_UINT8, text=spaces_pb2.TextSpec(min_length=0, max_length=10**12)
        ),
        r"spec: one value declares 1,000,000,000,000 elements, more than the limit",
    ),
    (
        spaces_pb2.SpaceSpec(dict=spaces_pb2.DictSpec(keys=["a", "b"], spaces=[box([4]), box([2, -1])])),
        r"spec\['b'\]\.shape\[1\] = -1: a dimension must be >= 0",
    ),
    (
        # Many leaves each under the limit still add up past it.
        spaces_pb2.SpaceSpec(tuple=spaces_pb2.TupleSpec(spaces=[box([5000, 5000])] * 2)),
        r"spec: one value declares 50,000,000 elements, more than the limit of 33,554,432",
    ),
]


@pytest.mark.parametrize(("spec", "message"), BAD_SPECS)
def test_gym_space_refuses_bad_declared_sizes_naming_field_and_rule(spec, message):
    with pytest.raises(SpaceSpecError, match=message):
        gym_space(spec)


@pytest.mark.parametrize(("spec", "message"), BAD_SPECS)
def test_the_codec_refuses_the_same_specs_as_codec_errors(spec, message):
    with pytest.raises(CodecError, match=message.replace("spec", "obs", 1)):
        SpaceCodec(spec, name="obs")


def test_sizes_at_the_limit_are_accepted_and_zero_dims_stay_legal():
    assert check_space_spec(box([2, 0, 3])) == 0
    assert gym_space(box([2, 0, 3])).shape == (2, 0, 3)
    assert check_space_spec(box([DEFAULT_MAX_SPACE_ELEMENTS])) == DEFAULT_MAX_SPACE_ELEMENTS
    with pytest.raises(SpaceSpecError, match="33,554,433 elements"):
        check_space_spec(box([DEFAULT_MAX_SPACE_ELEMENTS + 1]))


def test_the_limit_is_configurable_by_function_and_environment(monkeypatch):
    set_max_space_elements(3)
    with pytest.raises(SpaceSpecError, match=r"4 elements, more than the limit of 3 \(raise it with"):
        gym_space(box([4]))
    set_max_space_elements(None)
    monkeypatch.setenv(MAX_SPACE_ELEMENTS_ENV, "10")
    assert max_space_elements() == 10
    with pytest.raises(CodecError, match="more than the limit of 10"):
        SpaceCodec(box([11]))
    monkeypatch.setenv(MAX_SPACE_ELEMENTS_ENV, "lots")
    with pytest.raises(ValueError, match=f"{MAX_SPACE_ELEMENTS_ENV}='lots': expected a positive integer"):
        max_space_elements()
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ValueError, match="expected a positive integer"):
            set_max_space_elements(bad)


def test_policies_refuse_a_huge_declared_space_when_bound():
    from rlmesh_gym.policies import RandomPolicy

    contract = env_pb2.EnvContract(
        id="huge", num_envs=1, observation_space=box([2]), action_space=box([16000, 16000])
    )
    with pytest.raises(
        ValueError, match=r"RandomPolicy: the action space is unusable: action_space: one value"
    ):
        RandomPolicy(0, contract)


def run_capped(code: str, headroom_mb: int = 256) -> subprocess.CompletedProcess:
    """Run ``code`` after the imports with an address-space cap of what is mapped plus ``headroom_mb``.

    A regression that allocates in proportion to a declared shape hits MemoryError instead of
    taking the machine down.
    """
    script = textwrap.dedent(
        f"""
        import resource, psutil
        import numpy as np
        import gymnasium
        import torch
        from rlmesh_gym.proto import env_pb2, spaces_pb2
        from rlmesh_gym.spaces import SpaceCodec, gym_space
        from rlmesh_gym.policies import RandomPolicy, TorchPolicy
        from rlmesh_gym.spaces.kinds import describe_space
        cap = psutil.Process().memory_info().vms + {headroom_mb} * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        """
    )
    return subprocess.run(
        [sys.executable, "-c", script + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
@pytest.mark.torch
def test_huge_declared_spaces_are_refused_without_allocating_them():
    result = run_capped(
        """
        huge = spaces_pb2.SpaceSpec(
            shape=[16000, 16000], dtype=spaces_pb2.D_TYPE_FLOAT64,
            box=spaces_pb2.BoxSpec(uniform=spaces_pb2.UniformBounds(low=-1, high=1)),
        )
        contract = env_pb2.EnvContract(id="huge", num_envs=1, observation_space=huge, action_space=huge)
        print(describe_space(huge))
        for build in (
            lambda: gym_space(huge),
            lambda: SpaceCodec(huge),
            lambda: RandomPolicy(0, contract),
            lambda: TorchPolicy(torch.nn.Linear(2, 2)).bind(contract),
        ):
            try:
                build()
            except ValueError as error:
                print("refused:", error)
        """
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "Box(-1.0, 1.0, (16000, 16000), float64)"
    assert len(lines) == 5 and all("more than the limit of 33,554,432" in line for line in lines[1:]), lines


@pytest.mark.torch  # the shipped policy / every public module, torch included
def test_describing_a_large_allowed_space_allocates_nothing_of_its_size():
    # 30M float64 elements: 240 MB per bound side, far past the 64 MB headroom.
    result = run_capped(
        """
        spec = spaces_pb2.SpaceSpec(
            shape=[30_000_000], dtype=spaces_pb2.D_TYPE_FLOAT32, box=spaces_pb2.BoxSpec(unbounded=True)
        )
        SpaceCodec(spec)
        print(describe_space(spec))
        """,
        headroom_mb=64,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Box(-inf, inf, (30000000,), float32)"
