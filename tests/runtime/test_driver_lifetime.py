"""A driver that ran holds no reference cycle: once the caller lets go of it, the driver, its
run, its hooks and its env are freed by reference counting, without the garbage collector."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator

import pytest

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.policies import RandomPolicy
from rlmesh_gym.runtime import RuntimeDriver, RuntimeHooks, RuntimeSessionSpec


@pytest.fixture
def no_collector() -> Iterator[None]:
    """The garbage collector off for the test, and what it leaves collected afterwards."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


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
