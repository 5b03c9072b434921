"""The env server checks what a NEXT_STEP env reports, with upstream's INTERNAL errors and texts."""

from __future__ import annotations

import numpy as np
import pytest
from _serve_fakes import CountingEnv, run

from rlmesh_gym.proto import env_pb2
from rlmesh_gym.runtime.seams import RuntimeEnvStep
from rlmesh_gym.serve import EnvServer, RemoteEnv, RemoteEnvError


class ScriptedEnv(CountingEnv):
    """Two NEXT_STEP lanes; lane 0 completes on step 1; ``then`` shapes step 2's report."""

    def __init__(self, then: str) -> None:
        super().__init__(num_envs=2, length=100)
        self.then = then

    async def step(self, request):
        result = await super().step(request)
        response = result.response
        if self.steps == 1:
            response.terminated_mask = b"\x01\x00"
        elif self.then == "reward":
            response.rewards[:] = [0.5, 1.0]
        elif self.then == "done again":
            response.terminated_mask = b"\x01\x00"
            response.rewards[:] = [0.0, 1.0]
        elif self.then == "fresh":
            response.rewards[:] = [0.0, 1.0]
        if self.then == "short rewards":
            del response.rewards[1:]
        return RuntimeEnvStep(response)


def action() -> env_pb2.StepRequest:
    request = env_pb2.StepRequest()
    request.action.bytes.data = np.zeros(2, np.int64).tobytes()
    return request


def two_steps(env: ScriptedEnv, **options) -> list[str]:
    """Reset and step twice; each step's outcome: ``ok`` or ``CODE: message``."""

    async def scenario():
        async with EnvServer(env, **options) as server:
            remote = await RemoteEnv.connect(server.address)
            await remote.reset(env_pb2.ResetRequest())
            outcomes = []
            for _ in range(2):
                try:
                    await remote.step(action())
                    outcomes.append("ok")
                except RemoteEnvError as error:
                    outcomes.append(f"{error.code_name}: {error.server_message}")
            await remote.close()
            return outcomes

    return run(scenario())


def test_a_fresh_autoreset_step_passes():
    assert two_steps(ScriptedEnv("fresh")) == ["ok", "ok"]


def test_a_terminal_autoreset_step_is_upstreams_internal_error():
    assert two_steps(ScriptedEnv("done again")) == [
        "ok",
        "INTERNAL: NEXT_STEP lane 0 reported a terminal step where its autoreset observation was expected; "
        "after a completion the env must deliver one fresh (non-terminal) observation",
    ]


@pytest.mark.parametrize("strict", [False, True])
def test_an_autoreset_reward_is_accepted_unless_strict(strict):
    outcomes = two_steps(ScriptedEnv("reward"), strict_autoreset_reward=strict)
    if not strict:
        assert outcomes == ["ok", "ok"]
    else:
        assert outcomes == [
            "ok",
            "INTERNAL: NEXT_STEP lane 0 carried a non-zero reward (0.5) on its autoreset observation; the "
            "fresh observation after a completion must carry reward 0",
        ]


def test_a_partial_per_lane_vector_is_upstreams_internal_error():
    assert two_steps(ScriptedEnv("short rewards"))[0] == (
        "INTERNAL: StepResponse.rewards has length 1, which is neither empty nor the env's lane count 2; "
        "a partial per-lane vector would silently mask lanes"
    )
