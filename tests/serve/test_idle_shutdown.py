"""Upstream's server-wide idle shutdown (``idle_shutdown=``), beside the per-session ``idle_timeout``."""

from __future__ import annotations

import asyncio
import time

import grpc
import numpy as np
import pytest
from _serve_fakes import CountingEnv, FirstActionModel, run

from rlmesh_gym.proto import env_pb2
from rlmesh_gym.serve import EnvServer, ModelServer, RemoteEnv, RemoteModel

IDLE = 0.4


async def stopped_within(server, seconds: float) -> bool:
    try:
        await asyncio.wait_for(server.wait_closed(), seconds)
    except asyncio.TimeoutError:
        return False
    return True


@pytest.mark.parametrize(
    "make",
    [
        lambda: EnvServer(CountingEnv(), idle_shutdown=IDLE),
        lambda: ModelServer(FirstActionModel(), idle_shutdown=IDLE),
    ],
)
def test_a_server_nobody_calls_stops_with_upstreams_reason(make, no_leaked_threads):
    async def scenario():
        server = make()
        await server.start()
        started = time.monotonic()
        done = await stopped_within(server, 10)
        return done, time.monotonic() - started, server.stop_reason, server.serving

    done, waited, reason, serving = run(scenario())
    assert done and not serving
    assert waited >= IDLE
    assert reason == "idle timeout"


def test_an_open_session_keeps_the_server_up_and_its_end_starts_the_quiet_window(no_leaked_threads):
    async def scenario():
        async with EnvServer(CountingEnv(), idle_shutdown=IDLE) as server:
            remote = await RemoteEnv.connect(server.address)
            await remote.reset(env_pb2.ResetRequest())
            await asyncio.sleep(4 * IDLE)  # quiet, but the Join stream is open
            alive_during_session = server.serving
            await remote.close()
            closed_at = time.monotonic()
            done = await stopped_within(server, 10)
            return alive_during_session, done, time.monotonic() - closed_at, server.stop_reason

    alive, done, after_close, reason = run(scenario())
    assert alive
    assert done and reason == "idle timeout"
    assert after_close >= IDLE * 0.9


class SlowStepEnv(CountingEnv):
    """A step that takes ``4 * IDLE`` seconds of blocking work."""

    async def step(self, request):
        time.sleep(4 * IDLE)
        return await super().step(request)


def test_never_during_an_in_flight_request(no_leaked_threads):
    async def scenario():
        async with EnvServer(SlowStepEnv(), idle_shutdown=IDLE) as server:
            remote = await RemoteEnv.connect(server.address)
            await remote.reset(env_pb2.ResetRequest())
            step = await remote.step(env_pb2.StepRequest(action=_action()))
            alive = server.serving
            await remote.close()
            return alive, step.response.rewards[0], await stopped_within(server, 10)

    alive, reward, done = run(scenario())
    assert alive and reward == 1.0 and done


def _action():
    from rlmesh_gym.proto import spaces_pb2

    value = spaces_pb2.SpaceValue()
    value.bytes.data = np.zeros(1, np.int64).tobytes()
    return value


@pytest.mark.parametrize("method", ["Join", "Handshake"])
def test_the_activity_count_is_balanced_when_a_handler_raises(method, no_leaked_threads):
    async def scenario():
        server = EnvServer(CountingEnv(), idle_shutdown=IDLE)
        await server.start()
        async with grpc.aio.insecure_channel(server.address) as channel:
            if method == "Join":
                call = channel.stream_stream(
                    "/rlmesh.env.v1.EnvService/Join", request_serializer=lambda data: data
                )()
                await call.write(b"\xff\xff\xff\xff not a protobuf")
                with pytest.raises(grpc.aio.AioRpcError) as failed:
                    await asyncio.wait_for(call.read(), 5)
            else:
                raw = channel.unary_unary(
                    "/rlmesh.env.v1.EnvService/Handshake", request_serializer=lambda data: data
                )
                with pytest.raises(grpc.aio.AioRpcError) as failed:
                    await raw(b"\xff\xff\xff\xff not a protobuf", timeout=5)
        return failed.value, await stopped_within(server, 10), server.stop_reason

    failed, done, reason = run(scenario())
    assert failed.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "DecodeError" not in failed.details() and failed.details().startswith("malformed ")
    assert done and reason == "idle timeout"


def test_the_model_server_idles_out_after_its_streams_end(no_leaked_threads):
    from _serve_fakes import contract

    async def scenario():
        async with ModelServer(FirstActionModel(), idle_shutdown=IDLE) as server:
            remote = await RemoteModel.connect(server.address)
            await remote.configure_route(contract(1), session_id="s", route_id="r")
            await asyncio.sleep(3 * IDLE)
            alive = server.serving
            await remote.close()
            return alive, await stopped_within(server, 10), server.stop_reason

    alive, done, reason = run(scenario())
    assert alive and done and reason == "idle timeout"


def test_idle_shutdown_must_be_positive():
    with pytest.raises(ValueError, match="idle_shutdown must be"):
        EnvServer(CountingEnv(), idle_shutdown=0)
