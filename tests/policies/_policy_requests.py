"""Building PredictRequests and reading PredictResponses for the policy tests."""

from __future__ import annotations

import asyncio
from typing import Any

import gymnasium as gym
from _message_form import messages

from rlmesh_gym.proto import model_pb2, spaces_pb2
from rlmesh_gym.runtime import RuntimeModelPrediction
from rlmesh_gym.spaces import SpaceCodec, space_spec


def spec(space: gym.Space) -> spaces_pb2.SpaceSpec:
    """The SpaceSpec of a gymnasium space."""
    return space_spec(space)


def request(
    data: bytes | None,
    rows: int,
    *,
    session_id: str = "session",
    route_id: str = "route",
    request_id: str = "session:route:step_observation:000001",
    step: int = 0,
) -> model_pb2.PredictRequest:
    """A PredictRequest with ``rows`` slots (lanes 0..rows-1) and observation bytes ``data``."""
    req = model_pb2.PredictRequest()
    context = req.context
    context.session_id, context.route_id, context.request_id = session_id, route_id, request_id
    for lane in range(rows):
        context.slots.add(env_index=lane, episode_id=f"episode-{lane}", step=step, reset=step == 0)
    if data is not None:
        req.observation.bytes.data = data
    return req


def observe(space: gym.Space, values: Any, rows: int) -> bytes:
    """The message bytes of a batch of observations of ``space``."""
    return SpaceCodec(spec(space)).encode_batch(values, rows)


def predict(policy: Any, data: bytes | None, rows: int, **context: Any) -> RuntimeModelPrediction:
    """``policy``'s message-form predict on a fresh request, run to completion."""
    return asyncio.run(messages(policy).predict(request(data, rows, **context)))


def predicted_actions(policy: Any, data: bytes | None, rows: int, **context: Any) -> Any:
    """The action batch ``policy`` answers with, decoded by the codec of its action space."""
    prediction = predict(policy, data, rows, **context)
    return SpaceCodec(policy.action_spec).decode_batch(prediction.response.action.bytes.data, rows)


def close_route(policy: Any, session_id: str = "session", route_id: str = "route") -> None:
    """``policy.close_route`` for one route."""
    req = model_pb2.CloseRouteRequest(reason="test")
    req.context.session_id, req.context.route_id = session_id, route_id
    asyncio.run(policy.close_route(req, 1.0))
