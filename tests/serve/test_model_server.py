"""ModelServer + RemoteModel: routes, predict, slot validation, error codes, close semantics."""

from __future__ import annotations

import asyncio

import grpc
import numpy as np
import pytest
from _serve_fakes import FirstActionModel, contract, run

from rlmesh_gym.proto import model_pb2, model_pb2_grpc
from rlmesh_gym.runtime.errors import ModelRpcError
from rlmesh_gym.runtime.seams import RuntimeModelPrediction
from rlmesh_gym.serve import ModelServer, RemoteModel, RemoteModelError
from rlmesh_gym.serve.handshake import EDITION_PINS, handshake_request


def predict_request(
    rows: list[list[float]],
    request_id: str = "s:r:step_observation:000001",
    session: str = "s",
    route: str = "r",
) -> model_pb2.PredictRequest:
    slots = [model_pb2.PredictSlot(env_index=i, episode_id=f"ep-{i}", step=3) for i in range(len(rows))]
    request = model_pb2.PredictRequest(
        context=model_pb2.PredictContext(
            session_id=session, route_id=route, request_id=request_id, slots=slots
        )
    )
    request.observation.bytes.data = np.array(rows, np.float32).tobytes()
    return request


def test_predict_configures_the_bound_route_and_echoes_the_context(no_leaked_threads):
    async def scenario():
        model = FirstActionModel()
        async with ModelServer(model) as server:
            remote = await RemoteModel.connect(server.address, contract=contract(num_envs=3))
            request = predict_request([[1, 0], [2, 0], [5, 0]])
            prediction = await remote.predict(request)
            assert server.routes == [("s", "r")]
            second = await remote.predict(predict_request([[0, 0], [3, 0], [4, 0]], request_id="s:r:x:2"))
            await remote.close()
            assert server.routes == []
        return model, request, prediction, second

    model, request, prediction, second = run(scenario())
    assert prediction.response.context == request.context
    assert np.frombuffer(prediction.response.action.bytes.data, np.int64).tolist() == [1, 0, 1]
    assert np.frombuffer(second.response.action.bytes.data, np.int64).tolist() == [0, 1, 0]
    assert prediction.telemetry.operation == "model.predict"
    assert len(model.bound) == 1 and model.bound[0].num_envs == 3
    # Close ended the route on the model.
    assert model.closed_routes == [("s", "r", "client closed the session")]


class _UnboundFactory:
    """An unbound model whose bind returns the bound model (the other form BindableModel allows)."""

    def __init__(self) -> None:
        self.bound_models: list[FirstActionModel] = []

    def bind(self, contract):
        bound = FirstActionModel()
        bound.bind(contract)
        self.bound_models.append(bound)
        return bound

    async def predict(self, request):
        raise AssertionError("the unbound model must never predict")


def test_a_bind_that_returns_the_bound_model_serves_that_model(no_leaked_threads):
    async def scenario():
        factory = _UnboundFactory()
        async with ModelServer(factory) as server:
            remote = await RemoteModel.connect(server.address, contract=contract(num_envs=2))
            prediction = await remote.predict(predict_request([[1, 0], [2, 0]]))
            await remote.close()
        return factory, prediction

    factory, prediction = run(scenario())
    assert np.frombuffer(prediction.response.action.bytes.data, np.int64).tolist() == [1, 0]
    assert [model.predicts for model in factory.bound_models] == [1]


def test_predict_before_any_contract_is_a_clear_error():
    async def scenario():
        async with ModelServer(FirstActionModel()) as server:
            remote = await RemoteModel.connect(server.address)
            with pytest.raises(ModelRpcError, match="no contract"):
                await remote.predict(predict_request([[1, 0]]))
            await remote.close()

    run(scenario())


def test_close_route_reaches_the_model_and_unknown_routes_are_a_no_op():
    async def scenario():
        model = FirstActionModel()
        async with ModelServer(model) as server:
            remote = await RemoteModel.connect(server.address)
            await remote.configure_route(contract(2), session_id="s", route_id="r")
            await remote.predict(predict_request([[1, 0], [2, 0]]))
            close = model_pb2.CloseRouteRequest(
                context=model_pb2.PredictContext(
                    session_id="s", route_id="r", request_id="s:r:close_route:000009"
                ),
                reason="done",
            )
            await remote.close_route(close, 5.0)
            await remote.close_route(close, 5.0)  # already closed: nothing sent, no error
            routes_after = server.routes
            await remote.close()
        return model, routes_after

    model, routes_after = run(scenario())
    assert model.closed_routes == [("s", "r", "done")]
    assert routes_after == []


