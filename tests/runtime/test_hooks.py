"""Hooks: defaults, overrides, composite fan-out, transform chaining (docs/design/runtime.md#hooks)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from rlmesh_gym.proto import spaces_pb2
from rlmesh_gym.runtime import CompositeHooks, HookError, HookFailedError, NoopRuntimeHooks, RuntimeHooks
from rlmesh_gym.runtime.events import ObservationEmittedEvent, RuntimeRouteContext, SessionEndedEvent
from rlmesh_gym.runtime.hooks import HOOK_METHODS, HookTable

ROUTE = RuntimeRouteContext("r", "e", "m")


def observation_event(payload: bytes | None) -> ObservationEmittedEvent:
    return ObservationEmittedEvent("s", ROUTE, "", "", [], [], 0, 0, True, 1, spaces_pb2.SpaceSpec(), payload)


class Appender(RuntimeHooks):
    def __init__(self, tag: bytes, calls: list) -> None:
        self.tag, self.calls = tag, calls

    async def session_ended(self, event) -> None:
        self.calls.append(("ended", self.tag))

    async def transform_observation(self, event) -> bytes | None:
        self.calls.append(("transform", self.tag, event.observation))
        return (event.observation or b"") + self.tag


class Failing(RuntimeHooks):
    async def session_ended(self, event) -> None:
        raise HookError("nope")

    async def transform_observation(self, event) -> bytes | None:
        raise HookError("bad transform")


def test_defaults_are_no_ops_and_transforms_pass_payloads_through() -> None:
    hooks = RuntimeHooks()
    event = observation_event(b"\x05")
    assert asyncio.run(hooks.transform_observation(event)) == b"\x05"
    assert asyncio.run(hooks.session_ended(SessionEndedEvent("s", ROUTE, "r", 1, 1))) is None
    assert set(HOOK_METHODS) == {name for name in dir(RuntimeHooks) if not name.startswith("_")}


def test_table_lists_only_overridden_methods() -> None:
    calls: list = []
    table = HookTable([NoopRuntimeHooks(), Appender(b"a", calls), None])
    assert {name for name in HOOK_METHODS if table.listeners(name)} == {
        "session_ended",
        "transform_observation",
    }
    assert all(not HookTable(None).listeners(name) for name in HOOK_METHODS)
    assert all(not HookTable(NoopRuntimeHooks()).listeners(name) for name in HOOK_METHODS)


def test_table_flattens_composites_in_order() -> None:
    calls: list = []
    first, second, third = Appender(b"1", calls), Appender(b"2", calls), Appender(b"3", calls)
    table = HookTable([first, CompositeHooks(second, CompositeHooks(third))])
    assert [method.__self__ for method in table.listeners("session_ended")] == [first, second, third]


def test_duck_typed_hooks_contribute_what_they_have() -> None:
    class Duck:
        async def step_completed(self, event) -> None:
            pass

    table = HookTable(Duck())
    assert [name for name in HOOK_METHODS if table.listeners(name)] == ["step_completed"]


def test_table_refuses_objects_that_are_not_hooks() -> None:
    with pytest.raises(
        TypeError, match="hooks must be RuntimeHooks objects \\(or a sequence of them\\); got int"
    ):
        HookTable([NoopRuntimeHooks(), 3])
    with pytest.raises(TypeError, match="got str"):
        HookTable("hooks")


def test_best_effort_failures_are_logged_and_the_rest_still_run(caplog) -> None:
    calls: list = []
    table = HookTable([Failing(), Appender(b"a", calls)])
    with caplog.at_level(logging.WARNING, logger="rlmesh_gym.runtime"):
        asyncio.run(table.fire("session_ended", SessionEndedEvent("s", ROUTE, "r", 1, 1)))
    assert calls == [("ended", b"a")]
    assert [r.getMessage() for r in caplog.records] == ["runtime hook session_ended failed: nope"]
    assert caplog.records[0].levelno == logging.WARNING


def test_fire_each_calls_every_listener_per_event_in_order_and_logs_failures(caplog) -> None:
    calls: list = []
    table = HookTable([Appender(b"a", calls), Failing(), Appender(b"b", calls)])
    events = [SessionEndedEvent("s", ROUTE, reason, 1, 1) for reason in ("first", "second")]
    with caplog.at_level(logging.WARNING, logger="rlmesh_gym.runtime"):
        asyncio.run(table.fire_each("session_ended", events))
    assert calls == [("ended", b"a"), ("ended", b"b")] * 2
    assert [r.getMessage() for r in caplog.records] == ["runtime hook session_ended failed: nope"] * 2


def test_transforms_chain_through_every_listener() -> None:
    calls: list = []
    table = HookTable([Appender(b"a", calls), Appender(b"b", calls)])
    event = observation_event(b"x")
    assert asyncio.run(table.transform("transform_observation", event)) == b"xab"
    assert event.observation == b"xab"
    assert calls == [("transform", b"a", b"x"), ("transform", b"b", b"xa")]


def test_transform_failure_is_fatal_and_logged(caplog) -> None:
    table = HookTable([Failing(), Appender(b"a", [])])
    with (
        caplog.at_level(logging.WARNING, logger="rlmesh_gym.runtime"),
        pytest.raises(HookFailedError) as caught,
    ):
        asyncio.run(table.transform("transform_observation", observation_event(b"x")))
    assert str(caught.value) == "runtime hook failed: bad transform"
    assert isinstance(caught.value.__cause__, HookError)
    assert [r.getMessage() for r in caplog.records] == [
        "runtime hook transform_observation failed: bad transform"
    ]


def test_transform_must_return_bytes_or_none() -> None:
    class Wrong(RuntimeHooks):
        async def transform_observation(self, event):
            return "text"

    class Buffer(RuntimeHooks):
        async def transform_observation(self, event):
            return bytearray(b"ok")

    with pytest.raises(HookFailedError, match="transform_observation must return bytes or None; got str"):
        asyncio.run(HookTable(Wrong()).transform("transform_observation", observation_event(b"x")))
    assert (
        asyncio.run(HookTable(Buffer()).transform("transform_observation", observation_event(b"x"))) == b"ok"
    )


def test_composite_used_directly_fans_out_and_chains() -> None:
    calls: list = []
    composite = CompositeHooks(Failing(), Appender(b"a", calls), Appender(b"b", calls))
    asyncio.run(composite.session_ended(SessionEndedEvent("s", ROUTE, "r", 1, 1)))
    assert calls == [("ended", b"a"), ("ended", b"b")]
    chained = CompositeHooks(Appender(b"a", []), Appender(b"b", []))
    assert asyncio.run(chained.transform_observation(observation_event(b""))) == b"ab"
    with pytest.raises(HookError, match="bad transform"):
        asyncio.run(composite.transform_observation(observation_event(b"")))


def test_an_attribute_hiding_a_hook_method_is_refused() -> None:
    class Shadowing(RuntimeHooks):
        def __init__(self) -> None:
            self.log = []  # hides the `log` hook

    with pytest.raises(TypeError, match="Shadowing.log is a list, which hides the log hook method"):
        HookTable(Shadowing())


def test_a_hook_set_on_the_instance_counts_as_an_override() -> None:
    calls: list = []
    hooks = NoopRuntimeHooks()

    async def step_completed(event) -> None:
        calls.append(event)

    hooks.step_completed = step_completed  # type: ignore[method-assign]
    assert HookTable(hooks).listeners("step_completed") == (step_completed,)
