"""Faults end with a named error, the server keeps serving the next client, nothing leaks."""

from __future__ import annotations

import asyncio
import socket

import grpc
import gymnasium as gym
import numpy as np
import pytest
import rlmesh
from _serve_fakes import CountingEnv, FirstActionModel, contract, port_is_free, run
from rlmesh import _rlmesh as b3

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.policies import RandomPolicy
from rlmesh_gym.proto import env_pb2, env_pb2_grpc
from rlmesh_gym.runtime import RuntimeDriver, RuntimeHooks, RuntimeSessionSpec
from rlmesh_gym.runtime.errors import EnvRpcError, ModelRpcError
from rlmesh_gym.serve import (
    AuthenticationError,
    EnvServer,
    HandshakeRejectedError,
    ModelServer,
    PeerUnavailableError,
    RemoteEnv,
    RemoteModel,
)
from rlmesh_gym.serve.errors import RemoteConnectionError
from rlmesh_gym.serve.handshake import resolve_edition_pin

ACTION_0 = env_pb2.StepRequest()
ACTION_0.action.bytes.data = (0).to_bytes(8, "little")


async def serves_next_client(server: EnvServer, **connect) -> int:
    """Connect a fresh client, reset and step it once, close it; return the reset's lane count."""
    return await serves_next_client_at(server.address, **connect)


async def serves_next_client_at(address: str, **connect) -> int:
    remote = await RemoteEnv.connect(address, **connect)
    reset = await remote.reset(env_pb2.ResetRequest())
    await remote.step(ACTION_0)
    await remote.close()
    return len(reset.response.episode_ids)


def spec_for(env, episodes: int | None = None) -> RuntimeSessionSpec:
    return RuntimeSessionSpec(
        session_id="faults",
        route_id="r",
        env_contract=env.contract,
        num_envs=env.contract.num_envs,
        max_episodes=episodes,
        base_seed=1,
        close_env_on_end=False,
    )


class AfterSteps(RuntimeHooks):
    """Runs ``action`` once, after the driver's ``steps``-th env step."""

    def __init__(self, steps: int, action) -> None:
        self.steps, self.action, self.seen = steps, action, 0

    async def step_completed(self, event) -> None:
        self.seen += 1
        if self.seen == self.steps:
            await self.action()


def test_env_server_vanishing_mid_episode_fails_the_driver_with_env_rpc_error(no_leaked_threads):
    async def scenario():
        server = EnvServer(GymVectorEnv.make("CartPole-v1", num_envs=2))
        await server.start()
        remote = await RemoteEnv.connect(server.address)
        hooks = AfterSteps(3, lambda: server.stop(grace=0))
        with pytest.raises(EnvRpcError) as lost:
            await RuntimeDriver(
                spec_for(remote),
                remote,
                RandomPolicy(seed=1, contract_or_spaces=remote.contract),
                hooks=hooks,
            ).run()
        await remote.close()  # already broken: only releases the channel
        # The port is free again and a new server there serves a new client.
        assert port_is_free(server.port)
        replacement = EnvServer(CountingEnv(), address=server.address)
        await replacement.start()
        lanes = await serves_next_client(replacement)
        await replacement.stop()
        return lost.value, lanes

    lost, lanes = run(scenario())
    assert lost.operation == "env.step" and not lost.recoverable
    assert "transport error: connection closed" in lost.message
    assert lanes == 1


def test_model_server_vanishing_mid_run_fails_the_driver_with_model_rpc_error(no_leaked_threads):
    async def scenario():
        env = GymVectorEnv.make("CartPole-v1", num_envs=1, autoreset="disabled")
        server = ModelServer(RandomPolicy(seed=2))
        await server.start()
        remote = await RemoteModel.connect(server.address, contract=env.contract)
        hooks = AfterSteps(4, lambda: server.stop(grace=0))
        with pytest.raises(ModelRpcError) as lost:
            await RuntimeDriver(spec_for(env), env, remote, hooks=hooks).run()
        await remote.close()
        await env.close(5.0)
        return lost.value, server.port

    lost, port = run(scenario())
    assert "connection closed" in lost.message or "shutting down" in lost.message
    assert port_is_free(port)


