"""A served env or policy that hangs inside a call never freezes the server process.

Real ``rlmesh-gym serve-env`` / ``serve-policy`` processes serve an env whose ``step`` and a policy
whose ``predict`` block for an hour (``_hanging.py``). While the call hangs, handshakes and other
streams are answered; SIGTERM and SIGINT stop the process cleanly (exit 0) within seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import numpy as np
import pytest
from _serve_fakes import port_is_free, run
from _served import Served

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.proto import env_pb2, model_pb2
from rlmesh_gym.runtime.errors import EnvRpcError, ModelRpcError
from rlmesh_gym.serve import RemoteEnv, RemoteModel, SessionBusyError, fetch_contract

HERE = Path(__file__).parent
ENV = {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
STOP_WITHIN = 20.0  # seconds; the hung call itself would take an hour


def step_request(action: int) -> env_pb2.StepRequest:
    request = env_pb2.StepRequest()
    request.action.bytes.data = np.array([action], np.int64).tobytes()
    return request


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_serve_env_answers_and_stops_while_the_env_hangs_in_step(signum):
    served = Served("serve-env", "_hanging:HangingStep-v0", "--address", "127.0.0.1:0", env=ENV)
    try:
        address = served.address()

        async def scenario():
            remote = await RemoteEnv.connect(address, connect_timeout=10)
            await remote.reset(env_pb2.ResetRequest(seeds=[1]))
            await remote.step(step_request(0))
            hung = asyncio.ensure_future(remote.step(step_request(1)))
            await asyncio.sleep(0.5)
            assert not hung.done()
            # The server's loop is free: handshakes are answered, a second session is refused at once.
            contract = await asyncio.wait_for(fetch_contract(address, timeout=5), 10)
            with pytest.raises(SessionBusyError):
                await asyncio.wait_for(RemoteEnv.connect(address, connect_timeout=5), 10)
            served.process.send_signal(signum)
            with pytest.raises(EnvRpcError) as ended:
                await asyncio.wait_for(hung, STOP_WITHIN)
            await remote.close()
            return contract, ended.value

        contract, ended = run(scenario(), timeout=60)
    finally:
        code, stdout, stderr = served.finish(timeout=STOP_WITHIN)
    assert contract.id == "HangingStep-v0"
    assert "env server is shutting down" in str(ended)
    assert code == 0, stderr
    assert stdout.endswith(f"stopped serving on {address}")
    assert "still inside a call that never returned" in stderr
    assert port_is_free(int(address.rsplit(":", 1)[1]))


@pytest.mark.slow
def test_serve_policy_answers_other_streams_and_stops_while_predict_hangs():
    served = Served("serve-policy", "_hanging:hanging_policy", "--address", "127.0.0.1:0", env=ENV)
    contract = GymVectorEnv.make("CartPole-v1", num_envs=1).contract
    try:
        address = served.address()

        async def predict(remote: RemoteModel, first: float, route: str) -> model_pb2.PredictResponse:
            request = model_pb2.PredictRequest(
                context=model_pb2.PredictContext(
                    session_id="s",
                    route_id=route,
                    request_id=f"{route}-1",
                    slots=[model_pb2.PredictSlot(env_index=0, episode_id="e")],
                )
            )
            request.observation.bytes.data = np.array([[first, 0, 0, 0]], np.float32).tobytes()
            return (await remote.predict(request)).response

        async def scenario():
            stuck = await RemoteModel.connect(address, contract=contract, connect_timeout=10)
            await stuck.configure_route(contract, session_id="s", route_id="a")
            await predict(stuck, -1.0, "a")
            hung = asyncio.ensure_future(predict(stuck, 1.0, "a"))
            await asyncio.sleep(0.5)
            assert not hung.done()
            # Another client connects, handshakes and configures its own route meanwhile.
            connecting = RemoteModel.connect(address, contract=contract, connect_timeout=5)
            other = await asyncio.wait_for(connecting, 10)
            await asyncio.wait_for(other.configure_route(contract, session_id="s", route_id="b"), 10)
            served.process.send_signal(signal.SIGTERM)
            with pytest.raises(ModelRpcError) as ended:
                await asyncio.wait_for(hung, STOP_WITHIN)
            for client in (other, stuck):
                with contextlib.suppress(ModelRpcError):  # the server is gone; the channel still closes
                    await client.close()
            return ended.value

        ended = run(scenario(), timeout=60)
    finally:
        code, stdout, stderr = served.finish(timeout=STOP_WITHIN)
    assert "model server is shutting down" in str(ended) or "connection closed" in str(ended)
    assert code == 0, stderr
    assert stdout.endswith(f"stopped serving on {address}")
    assert port_is_free(int(address.rsplit(":", 1)[1]))
