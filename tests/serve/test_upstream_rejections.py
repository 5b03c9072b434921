"""Every rejection our servers share with upstream's has upstream's code and text.

The same requests go to rlmesh 0.1.0b3's own servers (``PyModel.serve``, ``rlmesh.EnvServer``)
and to ours over real ``Join`` streams; each answer must have upstream's error code and start
with upstream's message (ours may add detail after it). The deliberate differences listed in
docs/serving.md are asserted as such.
"""

from __future__ import annotations

import asyncio
import socket
import threading

import grpc
import gymnasium as gym
import numpy as np
import rlmesh
from _serve_fakes import FirstActionModel, PlainGymEnv, contract, run
from rlmesh import _rlmesh as b3

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.proto import env_pb2, env_pb2_grpc, model_pb2, model_pb2_grpc, spaces_pb2
from rlmesh_gym.serve import EnvServer, ModelServer
from rlmesh_gym.serve.handshake import EDITION_PINS, handshake_request

Context = model_pb2.PredictContext
Slot = model_pb2.PredictSlot
ROUTE_REQUEST = {"session_id": "s", "route_id": "r", "request_id": "q"}


def _predict(context: Context | None, rows: int = 1) -> model_pb2.PredictRequest:
    request = model_pb2.PredictRequest()
    if context is not None:
        request.context.CopyFrom(context)
    request.observation.bytes.data = np.zeros((rows, 2), np.float32).tobytes()
    return request


def _slots(*pairs: tuple[int, str]) -> list[model_pb2.PredictSlot]:
    return [Slot(env_index=index, episode_id=episode) for index, episode in pairs]


def _model_requests() -> list[tuple[str, model_pb2.JoinRequest]]:
    route = Context(session_id="s", route_id="r")
    no_spaces = contract(2)
    no_spaces.ClearField("action_space")
    cases = {
        "empty": model_pb2.JoinRequest(),
        "configure without context": model_pb2.JoinRequest(
            configure_route=model_pb2.ConfigureRouteRequest(env_contract=contract(2))
        ),
        "configure with empty route_id": model_pb2.JoinRequest(
            configure_route=model_pb2.ConfigureRouteRequest(
                context=Context(session_id="s"), env_contract=contract(2)
            )
        ),
        "configure with empty session_id": model_pb2.JoinRequest(
            configure_route=model_pb2.ConfigureRouteRequest(
                context=Context(route_id="r"), env_contract=contract(2)
            )
        ),
        "configure without contract": model_pb2.JoinRequest(
            configure_route=model_pb2.ConfigureRouteRequest(context=route)
        ),
        "configure with num_envs 0": model_pb2.JoinRequest(
            configure_route=model_pb2.ConfigureRouteRequest(context=route, env_contract=contract(0))
        ),
        "configure": model_pb2.JoinRequest(
            configure_route=model_pb2.ConfigureRouteRequest(context=route, env_contract=contract(2))
        ),
        "predict without context": model_pb2.JoinRequest(predict=_predict(None)),
        "predict with empty route_id": model_pb2.JoinRequest(
            predict=_predict(Context(session_id="s", request_id="q", slots=_slots((0, "e"))))
        ),
        "predict with empty request_id": model_pb2.JoinRequest(
            predict=_predict(Context(session_id="s", route_id="r", slots=_slots((0, "e"))))
        ),
        "predict with no slots": model_pb2.JoinRequest(
            predict=_predict(Context(session_id="s", route_id="r", request_id="q"), rows=0)
        ),
        "predict with a negative env_index": model_pb2.JoinRequest(
            predict=_predict(Context(session_id="s", route_id="r", request_id="q", slots=_slots((-1, "e"))))
        ),
        "predict with a duplicate env_index": model_pb2.JoinRequest(
            predict=_predict(Context(**ROUTE_REQUEST, slots=_slots((0, "e"), (0, "f"))), rows=2)
        ),
        "predict with an empty episode_id": model_pb2.JoinRequest(
            predict=_predict(Context(session_id="s", route_id="r", request_id="q", slots=_slots((0, ""))))
        ),
        "predict with more slots than lanes": model_pb2.JoinRequest(
            predict=_predict(
                Context(**ROUTE_REQUEST, slots=_slots((0, "a"), (1, "b"), (2, "c"))),
                rows=3,
            )
        ),
        "predict on a route never configured": model_pb2.JoinRequest(
            predict=_predict(Context(session_id="s", route_id="x", request_id="q", slots=_slots((0, "e"))))
        ),
        "close_route without route_id": model_pb2.JoinRequest(
            close_route=model_pb2.CloseRouteRequest(context=Context(session_id="s"))
        ),
        "close_route of an unknown route": model_pb2.JoinRequest(
            close_route=model_pb2.CloseRouteRequest(context=Context(session_id="s", route_id="zz"))
        ),
        "configure without an action space": model_pb2.JoinRequest(
            configure_route=model_pb2.ConfigureRouteRequest(
                context=Context(session_id="s", route_id="r2"), env_contract=no_spaces
            )
        ),
    }
    for number, request in enumerate(cases.values()):
        request.request_id = f"req-{number}"
    return list(cases.items())


# Deliberate differences (docs/serving.md): upstream's answer, then ours.
MODEL_DIFFERENCES = {
    "predict on a route never configured": ("INTERNAL", "NOT_CONFIGURED"),
    "configure without an action space": ("ok", "INVALID_REQUEST"),
}


