"""Route state: slots, the episode registry, counters, request ids (docs/design/runtime.md#route-state)."""

from __future__ import annotations

import gc

from _runtime_fakes import single_env_spec

from rlmesh_gym.proto import common_pb2, model_pb2
from rlmesh_gym.runtime.state import EpisodeRegistry, RegisteredEpisode, RequestPhase, RouteState, SlotState


def test_route_state_tracks_slot_episode_records() -> None:
    state = RouteState("session", "route", num_envs=2)
    started = state.start_episodes(["env-ep-a", "env-ep-b"], False)
    assert len(started) == 2
    snapshot = state.snapshot()
    assert snapshot.episode_ids == ["env-ep-a", "env-ep-b"]
    assert snapshot.episode_record_ids == ["ep-000001", "ep-000002"]
    assert [(slot.env_index, slot.episode_id) for slot in state.slots()] == [(0, "env-ep-a"), (1, "env-ep-b")]


def test_route_state_generates_monotonic_request_ids() -> None:
    state = RouteState("session", "route")
    assert state.next_request_id("reset") == "session:route:reset:000001"
    assert state.next_request_id("step") == "session:route:step:000002"
    assert state.next_request_id(RequestPhase.CLOSE_ROUTE) == "session:route:close_route:000003"


def test_request_ids_do_not_collide_across_sibling_routes() -> None:
    first = RouteState("session", "route-a").next_request_id("reset")
    second = RouteState("session", "route-b").next_request_id("reset")
    assert (first, second) == ("session:route-a:reset:000001", "session:route-b:reset:000001")


def test_request_ids_widen_past_six_digits() -> None:
    state = RouteState("s", "r")
    state.request_seq = 999_999
    assert state.next_request_id("p") == "s:r:p:1000000"


def test_episode_record_ids_are_global_across_vector_slots() -> None:
    registry = EpisodeRegistry()
    record_ids, started = registry.ensure_for_slots(["runtime-a", "runtime-b"], False)
    assert record_ids == ["ep-000001", "ep-000002"]
    assert [(s.episode_id, s.record.started_from_auto_reset) for s in started] == [
        ("runtime-a", False),
        ("runtime-b", False),
    ]
    record_ids, started = registry.ensure_for_slots(["runtime-a", "runtime-c"], True)
    assert record_ids == ["ep-000001", "ep-000003"]
    assert started[0].episode_id == "runtime-c"
    assert started[0].record == RegisteredEpisode("ep-000003", 3, 1, True)
    assert len(started) == 1


def test_record_ids_widen_past_999999() -> None:
    registry = EpisodeRegistry()
    ids = [str(n) for n in range(1_000_000)]
    record_ids = registry.ensure_lanes(ids, range(len(ids)), False, None)
    assert record_ids[-2:] == ["ep-999999", "ep-1000000"]
    assert registry.names(["999999"]) == [("ep-1000000", 1_000_000)]


def test_empty_ids_get_empty_record_ids_and_no_start() -> None:
    registry = EpisodeRegistry()
    record_ids, started = registry.ensure_for_slots(["", "a", ""], True)
    assert record_ids == ["", "ep-000001", ""]
    assert [(s.episode_id, s.record.env_index) for s in started] == [("a", 1)]


def test_new_slots_start_reset_with_no_episode() -> None:
    state = RouteState("s", "r", num_envs=3)
    assert state.slots() == [SlotState(i, "", "", 0, True) for i in range(3)]
    assert state.snapshot().reset is True and state.step == 0


def test_record_step_advances_every_lane_and_clears_reset() -> None:
    state = RouteState("s", "r", num_envs=2)
    state.start_episodes(["a", "b"], False)
    state.record_step()
    state.record_step()
    assert [(slot.step, slot.reset) for slot in state.slots()] == [(2, False), (2, False)]
    assert state.total_steps == 2