def _raw_join(address: str, requests: list[model_pb2.JoinRequest]) -> list[model_pb2.JoinResponse]:
    async def scenario():
        async with grpc.aio.insecure_channel(address) as channel:
            call = model_pb2_grpc.ModelServiceStub(channel).Join()
            replies = []
            for request in requests:
                await call.write(request)
                replies.append(await call.read())
            await call.done_writing()
            return replies

    return scenario()


def test_error_codes_follow_the_edition():
    configure = model_pb2.ConfigureRouteRequest(
        context=model_pb2.PredictContext(session_id="s", route_id="r"), env_contract=contract(2)
    )

    def predict_with(**changes) -> model_pb2.JoinRequest:
        request = predict_request([[1, 0], [2, 0]])
        for slot, (field, value) in changes.items():
            setattr(request.context.slots[int(slot[1:])], field, value)
        return model_pb2.JoinRequest(predict=request, request_id=request.context.request_id)

    duplicate = predict_request([[1, 0], [2, 0]])
    duplicate.context.slots[1].env_index = 0
    too_many = predict_request([[1, 0], [2, 0], [3, 0]])
    no_slots = predict_request([])
    requests = [
        model_pb2.JoinRequest(predict=predict_request([[1, 0]]), request_id="early"),  # not configured
        model_pb2.JoinRequest(
            configure_route=model_pb2.ConfigureRouteRequest(context=model_pb2.PredictContext(session_id="s")),
            request_id="bad-configure",
        ),
        model_pb2.JoinRequest(
            configure_route=model_pb2.ConfigureRouteRequest(
                context=model_pb2.PredictContext(session_id="s", route_id="r"), env_contract=contract(0)
            ),
            request_id="zero-envs",
        ),
        model_pb2.JoinRequest(configure_route=configure, request_id="configure"),
        predict_with(s0=("episode_id", "")),
        predict_with(s1=("env_index", -1)),
        model_pb2.JoinRequest(predict=duplicate, request_id="dup"),
        model_pb2.JoinRequest(predict=too_many, request_id="many"),
        model_pb2.JoinRequest(predict=no_slots, request_id="none"),
        model_pb2.JoinRequest(request_id="empty"),
        model_pb2.JoinRequest(
            close_route=model_pb2.CloseRouteRequest(context=model_pb2.PredictContext(session_id="s")),
            request_id="bad-close-route",
        ),
        model_pb2.JoinRequest(close=model_pb2.CloseRequest(reason="bye"), request_id="close"),
    ]

    async def scenario():
        async with ModelServer(FirstActionModel()) as server:
            return await _raw_join(server.address, requests)

    replies = run(scenario())
    assert [r.request_id for r in replies] == [r.request_id for r in requests]
    kinds = [(r.WhichOneof("kind"), r.error.code, r.error.is_recoverable) for r in replies]
    internal = ("error", model_pb2.MODEL_ERROR_CODE_INTERNAL, False)
    invalid = ("error", model_pb2.MODEL_ERROR_CODE_INVALID_REQUEST, False)
    assert kinds == [
        ("error", model_pb2.MODEL_ERROR_CODE_NOT_CONFIGURED, False),
        invalid,
        invalid,
        ("configure_route", 0, False),
        internal,
        internal,
        internal,
        internal,
        internal,
        invalid,
        invalid,
        ("close", 0, False),
    ]
    messages = [r.error.message for r in replies]
    assert messages[0].startswith("model error: model route was not configured")
    assert messages[4] == "internal error: model route slot 0 missing episode_id"
    assert messages[5] == "internal error: model route slot 1 has negative env_index -1"
    assert messages[6] == "internal error: model route has duplicate env_index 0"
    assert messages[7].startswith("model error: predict route has more slots than configured route")
    assert messages[8] == "internal error: model route must include at least one slot"
    assert messages[9] == "empty model request"


def test_model_failures_are_internal_with_the_models_recoverability():
    async def scenario():
        async with ModelServer(FirstActionModel(fail=True)) as server:
            remote = await RemoteModel.connect(server.address, contract=contract(1))
            with pytest.raises(RemoteModelError) as failure:
                await remote.predict(predict_request([[1, 0]]))
            await remote.close()
        return failure.value

    failure = run(scenario())
    assert (failure.code_name, failure.recoverable) == ("INTERNAL", True)
    assert "the network produced NaN" in failure.server_message