async def _join_all(address: str, stub_type, requests) -> list:
    async with grpc.aio.insecure_channel(address) as channel:
        call = stub_type(channel).Join()
        replies = []
        for request in requests:
            await call.write(request)
            replies.append(await asyncio.wait_for(call.read(), 10))
        await call.done_writing()
        return replies


def _outcome(reply, codes) -> tuple[str, str]:
    if reply.WhichOneof("kind") != "error":
        return "ok", ""
    return codes.Name(reply.error.code).split("_ERROR_CODE_", 1)[-1], reply.error.message


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_model_server_rejections_match_b3s_model_server():
    cases = _model_requests()
    requests = [request for _, request in cases]
    address = f"127.0.0.1:{_free_port()}"
    model = b3.PyModel(lambda observation: 0)
    serving = threading.Thread(
        target=model.serve, args=(address, "", b3.ServeOptions(allow_remote_shutdown=True)), daemon=True
    )
    serving.start()

    async def upstream():
        async with grpc.aio.insecure_channel(address) as channel:
            await asyncio.wait_for(channel.channel_ready(), 10)
            stub = model_pb2_grpc.ModelServiceStub(channel)
            await stub.Handshake(handshake_request("model", EDITION_PINS["b3"]), timeout=10)
            replies = await _join_all(address, model_pb2_grpc.ModelServiceStub, requests)
            await stub.Shutdown(model_pb2.ShutdownRequest(reason="test over"), timeout=10)
            return replies

    async def ours():
        async with ModelServer(FirstActionModel()) as server:
            return await _join_all(server.address, model_pb2_grpc.ModelServiceStub, requests)

    theirs = run(upstream())
    serving.join(10.0)
    mine = run(ours())
    codes = model_pb2.ModelErrorCode
    for (name, _), their_reply, my_reply in zip(cases, theirs, mine, strict=True):
        their_code, their_text = _outcome(their_reply, codes)
        my_code, my_text = _outcome(my_reply, codes)
        if name in MODEL_DIFFERENCES:
            assert (their_code, my_code) == MODEL_DIFFERENCES[name], name
            assert my_text.startswith(their_text), (name, my_text, their_text)
            continue
        assert my_code == their_code, (name, my_code, their_code, my_text, their_text)
        assert my_text.startswith(their_text), (name, my_text, their_text)


def _actions(lanes: int) -> spaces_pb2.SpaceValue:
    value = spaces_pb2.SpaceValue()
    value.bytes.data = np.zeros(lanes, np.int64).tobytes()
    return value


def _env_requests(lanes: int) -> list[tuple[str, env_pb2.JoinRequest]]:
    cases = {
        "step before the first reset": env_pb2.JoinRequest(step=env_pb2.StepRequest(action=_actions(lanes))),
        "partial reset with a negative env_index": env_pb2.JoinRequest(
            reset=env_pb2.ResetRequest(env_indices=[-1])
        ),
        "partial reset out of range": env_pb2.JoinRequest(reset=env_pb2.ResetRequest(env_indices=[5])),
        "partial reset with a duplicate": env_pb2.JoinRequest(reset=env_pb2.ResetRequest(env_indices=[1, 1])),
        "partial reset with misaligned seeds": env_pb2.JoinRequest(
            reset=env_pb2.ResetRequest(env_indices=[1], seeds=[1, 2])
        ),
        "reset": env_pb2.JoinRequest(reset=env_pb2.ResetRequest(seeds=[1])),
        "subset step": env_pb2.JoinRequest(step=env_pb2.StepRequest(action=_actions(lanes), env_indices=[0])),
        "render of two lanes": env_pb2.JoinRequest(render=env_pb2.RenderRequest(mask=b"\x01\x01\x00")),
        "empty": env_pb2.JoinRequest(),
    }
    for number, request in enumerate(cases.values()):
        request.request_id = f"req-{number}"
    return list(cases.items())


def _vector(lanes: int) -> gym.vector.SyncVectorEnv:
    return gym.vector.SyncVectorEnv([PlainGymEnv] * lanes)


def test_env_server_rejections_match_b3s_env_server():
    lanes = 3
    cases = _env_requests(lanes)
    requests = [request for _, request in cases]

    async def upstream():
        server = rlmesh.EnvServer(_vector(lanes), "127.0.0.1:0")
        server.start()
        try:
            address = server.address.removeprefix("tcp://")
            async with grpc.aio.insecure_channel(address) as channel:
                stub = env_pb2_grpc.EnvServiceStub(channel)
                await stub.Handshake(handshake_request("env", EDITION_PINS["b3"]), timeout=10)
            return await _join_all(address, env_pb2_grpc.EnvServiceStub, requests)
        finally:
            server.shutdown()
            await asyncio.to_thread(server.wait, 10.0)

    async def ours():
        async with EnvServer(GymVectorEnv(_vector(lanes))) as server:
            return await _join_all(server.address, env_pb2_grpc.EnvServiceStub, requests)

    theirs = run(upstream())
    mine = run(ours())
    codes = env_pb2.EnvErrorCode
    for (name, _), their_reply, my_reply in zip(cases, theirs, mine, strict=True):
        their_code, their_text = _outcome(their_reply, codes)
        my_code, my_text = _outcome(my_reply, codes)
        assert my_code == their_code, (name, my_code, their_code, my_text, their_text)
        assert my_text.startswith(their_text), (name, my_text, their_text)
