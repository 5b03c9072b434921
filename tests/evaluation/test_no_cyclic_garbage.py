"""A finished evaluation leaves no reference cycle behind: the driver, its run, the hooks, the
policy, the env and the counted records are freed as soon as nothing uses them, not at the
garbage collector's next full pass (which would also have to walk them all). The driver's own
case, without torch: tests/runtime/test_driver_lifetime.py."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest
import torch

from rlmesh_gym.evaluation import evaluate
from rlmesh_gym.policies import TorchPolicy

pytestmark = pytest.mark.torch  # (tests/conftest.py)


@pytest.fixture
def no_collector() -> Iterator[None]:
    """The garbage collector off (what is freed is freed by reference counting alone), and what
    the test leaves collected afterwards."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


def _policy() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(4, 2))


def test_an_evaluation_leaves_no_cyclic_garbage(no_collector):
    evaluate("CartPole-v1", _policy(), episodes=4, num_envs=2, seed=0, progress=False)  # imports, caches
    gc.collect()
    result = evaluate("CartPole-v1", _policy(), episodes=6, num_envs=3, seed=1, progress=False)
    assert len(result.episodes) == 6
    del result
    assert _cyclic_garbage_of("rlmesh_gym", "gymnasium", "torch") == []


def test_a_recorded_evaluation_leaves_no_cyclic_garbage(no_collector, tmp_path):
    # The recorder asks the evaluation which episodes it counted, and the driver holds the
    # recorder among its hooks.
    evaluate("CartPole-v1", _policy(), episodes=4, num_envs=2, seed=0, progress=False)
    gc.collect()
    result = evaluate(
        "CartPole-v1", _policy(), episodes=4, num_envs=2, seed=1, progress=False, record=tmp_path / "run.rec"
    )
    assert (tmp_path / "run.rec").exists() and len(result.episodes) == 4
    del result
    assert _cyclic_garbage_of("rlmesh_gym", "gymnasium", "torch") == []


def _cyclic_garbage_of(*packages: str) -> list[str]:
    """The types of the unreachable objects a collection finds now that come from ``packages``
    (other threads of the test process may leave garbage of their own meanwhile)."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return sorted(
            type(thing).__qualname__
            for thing in gc.garbage
            if type(thing).__module__.split(".")[0] in packages
        )
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def test_a_torch_policy_is_freed_when_dropped(no_collector):
    policy = TorchPolicy(_policy(), deterministic=False, seed=3)
    freed = weakref.ref(policy)
    del policy
    assert freed() is None