def test_observe_rolls_only_changed_lanes() -> None:
    state = RouteState("s", "r", num_envs=3)
    state.start_episodes(["a", "b", "c"], False)
    state.record_step()
    state.record_step()
    started = state.observe_episode_ids(["a", "b2", "c"])
    assert [
        (s.episode_id, s.record.record_id, s.record.env_index, s.record.started_from_auto_reset)
        for s in started
    ] == [("b2", "ep-000004", 1, True)]
    assert [(slot.step, slot.reset) for slot in state.slots()] == [(2, False), (0, True), (2, False)]
    assert state.episode_record_ids() == ["ep-000001", "ep-000004", "ep-000003"]
    state.record_step()
    assert state.lane_steps() == [3, 1, 3]


def test_empty_id_clears_the_episode_but_keeps_the_step() -> None:
    state = RouteState("s", "r", num_envs=2)
    state.start_episodes(["a", "b"], False)
    state.record_step()
    assert state.observe_episode_ids(["", "b"]) == []
    assert state.slots()[0] == SlotState(0, "", "", 1, False)
    # A shorter list means "" for the missing lanes.
    state.observe_episode_ids(["a2"])
    assert state.slots() == [SlotState(0, "a2", "ep-000003", 0, True), SlotState(1, "", "", 1, False)]


def test_reused_id_is_not_started_again_and_keeps_its_record() -> None:
    state = RouteState("s", "r")
    assert len(state.start_episodes(["same"], False)) == 1
    state.record_step()
    assert state.start_episodes(["same"], True) == []
    assert state.snapshot().episode_record_id == "ep-000001"
    assert (state.step, state.snapshot().reset) == (0, True)  # a forced sync resets the step anyway


def test_longer_id_lists_register_extra_positions_like_upstream() -> None:
    state = RouteState("s", "r", num_envs=1)
    started = state.observe_episode_ids(["a", "extra"])
    assert [(s.episode_id, s.record.env_index) for s in started] == [("a", 0), ("extra", 1)]
    assert state.episode_ids() == ["a"]


def test_complete_episode_always_counts() -> None:
    state = RouteState("s", "r")
    state.start_episodes(["a"], False)
    assert state.complete_episode("a") == RegisteredEpisode("ep-000001", 1, 0, False)
    assert state.complete_episode("never-seen") is None
    assert state.complete_episode("a") is not None  # records are never deleted
    assert state.total_episodes == 3


def test_unreported_starts_are_registered_all_the_same() -> None:
    state = RouteState("s", "r", num_envs=2)
    state.start_episodes(["a", "b"], False)
    assert state.observe_episode_ids(["a", "b2"], report_started=False) == []
    assert state.episode_record_ids() == ["ep-000001", "ep-000003"]
    assert state.observe_episode_ids(["a3", "b2"])[0].record.record_id == "ep-000004"


def test_complete_episodes_counts_each_and_returns_their_record_names_in_order() -> None:
    state = RouteState("s", "r", num_envs=2)
    state.start_episodes(["a", "b"], False)
    assert state.complete_episodes(["b", "never-seen", "a"]) == [("ep-000002", 2), ("", 0), ("ep-000001", 1)]
    assert state.complete_episodes([]) == []
    assert state.total_episodes == 3


def test_snapshot_is_lane_zero_centric() -> None:
    state = RouteState("s", "r", num_envs=2)
    state.start_episodes(["a", "b"], False)
    state.record_step()
    state.observe_episode_ids(["a", "b2"])
    snapshot = state.snapshot()
    assert (
        snapshot.episode_id,
        snapshot.episode_record_id,
        snapshot.step,
        snapshot.env_index,
        snapshot.reset,
    ) == (
        "a",
        "ep-000001",
        1,
        0,
        False,
    )
    assert snapshot.episode_ids == ["a", "b2"]


def expected_context(session, route, request_id, slots) -> model_pb2.PredictContext:
    context = model_pb2.PredictContext(session_id=session, route_id=route, request_id=request_id)
    for env_index, episode_id, step, reset in slots:
        context.slots.add(env_index=env_index, episode_id=episode_id, step=step, reset=reset)
    return context


