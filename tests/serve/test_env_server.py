"""EnvServer + RemoteEnv with a scripted env: requests, replies, error codes, sessions, render."""

from __future__ import annotations

import asyncio
import struct
import zlib

import grpc
import numpy as np
import pytest
from _serve_fakes import CountingEnv, decode_png, port_is_free, run

from rlmesh_gym.proto import env_pb2, env_pb2_grpc
from rlmesh_gym.runtime.errors import EnvRpcError
from rlmesh_gym.serve import EnvServer, RemoteEnv, RemoteEnvError, SessionBusyError
from rlmesh_gym.serve.env_server import SESSION_BUSY_MESSAGE
from rlmesh_gym.serve.handshake import EDITION_PINS, handshake_request

ACTION_0 = (0).to_bytes(8, "little")


def step_request(actions: list[int]) -> env_pb2.StepRequest:
    request = env_pb2.StepRequest()
    request.action.bytes.data = np.array(actions, np.int64).tobytes()
    return request


def test_reset_step_close_round_trip_carries_the_env_replies(no_leaked_threads):
    async def scenario():
        env = CountingEnv(num_envs=2, length=2)
        async with EnvServer(env) as server:
            remote = await RemoteEnv.connect(server.address)
            assert remote.contract.id == "Counting-v0" and remote.num_envs == 2
            reset = await remote.reset(env_pb2.ResetRequest(seeds=[5, 6]))
            assert reset.response.episode_ids == env.ids
            assert [v.int for v in reset.response.infos.entries["seeds"].list.items] == [5, 6]
            first = await remote.step(step_request([0, 1]))
            assert np.frombuffer(first.response.observation.bytes.data, np.float32).tolist() == [0, 1, 1, 1]
            assert first.telemetry.operation == "env.step"
            assert first.telemetry.metrics[0].name == "endpoint.total"
            assert first.telemetry.metrics[0].duration_ns > 0
            second = await remote.step(step_request([1, 1]))
            assert [
                (m.env_index, m.step_count, m.terminated) for m in second.response.completed_episodes
            ] == [
                (0, 2, True),
                (1, 2, True),
            ]
            await remote.reset(env_pb2.ResetRequest())
            await remote.step(step_request([0, 0]))
            running = list(env.ids)
            await remote.close()
            # Close ends the running episodes as truncated and reports them.
            assert [(m.episode_id, m.truncated) for m in remote.final_episodes] == [
                (i, True) for i in running
            ]
            assert await server.wait_idle(5.0)
            assert env.requests == ["reset", "step", "step", "reset", "step"]
            port = server.port
        return port

    port = run(scenario())
    assert port_is_free(port)


def test_request_ids_are_echoed_and_every_request_gets_one_reply():
    async def scenario():
        async with EnvServer(CountingEnv()) as server:
            async with grpc.aio.insecure_channel(server.address) as channel:
                call = env_pb2_grpc.EnvServiceStub(channel).Join()
                requests = [
                    env_pb2.JoinRequest(reset=env_pb2.ResetRequest(), request_id="a"),
                    env_pb2.JoinRequest(step=step_request([7]), request_id="b"),  # bad action
                    env_pb2.JoinRequest(request_id="c"),  # empty request
                    env_pb2.JoinRequest(step=step_request([1]), request_id=""),
                    env_pb2.JoinRequest(close=env_pb2.CloseRequest(reason="done"), request_id="d"),
                ]
                for request in requests:
                    await call.write(request)
                replies = [await call.read() for _ in requests]
                assert await call.read() is grpc.aio.EOF
                assert await call.code() == grpc.StatusCode.OK
        return replies

    replies = run(scenario())
    assert [r.request_id for r in replies] == ["a", "b", "c", "", "d"]
    assert [r.WhichOneof("kind") for r in replies] == ["reset", "error", "error", "step", "close"]
    bad_action, empty = replies[1].error, replies[2].error
    assert (bad_action.code, bad_action.is_recoverable) == (env_pb2.ENV_ERROR_CODE_INVALID_ACTION, True)
    assert "outside Discrete(2)" in bad_action.message
    assert (empty.code, empty.message, empty.is_recoverable) == (
        env_pb2.ENV_ERROR_CODE_INTERNAL,
        "empty request",
        False,
    )
    assert [r.telemetry.operation for r in replies] == [
        "env.reset",
        "env.step",
        "env.unknown",
        "env.step",
        "env.close",
    ]


