"""A finished evaluation leaves no reference cycle behind: the driver, its run, the hooks, the
policy, the env and the counted records are freed as soon as nothing uses them, not at the
garbage collector's next full pass (which would also have to walk them all)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest
import torch

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.evaluation import evaluate
from rlmesh_gym.policies import RandomPolicy, TorchPolicy
from rlmesh_gym.runtime import RuntimeDriver, RuntimeHooks, RuntimeSessionSpec


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


@pytest.mark.torch
def test_an_evaluation_leaves_no_cyclic_garbage(no_collector):
    evaluate("CartPole-v1", _policy(), episodes=4, num_envs=2, seed=0, progress=False)  # imports, caches
    gc.collect()
    result = evaluate("CartPole-v1", _policy(), episodes=6, num_envs=3, seed=1, progress=False)
    assert len(result.episodes) == 6
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


@pytest.mark.torch
def test_a_torch_policy_is_freed_when_dropped(no_collector):
    policy = TorchPolicy(_policy(), deterministic=False, seed=3)
    freed = weakref.ref(policy)
    del policy
    assert freed() is None


def test_a_driver_that_ran_is_freed_with_its_hooks_and_env(no_collector):
    class StopAfterTwoEpisodes(RuntimeHooks):
        """Holds the driver, as a hook that stops the session must."""

        def __init__(self) -> None:
            self.driver: RuntimeDriver | None = None
            self.episodes = 0

        async def episode_completed(self, event) -> None:
            self.episodes += 1
            if self.episodes == 2 and self.driver is not None:
                self.driver.request_stop("enough")

    env = GymVectorEnv.make("CartPole-v1", num_envs=2, autoreset="same_step")
    spec = RuntimeSessionSpec(
        session_id="s", route_id="r", env_contract=env.contract, num_envs=2, base_seed=0
    )
    hooks = StopAfterTwoEpisodes()
    driver = hooks.driver = RuntimeDriver(spec, env, RandomPolicy(0, env.contract), hooks)
    report = asyncio.run(driver.run())
    assert report.reason == "enough" and report.total_episodes >= 2
    hooks.driver = None  # the caller's own reference, dropped as the evaluation drops it
    freed = [weakref.ref(thing) for thing in (driver, driver._run, env)]
    del driver, env, hooks
    assert [ref() for ref in freed] == [None, None, None]