def test_a_client_vanishing_mid_episode_leaves_no_trace_for_the_next_client(no_leaked_threads):
    async def scenario():
        env = GymVectorEnv.make("CartPole-v1", num_envs=1, autoreset="disabled")
        async with EnvServer(env) as server:
            async with grpc.aio.insecure_channel(server.address) as channel:
                call = env_pb2_grpc.EnvServiceStub(channel).Join()
                await call.write(env_pb2.JoinRequest(reset=env_pb2.ResetRequest(seeds=[3])))
                await call.read()
                await call.write(env_pb2.JoinRequest(step=ACTION_0))
                await call.read()
                # The channel closes with the episode running: the client is gone.
            assert await server.wait_idle(5.0)
            remote = await RemoteEnv.connect(server.address)
            await remote.reset(env_pb2.ResetRequest(seeds=[4]))
            first_step = await remote.step(ACTION_0)
            await remote.close()
        await env.close(5.0)
        return first_step

    first_step = run(scenario())
    # The vanished client's episode (seed 3) was discarded, not reported to the next client.
    assert list(first_step.response.completed_episodes) == []


@pytest.mark.parametrize("pin", ["rc1", "0" * 64])
def test_a_wrong_edition_pin_is_refused_by_both_sides_and_the_server_keeps_serving(pin, no_leaked_threads):
    async def scenario():
        async with EnvServer(CountingEnv()) as ours:
            with pytest.raises(HandshakeRejectedError) as refused_by_ours:
                await RemoteEnv.connect(ours.address, edition_pin=pin)
            lanes = await serves_next_client(ours)
        upstream = rlmesh.EnvServer(gym.make("CartPole-v1"), "127.0.0.1:0")
        upstream.start()
        try:
            with pytest.raises(HandshakeRejectedError) as refused_by_b3:
                await RemoteEnv.connect(upstream.address.removeprefix("tcp://"), edition_pin=pin)
        finally:
            upstream.shutdown()
            await asyncio.to_thread(upstream.wait, 10.0)
        async with EnvServer(CountingEnv(), edition_pin=pin) as pinned:
            # A b3 client offers the b3 pin, so a server pinned otherwise refuses it.
            with pytest.raises(RuntimeError, match="handshake failed") as b3_refused:
                await asyncio.to_thread(
                    lambda: b3.PyEnvClient(pinned.address, connect_timeout_seconds=5).handshake()
                )
            same_pin = await serves_next_client(pinned, edition_pin=pin)
        return refused_by_ours.value, refused_by_b3.value, b3_refused.value, lanes, same_pin

    ours, upstream, b3_refused, lanes, same_pin = run(scenario())
    for refusal in (ours, upstream):
        assert "provisional workflow edition 2026.06 checksum differs between peers" in str(refusal)
        assert resolve_edition_pin(pin)[:12] in str(refusal) and "c03b0c916521" in str(refusal)
    # Our server's refusal, as the b3 client reports it: our pin against the b3 client's.
    ours_then_theirs = f"spec {resolve_edition_pin(pin)[:12]} vs peer 0.1.0-beta.3 (beta) spec c03b0c916521"
    assert f"this build 0.1.0 (release) {ours_then_theirs}" in str(b3_refused)
    assert lanes == same_pin == 1