def test_env_failures_are_internal_and_bad_actions_invalid_action_and_the_stream_stays_open():
    async def scenario():
        env = CountingEnv(fail_on_step=2)
        async with EnvServer(env) as server:
            remote = await RemoteEnv.connect(server.address)
            await remote.reset(env_pb2.ResetRequest())
            with pytest.raises(RemoteEnvError) as bad:
                await remote.step(step_request([3]))
            with pytest.raises(RemoteEnvError) as crash:
                await remote.step(step_request([0]))
            after = await remote.step(step_request([0]))
            await remote.close()
        return bad.value, crash.value, after

    bad, crash, after = run(scenario())
    assert (bad.code_name, bad.recoverable, bad.operation) == ("INVALID_ACTION", True, "env.step")
    assert "outside Discrete(2)" in bad.server_message
    assert (crash.code_name, crash.recoverable) == ("INTERNAL", False)
    assert crash.server_message == "step failed: ZeroDivisionError: the physics exploded"
    assert isinstance(crash, EnvRpcError)
    assert len(after.response.rewards) == 1


def test_a_second_client_gets_failed_precondition_and_the_slot_frees_when_the_first_leaves():
    async def scenario():
        async with EnvServer(CountingEnv()) as server:
            first = await RemoteEnv.connect(server.address)
            with pytest.raises(SessionBusyError) as busy:
                await RemoteEnv.connect(server.address)
            # Raw gRPC sees upstream's status and text.
            async with grpc.aio.insecure_channel(server.address) as channel:
                call = env_pb2_grpc.EnvServiceStub(channel).Join()
                with pytest.raises(grpc.aio.AioRpcError) as raw:
                    await call.read()
            await first.close()
            second = await RemoteEnv.connect(server.address)
            reset = await second.reset(env_pb2.ResetRequest())
            await second.close()
        return busy.value, raw.value, reset

    busy, raw, reset = run(scenario())
    assert SESSION_BUSY_MESSAGE in str(busy)
    assert raw.code() == grpc.StatusCode.FAILED_PRECONDITION and raw.details() == SESSION_BUSY_MESSAGE
    assert len(reset.response.episode_ids) == 1


def test_a_stream_that_ends_without_close_discards_the_running_episodes():
    async def scenario():
        env = CountingEnv()
        async with EnvServer(env) as server:
            async with grpc.aio.insecure_channel(server.address) as channel:
                call = env_pb2_grpc.EnvServiceStub(channel).Join()
                await call.write(env_pb2.JoinRequest(reset=env_pb2.ResetRequest()))
                await call.read()
                await call.done_writing()
                assert await call.read() is grpc.aio.EOF
            assert await server.wait_idle(5.0)
        return env

    env = run(scenario())
    assert env.drained == 1 and env.ids == [""]


def test_render_mask_may_select_at_most_one_existing_lane():
    async def scenario():
        async with EnvServer(CountingEnv(num_envs=2, render_mode="rgb_array")) as server:
            async with grpc.aio.insecure_channel(server.address) as channel:
                call = env_pb2_grpc.EnvServiceStub(channel).Join()
                replies = []
                for mask in (b"\x01\x01", b"\x00\x00\x01", b"\x00\x01"):
                    await call.write(env_pb2.JoinRequest(render=env_pb2.RenderRequest(mask=mask)))
                    replies.append(await call.read())
                await call.done_writing()
        return replies

    two, missing, lane1 = run(scenario())
    assert (two.error.code, two.error.message) == (
        env_pb2.ENV_ERROR_CODE_INVALID_ACTION,
        "render requests support at most one env_index (the mask selects lanes [0, 1])",
    )
    assert missing.error.code == env_pb2.ENV_ERROR_CODE_INVALID_ACTION
    assert "lanes 0..1" in missing.error.message
    assert lane1.render.HasField("png_frame")


def test_render_png_decodes_to_the_frame():
    async def scenario():
        async with EnvServer(CountingEnv(num_envs=2, render_mode="rgb_array")) as server:
            remote = await RemoteEnv.connect(server.address)
            await remote.reset(env_pb2.ResetRequest())
            await remote.step(step_request([0, 0]))
            png = await remote.render(1)
            await remote.close()
        return png

    png = run(scenario())
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (6, 4)
    idat_length = struct.unpack(">I", png[33:37])[0]
    rows = np.frombuffer(zlib.decompress(png[41 : 41 + idat_length]), np.uint8).reshape(4, 1 + 6 * 3)
    assert (rows[:, 0] == 0).all()
    pixels = rows[:, 1:].reshape(4, 6, 3)
    assert (pixels[..., 0] == 11).all() and (pixels[..., 1:] == 0).all()  # lane 1 at t=1