def test_a_stream_that_vanishes_has_its_routes_closed():
    async def scenario():
        model = FirstActionModel()
        async with ModelServer(model) as server:
            async with grpc.aio.insecure_channel(server.address) as channel:
                call = model_pb2_grpc.ModelServiceStub(channel).Join()
                await call.write(
                    model_pb2.JoinRequest(
                        configure_route=model_pb2.ConfigureRouteRequest(
                            context=model_pb2.PredictContext(session_id="a", route_id="b"),
                            env_contract=contract(1),
                        ),
                        request_id="1",
                    )
                )
                await call.read()
                call.cancel()
            for _ in range(100):
                if not server.routes:
                    break
                await asyncio.sleep(0.02)
        return model, server.routes

    model, routes = run(scenario())
    assert routes == []
    assert model.closed_routes == [("a", "b", "model session ended without Close")]


def test_a_route_with_other_spaces_is_refused_while_the_first_is_open():
    async def scenario():
        async with ModelServer(FirstActionModel()) as server:
            remote = await RemoteModel.connect(server.address)
            await remote.configure_route(contract(1), session_id="s", route_id="one")
            other = contract(1)
            other.observation_space.shape[:] = [3]
            with pytest.raises(RemoteModelError) as refused:
                await remote.configure_route(other, session_id="s", route_id="two")
            # Same spaces, more lanes: fine.
            await remote.configure_route(contract(4), session_id="s", route_id="three")
            await remote.close()
        return refused.value

    refused = run(scenario())
    assert refused.code_name == "INVALID_REQUEST"
    assert "different observation/action spaces" in refused.server_message


def test_model_handshake_response_uses_the_model_layout():
    async def scenario():
        async with ModelServer(FirstActionModel()) as server:
            async with grpc.aio.insecure_channel(server.address) as channel:
                stub = model_pb2_grpc.ModelServiceStub(channel)
                good = await stub.Handshake(handshake_request("model", EDITION_PINS["b3"]), timeout=5)
                refused = await stub.Shutdown(model_pb2.ShutdownRequest(reason="x"), timeout=5)
        return good, refused

    good, refused = run(scenario())
    assert good.compatible and good.selected_edition_spec_sha256 == EDITION_PINS["b3"]
    assert "rlmesh.model.concurrent_predict.v1" in good.capabilities
    assert (refused.accepted, refused.message) == (
        False,
        "remote shutdown is disabled for this model endpoint",
    )


class _OversizeModel(FirstActionModel):
    """Answers the first predict with an action too large for a 2 KiB limit, then normally."""

    async def predict(self, request: model_pb2.PredictRequest) -> RuntimeModelPrediction:
        prediction = await super().predict(request)
        if self.predicts == 1:
            prediction.response.action.bytes.data = b"\0" * 4096
        return prediction


def test_a_reply_over_the_servers_limit_is_an_in_band_error_and_the_stream_stays_open():
    async def scenario():
        model = _OversizeModel()
        async with ModelServer(model, max_message_bytes=2048) as server:
            remote = await RemoteModel.connect(server.address, contract=contract(1), request_timeout=10)
            with pytest.raises(RemoteModelError) as oversize:
                await remote.predict(predict_request([[1, 0]]))
            second = await remote.predict(predict_request([[3, 0]], request_id="s:r:x:2"))
            routes = server.routes
            await remote.close()
        return oversize.value, second, routes

    oversize, second, routes = run(scenario())
    assert (oversize.code_name, oversize.recoverable) == ("INTERNAL", False)
    assert "model.predict reply of" in oversize.server_message
    assert "exceeds the server's max message size of 2048 bytes" in oversize.server_message
    assert np.frombuffer(second.response.action.bytes.data, np.int64).tolist() == [1]
    assert routes == [("s", "r")]


def test_a_request_over_the_servers_limit_names_the_servers_limit():
    async def scenario():
        async with ModelServer(FirstActionModel(), max_message_bytes=2048) as server:
            remote = await RemoteModel.connect(server.address, contract=contract(1), request_timeout=10)
            request = predict_request([[1, 0]])
            request.observation.bytes.data = b"\0" * 8192
            with pytest.raises(ModelRpcError) as refused:
                await remote.predict(request)
            await remote.close()
        return str(refused.value)

    message = run(scenario())
    assert "SERVER: Received message larger than max" in message
    assert "the limit hit is the server's max_message_bytes" in message
    assert "on this side" not in message


