"""A hung env call in the offload worker thread cannot keep the process from exiting."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import asyncio, threading, time
    import gymnasium as gym
    import numpy as np
    from rlmesh_gym.envs import GymVectorEnv
    from rlmesh_gym.policies import RandomPolicy
    from rlmesh_gym.runtime import OperationTimeoutError, RuntimeDriver, RuntimeLimits, RuntimeSessionSpec

    class HangingEnv(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            return np.zeros(2, np.float32), {}

        def step(self, action):
            threading.Event().wait()  # never returns
            raise AssertionError("unreachable")

    async def main():
        env = GymVectorEnv(HangingEnv(), offload=True)
        spec = RuntimeSessionSpec(
            session_id="s", route_id="r", env_contract=env.contract, num_envs=1, base_seed=0,
            max_episodes=1, limits=RuntimeLimits(env_step_timeout=0.3, service_close_timeout=0.3),
        )
        try:
            await RuntimeDriver(spec, env, RandomPolicy(0, env.contract)).run()
        except OperationTimeoutError as error:
            print("timed out:", error.operation, flush=True)
        print("worker alive:", any(t.name.startswith("rlmesh-gym-env") for t in threading.enumerate()))

    asyncio.run(main())
    print("exiting", flush=True)
    """
)


def test_a_process_whose_offloaded_env_step_hangs_exits_after_the_driver_timeout():
    result = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["timed out: env.step", "worker alive: True", "exiting"]