def test_render_without_rgb_array_has_no_frame():
    async def scenario():
        async with EnvServer(CountingEnv()) as server:
            remote = await RemoteEnv.connect(server.address)
            await remote.reset(env_pb2.ResetRequest())
            frame = await remote.render(0)
            await remote.close()
        return frame

    assert run(scenario()) is None


def test_shutdown_is_refused_unless_allowed_and_stops_the_server_when_allowed():
    async def scenario():
        async with EnvServer(CountingEnv()) as refusing:
            remote = await RemoteEnv.connect(refusing.address)
            refused = await remote.shutdown("please")
            await remote.close()
            assert refusing.serving
        allowing = EnvServer(CountingEnv(), allow_remote_shutdown=True)
        await allowing.start()
        async with grpc.aio.insecure_channel(allowing.address) as channel:
            answer = await env_pb2_grpc.EnvServiceStub(channel).Shutdown(
                env_pb2.ShutdownRequest(reason="maintenance"), timeout=5
            )
        await asyncio.wait_for(allowing.wait_closed(), 5)
        return refused, answer, allowing

    refused, answer, allowing = run(scenario())
    assert refused is False
    assert (answer.accepted, answer.message) == (True, "shutdown accepted: maintenance")
    assert not allowing.serving and port_is_free(allowing.port)


def test_shutdown_refusal_text_is_upstreams():
    async def scenario():
        async with EnvServer(CountingEnv()) as server:
            async with grpc.aio.insecure_channel(server.address) as channel:
                return await env_pb2_grpc.EnvServiceStub(channel).Shutdown(
                    env_pb2.ShutdownRequest(), timeout=5
                )

    answer = run(scenario())
    assert (answer.accepted, answer.message) == (
        False,
        "remote shutdown is disabled for this environment endpoint",
    )


def test_handshake_response_fields():
    async def scenario():
        async with EnvServer(CountingEnv(num_envs=3)) as server:
            async with grpc.aio.insecure_channel(server.address) as channel:
                stub = env_pb2_grpc.EnvServiceStub(channel)
                good = await stub.Handshake(handshake_request("env", EDITION_PINS["b3"]), timeout=5)
                bad = await stub.Handshake(handshake_request("env", EDITION_PINS["rc1"]), timeout=5)
        return good, bad

    good, bad = run(scenario())
    assert good.compatible and good.error_message == ""
    assert good.server_protocol_generation == good.min_supported_protocol_generation == "rlmesh.protocol.v1"
    assert (good.selected_workflow_edition, good.selected_edition_status) == ("2026.06", "provisional")
    assert good.selected_edition_spec_sha256 == EDITION_PINS["b3"]
    assert good.env_contract.num_envs == 3 and good.env_contract.id == "Counting-v0"
    assert dict(good.capabilities) == {"rlmesh.env.service.v1": "true", "rlmesh.spaces.core.v1": "true"}
    assert not bad.compatible and not bad.HasField("env_contract")
    assert (
        bad.selected_workflow_edition == bad.selected_edition_spec_sha256 == bad.selected_edition_status == ""
    )
    assert list(bad.supported_workflow_editions) == ["2026.06"] and bad.capabilities
    assert "checksum differs between peers" in bad.error_message


def test_a_reply_larger_than_the_limit_is_an_in_band_error_and_large_images_pass():
    class ImageEnv(CountingEnv):
        def __init__(self, side: int):
            super().__init__()
            self.side = side

        def _observation(self) -> bytes:
            return np.full((self.side, self.side, 3), self.t, np.uint8).tobytes()

    async def scenario():
        # 2 MiB limit: a 640x640x3 frame (1.2 MB) passes, a 1000x1000x3 one (3 MB) is refused in-band.
        limit = 2 * 1024 * 1024
        async with EnvServer(ImageEnv(640), max_message_bytes=limit) as server:
            remote = await RemoteEnv.connect(server.address, max_message_bytes=limit)
            fits = await remote.reset(env_pb2.ResetRequest())
            await remote.close()
        async with EnvServer(ImageEnv(1000), max_message_bytes=limit) as server:
            remote = await RemoteEnv.connect(server.address, max_message_bytes=limit)
            with pytest.raises(RemoteEnvError) as too_big:
                await remote.reset(env_pb2.ResetRequest())
            # The session survives: the next request gets its own (in-band) answer.
            with pytest.raises(RemoteEnvError) as again:
                await remote.step(step_request([0]))
            await remote.close()
        return fits, too_big.value, again.value

    fits, too_big, again = run(scenario())
    assert len(fits.response.observation.bytes.data) == 640 * 640 * 3
    assert (
        too_big.code_name == "INTERNAL" and "exceeds the server's max message size" in too_big.server_message
    )
    assert again.operation == "env.step" and "env.step reply of 3000" in again.server_message