def test_only_the_stream_that_configured_a_route_may_predict_on_or_close_it():
    async def scenario():
        model = FirstActionModel()
        async with ModelServer(model) as server:
            owner = await RemoteModel.connect(server.address, contract=contract(1), request_timeout=10)
            await owner.predict(predict_request([[1, 0]]))
            intruder = _raw_join(
                server.address,
                [
                    model_pb2.JoinRequest(
                        predict=predict_request([[1, 0]], request_id="x:1"), request_id="q"
                    ),
                    model_pb2.JoinRequest(
                        close_route=model_pb2.CloseRouteRequest(
                            context=model_pb2.PredictContext(session_id="s", route_id="r"), reason="steal"
                        ),
                        request_id="c",
                    ),
                    model_pb2.JoinRequest(close=model_pb2.CloseRequest(reason="bye"), request_id="close"),
                ],
            )
            replies = await intruder
            routes = server.routes
            # The owner's route still works.
            after = await owner.predict(predict_request([[3, 0]], request_id="s:r:x:2"))
            await owner.close()
        return model, replies, routes, after

    model, replies, routes, after = run(scenario())
    assert [(r.WhichOneof("kind"), r.error.code) for r in replies] == [
        ("error", model_pb2.MODEL_ERROR_CODE_INVALID_REQUEST),
        ("error", model_pb2.MODEL_ERROR_CODE_INVALID_REQUEST),
        ("close", 0),
    ]
    assert replies[0].error.message == (
        "route s:r is configured by another model session; this session cannot predict on it"
    )
    assert replies[1].error.message == (
        "route s:r is configured by another model session; this session cannot close it"
    )
    assert routes == [("s", "r")]
    assert model.predicts == 2  # the intruder's predict never reached the model
    assert np.frombuffer(after.response.action.bytes.data, np.int64).tolist() == [1]
    assert model.closed_routes == [("s", "r", "client closed the session")]


def test_a_closed_route_with_other_spaces_does_not_lock_later_clients_out():
    from rlmesh_gym.envs import GymVectorEnv
    from rlmesh_gym.policies import RandomPolicy

    cartpole = GymVectorEnv.make("CartPole-v1", num_envs=2).contract
    mountain_car = GymVectorEnv.make("MountainCar-v0", num_envs=2).contract

    async def scenario():
        async with ModelServer(RandomPolicy(seed=3)) as server:
            first = await RemoteModel.connect(server.address)
            await first.configure_route(cartpole, session_id="a", route_id="r")
            second = await RemoteModel.connect(server.address)
            with pytest.raises(RemoteModelError) as refused_while_open:
                await second.configure_route(mountain_car, session_id="b", route_id="r")
            await first.close()
            # The first client is gone: the policy may take the next client's spaces.
            await second.configure_route(mountain_car, session_id="b", route_id="r")
            request = model_pb2.PredictRequest(
                context=model_pb2.PredictContext(
                    session_id="b",
                    route_id="r",
                    request_id="q",
                    slots=[model_pb2.PredictSlot(env_index=i, episode_id=f"e{i}") for i in range(2)],
                )
            )
            request.observation.bytes.data = np.zeros((2, 2), np.float32).tobytes()
            actions = (await second.predict(request)).response.action.bytes.data
            await second.close()
            return refused_while_open.value, np.frombuffer(actions, np.int64)

    refused, actions = run(scenario())
    assert "different observation/action spaces" in refused.server_message
    assert actions.shape == (2,) and set(actions.tolist()) <= {0, 1, 2}


def test_a_policy_bound_before_serving_keeps_its_spaces():
    from rlmesh_gym.envs import GymVectorEnv
    from rlmesh_gym.policies import RandomPolicy

    cartpole = GymVectorEnv.make("CartPole-v1", num_envs=1).contract
    mountain_car = GymVectorEnv.make("MountainCar-v0", num_envs=1).contract

    async def scenario():
        async with ModelServer(RandomPolicy(seed=3, contract_or_spaces=cartpole)) as server:
            remote = await RemoteModel.connect(server.address)
            await remote.configure_route(cartpole, session_id="a", route_id="r")
            await remote.close_route(
                model_pb2.CloseRouteRequest(context=model_pb2.PredictContext(session_id="a", route_id="r"))
            )
            with pytest.raises(RemoteModelError) as refused:
                await remote.configure_route(mountain_car, session_id="a", route_id="r2")
            await remote.close()
            return refused.value

    refused = run(scenario())
    assert refused.code_name == "INVALID_REQUEST"
    assert "bound to other spaces before it was served" in refused.server_message