def test_predict_request_context_holds_every_slot_as_it_is_now() -> None:
    state = RouteState("sess-\u00e9", "route", num_envs=3)
    state.start_episodes(["a", "", "c" * 200], False)
    request = state.predict_request(b"\x01\x02", RequestPhase.RESET_OBSERVATION)
    assert request.context == expected_context(
        "sess-\u00e9",
        "route",
        "sess-\u00e9:route:reset_observation:000001",
        [(0, "a", 0, True), (1, "", 0, True), (2, "c" * 200, 0, True)],
    )
    assert request.observation.bytes.data == b"\x01\x02"
    for _ in range(5000):  # past the precomputed step encodings
        state.record_step()
    state.observe_episode_ids(["a", "b", "c" * 200])
    request = state.predict_request(None, "step_observation")
    assert request.context == expected_context(
        "sess-\u00e9",
        "route",
        "sess-\u00e9:route:step_observation:000002",
        [(0, "a", 5000, False), (1, "b", 0, True), (2, "c" * 200, 5000, False)],
    )
    assert not request.HasField("observation")


def test_lanes_in_lockstep_and_out_of_it_encode_the_same_contexts() -> None:
    # 130 lanes: env_index 128+ widens the slot prefix, so lanes 1.. are not all one length.
    for lanes in (2, 3, 130):
        state = RouteState("s", "r", num_envs=lanes)
        ids = [f"episode-{lane}" for lane in range(lanes)]
        state.start_episodes(ids, False)
        for step in range(300):
            if step in (7, 150):  # lane 1 rolls: the lanes leave lockstep (and a longer id)
                ids[1] = f"rolled-at-{step}-with-a-longer-id"
                state.observe_episode_ids(ids)
            if step == 200:  # every lane restarts: back in lockstep
                ids = [f"restart-{lane}" for lane in range(lanes)]
                state.start_episodes(ids, True)
            context = model_pb2.PredictContext()
            data = state.fill_context(context, "step_observation")
            expected = expected_context(
                "s",
                "r",
                f"s:r:step_observation:{step + 1:06d}",
                [(slot.env_index, slot.episode_id, slot.step, slot.reset) for slot in state.slots()],
            )
            assert context == expected
            assert data == expected.SerializeToString()
            state.record_step()


def test_predict_request_copies_message_bytes() -> None:
    state = RouteState("s", "r")
    payload = common_pb2.MessageBytes(data=b"xyz")
    request = state.predict_request(payload, "step_observation")
    assert request.observation.bytes == payload
    empty = state.predict_request(b"", "step_observation")
    assert empty.HasField("observation") and empty.observation.HasField("bytes")


def test_close_route_request_uses_a_request_id() -> None:
    state = RouteState("S", "R")
    state.start_episodes(["e"], False)
    state.predict_request(b"", RequestPhase.RESET_OBSERVATION)
    state.record_step()
    close = state.close_route_request("why")
    assert close.reason == "why"
    assert close.context == expected_context("S", "R", "S:R:close_route:000002", [(0, "e", 1, False)])


def test_state_from_spec() -> None:
    state = RouteState.from_spec(single_env_spec(num_envs=2))
    assert (
        state.session_id,
        state.route_id,
        state.env_component_id,
        state.model_component_id,
        state.num_envs,
    ) == (
        "session-1",
        "route-1",
        "env-1",
        "model-1",
        2,
    )


def test_rolled_ids_are_encoded_lazily_and_keep_memory_bounded():
    state = RouteState("s", "r", num_envs=2)
    state.start_episodes(["a0", "b0"], False)
    for generation in range(1, 500):
        state.observe_episode_ids([f"a{generation}", f"b{generation}"])
    # An array-form run never encodes a context: stale slot prefixes are one per lane at most.
    assert len(state._stale_prefixes) <= 2
    context = model_pb2.PredictContext.FromString(state.encode_context("step_observation"))
    assert [slot.episode_id for slot in context.slots] == ["a499", "b499"]


def test_a_registered_episode_leaves_nothing_for_the_garbage_collector_to_walk() -> None:
    # One record per episode for the whole session: as GC-tracked objects they would make every
    # full collection of a long evaluation walk them all.
    registry = EpisodeRegistry()
    gc.collect()
    tracked = len(gc.get_objects())
    record_ids = registry.ensure_lanes([f"episode-{n}" for n in range(2_000)], range(2_000), True, None)
    gc.collect()
    assert len(gc.get_objects()) - tracked < 20
    assert record_ids[-1] == "ep-002000"
    assert registry.get("episode-1999") == RegisteredEpisode("ep-002000", 2000, 1999, True)