def test_an_absurd_request_is_refused_by_grpc_before_it_reaches_the_env():
    async def scenario():
        env = CountingEnv()
        async with EnvServer(env, max_message_bytes=64 * 1024) as server:
            remote = await RemoteEnv.connect(server.address)  # client allows 256 MiB
            await remote.reset(env_pb2.ResetRequest())
            request = env_pb2.StepRequest()
            request.action.bytes.data = bytes(1024 * 1024)
            with pytest.raises(EnvRpcError) as refused:
                await remote.step(request)
            await remote.close()
            assert await server.wait_idle(5.0)
        return env, refused.value

    env, refused = run(scenario())
    assert env.requests == ["reset"]
    assert "RESOURCE_EXHAUSTED" in str(refused) or "message too large" in str(refused)


def test_env_server_argument_errors():
    with pytest.raises(TypeError, match=r"\.contract"):
        EnvServer(object())
    with pytest.raises(ValueError, match="unknown edition pin"):
        EnvServer(CountingEnv(), edition_pin="b4")
    with pytest.raises(ValueError, match="HOST:PORT"):
        EnvServer(CountingEnv(), address="localhost")
    with pytest.raises(ValueError, match="idle_timeout"):
        EnvServer(CountingEnv(), idle_timeout=0)
    with pytest.raises(ValueError, match="max_message_bytes"):
        EnvServer(CountingEnv(), max_message_bytes=10)
    with pytest.raises(ValueError, match="printable ASCII"):
        EnvServer(CountingEnv(), token="caf\u00e9")


def test_binding_a_taken_port_is_a_clear_oserror():
    async def scenario():
        async with EnvServer(CountingEnv()) as server:
            with pytest.raises(OSError, match="could not bind"):
                await EnvServer(CountingEnv(), address=server.address).start()

    run(scenario())


def test_a_request_past_its_timeout_ms_is_answered_with_timeout():
    class SlowEnv(CountingEnv):
        async def step(self, request):
            await asyncio.sleep(0.2)
            return await super().step(request)

    async def scenario():
        async with EnvServer(SlowEnv()) as server:
            remote = await RemoteEnv.connect(server.address)
            await remote.reset(env_pb2.ResetRequest())
            late = step_request([0])
            late.timeout_ms = 50
            with pytest.raises(RemoteEnvError) as timed_out:
                await remote.step(late)
            patient = step_request([0])
            patient.timeout_ms = 5000
            answered = await remote.step(patient)
            await remote.close()
        return timed_out.value, answered

    timed_out, answered = run(scenario())
    assert (timed_out.code_name, timed_out.recoverable) == ("TIMEOUT", True)
    assert timed_out.server_message == "env.step timed out after 50ms"
    assert len(answered.response.rewards) == 1


def test_a_real_gymnasium_env_renders_png_frames_per_lane():
    from rlmesh_gym.envs import GymVectorEnv

    async def scenario():
        env = GymVectorEnv.make("CartPole-v1", num_envs=2, render_mode="rgb_array")
        async with EnvServer(env) as server:
            remote = await RemoteEnv.connect(server.address)
            await remote.reset(env_pb2.ResetRequest(seeds=[1, 2]))
            frames = [await remote.render(lane) for lane in (0, 1)]
            expected = env.render_frames()
            await remote.close()
        await env.close(5.0)
        return frames, expected

    frames, expected = run(scenario())
    for png, frame in zip(frames, expected, strict=True):
        header, pixels = decode_png(png)
        assert header == (600, 400, 8, 2)
        np.testing.assert_array_equal(pixels, frame)
    assert frames[0] != frames[1]  # two lanes, two different carts
