"""runtime.message_form: the array form and the message form of env results convert exactly."""

from __future__ import annotations

import numpy as np

from rlmesh_gym.proto import env_pb2, spaces_pb2
from rlmesh_gym.runtime.message_form import (
    MessageStepBatch,
    completed_episode,
    detached,
    episode_metadata,
    meta_map,
    reset_batch,
    reset_response,
    step_response,
)
from rlmesh_gym.runtime.seams import CompletedEpisode, EnvResetBatch, EnvStepBatch
from rlmesh_gym.runtime.telemetry import EndpointTelemetry
from rlmesh_gym.spaces import SpaceCodec, to_meta_map
from rlmesh_gym.spaces.batch import SpaceBatch

BOX = spaces_pb2.SpaceSpec(shape=[2], dtype=spaces_pb2.D_TYPE_FLOAT32, box=spaces_pb2.BoxSpec(unbounded=True))
CODEC = SpaceCodec(BOX, name="observation")


def _episodes() -> list[CompletedEpisode]:
    return [
        CompletedEpisode("a", 0, 3, 2.5, True, False, 10, 20, 1, 7, {"is_success": True, "x": np.arange(2)}),
        CompletedEpisode("b", 1, 1, -1.0, False, True, 11, 21, 0, None, None),
    ]


def _step() -> EnvStepBatch:
    observation = SpaceBatch.from_values(CODEC, np.array([[1, 2], [3, 4]], dtype=np.float32), 2)
    return EnvStepBatch(
        observation,
        np.array([0.5, -1.0]),
        np.array([True, False]),
        np.array([False, True]),
        ["c", "d"],
        _episodes(),
        {"lives": np.array([3, 2])},
    )


def test_step_response_is_the_field_by_field_message():
    expected = env_pb2.StepResponse(
        rewards=[0.5, -1.0], terminated_mask=b"\x01\x00", truncated_mask=b"\x00\x01", episode_ids=["c", "d"]
    )
    expected.observation.bytes.data = np.array([[1, 2], [3, 4]], dtype="<f4").tobytes()
    first = expected.completed_episodes.add(
        episode_id="a",
        env_index=0,
        step_count=3,
        cumulative_reward=2.5,
        terminated=True,
        start_timestamp_ns=10,
        end_timestamp_ns=20,
        duration_ms=1,
        seed=7,
    )
    first.final_info.CopyFrom(to_meta_map({"is_success": True, "x": [0, 1]}))
    expected.completed_episodes.add(
        episode_id="b",
        env_index=1,
        step_count=1,
        cumulative_reward=-1.0,
        truncated=True,
        start_timestamp_ns=11,
        end_timestamp_ns=21,
    )
    expected.infos.CopyFrom(to_meta_map({"lives": [3, 2]}))
    response = step_response(_step())
    assert response == expected
    assert not response.completed_episodes[1].HasField("seed")
    assert not response.completed_episodes[1].HasField("final_info")


def test_messages_and_arrays_round_trip():
    response = step_response(_step())
    again = step_response(MessageStepBatch(response, CODEC, 2))
    assert again.SerializeToString(deterministic=True) == response.SerializeToString(deterministic=True)
    batch = MessageStepBatch(response, CODEC, 2)
    assert batch.observation.values.tolist() == [[1, 2], [3, 4]]
    assert batch.rewards.tolist() == [0.5, -1.0]
    assert batch.terminated.tolist() == [True, False] and batch.truncated.tolist() == [False, True]
    assert [completed_episode(episode_metadata(e)).seed for e in _episodes()] == [7, None]
    empty = env_pb2.StepResponse()
    assert MessageStepBatch(empty, CODEC, 2).observation is None
    assert step_response(MessageStepBatch(empty, CODEC, 2)) == empty


def test_reset_round_trip_and_empty_infos():
    observation = SpaceBatch.from_values(CODEC, np.zeros((2, 2), dtype=np.float32), 2)
    response = reset_response(EnvResetBatch(observation, ["a", ""], {}))
    assert not response.HasField("infos") and list(response.episode_ids) == ["a", ""]
    assert reset_response(reset_batch(response, CODEC, 2)) == response
    assert meta_map({}, "infos") is None and meta_map(None, "infos") is None


def test_endpoint_telemetry_is_one_message_and_detached_copies_it():
    telemetry = EndpointTelemetry("env.step")
    first = telemetry.stamp(5)
    kept = detached(first)
    assert telemetry.stamp(9) is first and first.metrics[0].duration_ns == 9
    assert kept.metrics[0].duration_ns == 5 and kept.operation == "env.step"
    assert kept.metrics[0].name == "endpoint.total" and detached(None) is None


def test_generator_based_coroutines_count_as_awaitable():
    import types

    import pytest

    from rlmesh_gym.runtime.errors import ProtocolError
    from rlmesh_gym.runtime.guarded import require_awaitable

    @types.coroutine
    def legacy():
        yield from ()
        return 5

    awaitable = legacy()
    assert require_awaitable(awaitable, "env.step") is awaitable
    with pytest.raises(ProtocolError, match="env.step must be a coroutine function"):
        require_awaitable(object(), "env.step")