def test_tokens_are_compared_exactly_on_both_services(no_leaked_threads):
    async def scenario():
        outcomes = {}
        async with EnvServer(CountingEnv(), token="s3cret") as env_server:
            for label, token in (("missing", None), ("wrong", "S3CRET"), ("prefixed", "Bearer s3cret")):
                with pytest.raises(AuthenticationError) as refused:
                    await RemoteEnv.connect(env_server.address, token=token)
                outcomes[f"env-{label}"] = str(refused.value)
            outcomes["env-right"] = await serves_next_client(env_server, token="s3cret")
            # rlmesh 0.1.0b3's run_local sends no token at all: it gets upstream's refusal.
            with pytest.raises(ConnectionError) as b3_without:
                await asyncio.to_thread(
                    b3.PyModel(lambda obs: 0).run_local_for_episodes, env_server.address, "", 1
                )
            outcomes["b3-without"] = str(b3_without.value)
            assert await env_server.wait_idle(5.0)
        async with ModelServer(FirstActionModel(), token="s3cret") as model_server:
            with pytest.raises(AuthenticationError) as refused:
                await RemoteModel.connect(model_server.address, token="nope")
            outcomes["model-wrong"] = str(refused.value)
            right = await RemoteModel.connect(model_server.address, token="s3cret", contract=contract(1))
            await right.configure_route(session_id="s", route_id="r")
            await right.close()
        # Our client's token is what rlmesh's own env server checks.
        upstream = rlmesh.EnvServer(
            gym.make("CartPole-v1"), "127.0.0.1:0", options=b3.ServeOptions(token="s3cret")
        )
        upstream.start()
        try:
            address = upstream.address.removeprefix("tcp://")
            with pytest.raises(AuthenticationError) as refused:
                await RemoteEnv.connect(address, token="wrong")
            outcomes["upstream-wrong"] = str(refused.value)
            outcomes["upstream-right"] = await serves_next_client_at(address, token="s3cret")
        finally:
            upstream.shutdown()
            await asyncio.to_thread(upstream.wait, 10.0)
        return outcomes

    outcomes = run(scenario())
    for label in ("env-missing", "env-wrong", "env-prefixed"):
        assert "invalid env token" in outcomes[label]
    assert outcomes["env-right"] == 1
    assert "invalid env token" in outcomes["b3-without"]
    assert "invalid env token" in outcomes["upstream-wrong"]
    assert outcomes["upstream-right"] == 1
    assert "invalid model token" in outcomes["model-wrong"]


def test_a_malformed_request_ends_that_stream_only(no_leaked_threads):
    async def scenario():
        async with EnvServer(CountingEnv()) as server:
            async with grpc.aio.insecure_channel(server.address) as channel:
                raw = channel.stream_stream(
                    "/rlmesh.env.v1.EnvService/Join",
                    request_serializer=lambda data: data,
                    response_deserializer=env_pb2.JoinResponse.FromString,
                )
                call = raw()
                await call.write(b"\xff\xff\xff\xff not a protobuf")
                with pytest.raises(grpc.aio.AioRpcError) as broken:
                    await asyncio.wait_for(call.read(), 5)
            assert await server.wait_idle(5.0)
            lanes = await serves_next_client(server)
        return broken.value, lanes

    broken, lanes = run(scenario())
    assert broken.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert broken.details().startswith("malformed JoinRequest: ")
    assert lanes == 1


def test_a_client_that_never_sends_is_cut_off_by_the_idle_timeout(no_leaked_threads):
    async def scenario():
        async with EnvServer(CountingEnv(), idle_timeout=0.3) as server:
            # A raw TCP connection that never speaks HTTP/2 blocks nobody.
            silent = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            try:
                idle = await RemoteEnv.connect(server.address)  # holds the one session, sends nothing
                await asyncio.sleep(0.6)
                assert await server.wait_idle(5.0)
                with pytest.raises(EnvRpcError) as cut_off:
                    await idle.reset(env_pb2.ResetRequest())
                await idle.close()
                lanes = await serves_next_client(server)
            finally:
                silent.close()
        return cut_off.value, lanes

    cut_off, lanes = run(scenario())
    assert "no request for 0.3s (idle timeout)" in cut_off.message
    assert lanes == 1


