"""A ``serve-policy`` process refuses a declared space past its element limit before allocating it."""

from __future__ import annotations

import signal

import psutil
import pytest
from _serve_fakes import run
from test_cli_serve import Served

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.proto import env_pb2, spaces_pb2
from rlmesh_gym.runtime import RuntimeDriver, RuntimeSessionSpec
from rlmesh_gym.runtime.errors import ModelRpcError
from rlmesh_gym.serve import RemoteModel


def box_contract(shape: list[int]) -> env_pb2.EnvContract:
    """CartPole's observation space with a float64 Box action space of ``shape`` (uniform bounds)."""
    observation = GymVectorEnv.make("CartPole-v1", num_envs=1)
    try:
        contract = env_pb2.EnvContract()
        contract.CopyFrom(observation.contract)
    finally:
        run(observation.close(5.0))
    contract.action_space.CopyFrom(
        spaces_pb2.SpaceSpec(
            shape=shape,
            dtype=spaces_pb2.D_TYPE_FLOAT64,
            box=spaces_pb2.BoxSpec(uniform=spaces_pb2.UniformBounds(low=-1.0, high=1.0)),
        )
    )
    return contract


@pytest.mark.slow
@pytest.mark.torch  # the shipped policy / every public module, torch included
def test_serve_policy_refuses_huge_declared_spaces_without_allocating_and_keeps_serving(no_leaked_threads):
    # 16000 x 16000 float64: 2 GB per bound side if anything were built for it (the 238-byte attack).
    huge, over_flag = box_contract([16000, 16000]), box_contract([2000])
    served = Served("serve-policy", "--address", "127.0.0.1:0", "--max-space-elements", "1000")
    server = psutil.Process(served.process.pid)

    async def scenario(address: str):
        refusals = []
        for contract in (huge, over_flag):
            model = await RemoteModel.connect(address)
            try:
                with pytest.raises(ModelRpcError) as refused:
                    await model.configure_route(contract, session_id="attack", route_id="r")
                refusals.append(str(refused.value))
            finally:
                await model.close()
        env = GymVectorEnv.make("CartPole-v1", num_envs=2)
        model = await RemoteModel.connect(address, contract=env.contract)
        spec = RuntimeSessionSpec(
            session_id="after",
            route_id="r",
            env_contract=env.contract,
            num_envs=2,
            base_seed=0,
            max_episodes=2,
        )
        try:
            report = await RuntimeDriver(spec, env, model).run()
        finally:
            await model.close()
            await env.close(5.0)
        return refusals, report

    try:
        address = served.address()
        # An address-space cap of what the server maps now plus 512 MB: a regression that builds
        # the declared Box fails with MemoryError instead of taking the machine down.
        cap = server.memory_info().vms + 512 * 2**20
        server.rlimit(psutil.RLIMIT_AS, (cap, cap))
        rss_before = server.memory_info().rss
        refusals, report = run(scenario(address), timeout=90)
        rss_growth = server.memory_info().rss - rss_before
    finally:
        code, stdout, stderr = served.finish(signal.SIGINT)
    assert "256,000,000 elements, more than the limit of 1,000" in refusals[0], refusals
    assert "action_space: one value declares 2,000 elements, more than the limit of 1,000" in refusals[1]
    assert "--max-space-elements" in refusals[1]
    assert report.total_episodes >= 2
    assert rss_growth < 100 * 2**20, rss_growth
    assert code == 0, stderr