def test_a_client_that_sends_but_never_reads_is_cut_off_by_the_idle_timeout(no_leaked_threads):
    class BigObservationEnv(CountingEnv):
        async def reset(self, request):
            result = await super().reset(request)
            result.response.observation.bytes.data = b"\0" * (8 << 20)
            return result

    async def scenario():
        async with EnvServer(BigObservationEnv(), idle_timeout=0.5) as server:
            async with grpc.aio.insecure_channel(server.address) as channel:
                call = env_pb2_grpc.EnvServiceStub(channel).Join()
                await call.initial_metadata()
                # Replies pile up unread until HTTP/2 flow control stalls the server's send.
                for index in range(20):
                    await call.write(
                        env_pb2.JoinRequest(request_id=f"r{index}", reset=env_pb2.ResetRequest())
                    )
                freed = await server.wait_idle(10.0)
                call.cancel()
            lanes = await serves_next_client(server)
        return freed, lanes

    freed, lanes = run(scenario())
    assert freed
    assert lanes == 1


def test_a_hung_env_hits_the_client_request_timeout_and_the_session_is_marked_broken(no_leaked_threads):
    class HangingEnv(CountingEnv):
        async def step(self, request):
            await asyncio.sleep(30)
            return await super().step(request)

    async def scenario():
        env = HangingEnv()
        async with EnvServer(env) as server:
            remote = await RemoteEnv.connect(server.address, request_timeout=0.3)
            await remote.reset(env_pb2.ResetRequest())
            with pytest.raises(EnvRpcError) as timed_out:
                await remote.step(ACTION_0)
            with pytest.raises(EnvRpcError) as after:
                await remote.reset(env_pb2.ResetRequest())
            await remote.close()
            assert await server.wait_idle(5.0)
            env.step = CountingEnv.step.__get__(env)  # the env recovers; the next client is served
            lanes = await serves_next_client(server)
        return timed_out.value, after.value, lanes

    timed_out, after, lanes = run(scenario())
    assert "within request_timeout=0.3s" in timed_out.message
    assert "session unusable after an earlier failure" in after.message
    assert lanes == 1


def test_connecting_to_nothing_is_peer_unavailable_within_the_connect_timeout(no_leaked_threads):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    async def scenario():
        with pytest.raises(PeerUnavailableError) as env_error:
            await RemoteEnv.connect(f"127.0.0.1:{port}", connect_timeout=0.5)
        with pytest.raises(PeerUnavailableError) as model_error:
            await RemoteModel.connect(f"127.0.0.1:{port}", connect_timeout=0.5)
        return env_error.value, model_error.value

    env_error, model_error = run(scenario())
    assert "no server answered within 0.5s" in str(env_error) and env_error.address == f"127.0.0.1:{port}"
    assert isinstance(model_error, RemoteConnectionError)


def test_the_wrong_service_at_the_address_is_named():
    async def scenario():
        async with ModelServer(FirstActionModel()) as model_server:
            with pytest.raises(RemoteConnectionError) as wrong:
                await RemoteEnv.connect(model_server.address)
        return wrong.value

    wrong = run(scenario())
    assert "does not implement the rlmesh env service" in str(wrong)


def test_an_oversized_action_is_refused_by_the_client_and_the_session_survives():
    async def scenario():
        async with EnvServer(CountingEnv()) as server:
            remote = await RemoteEnv.connect(server.address, max_message_bytes=64 * 1024)
            await remote.reset(env_pb2.ResetRequest())
            huge = env_pb2.StepRequest()
            huge.action.bytes.data = np.zeros(100_000, np.int64).tobytes()
            with pytest.raises(EnvRpcError) as refused:
                await remote.step(huge)
            still = await remote.step(ACTION_0)
            await remote.close()
        return refused.value, still

    refused, still = run(scenario())
    assert refused.recoverable and "exceeds max_message_bytes=65536 of this client" in refused.message
    assert len(still.response.rewards) == 1
