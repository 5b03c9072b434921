"""The evaluation's counting hook on one step's finished episodes (``episodes_completed``)."""

from __future__ import annotations

import asyncio

from rlmesh_gym.evaluation import EpisodeQuotas
from rlmesh_gym.evaluation._evaluate import _EvaluationHooks
from rlmesh_gym.runtime.events import EpisodesCompletedEvent, RuntimeRouteContext
from rlmesh_gym.runtime.seams import CompletedEpisode

ROUTE = RuntimeRouteContext("r", "env", "model")


def finished(name: str, lane: int) -> CompletedEpisode:
    return CompletedEpisode(name, lane, 4, float(ord(name[0])), True, False, 1, 2, 0, None)


def step_event(*episodes: tuple[str, int]) -> EpisodesCompletedEvent:
    """A step's episodes; "old" is one the route never saw start."""
    return EpisodesCompletedEvent(
        "s",
        ROUTE,
        tuple(finished(name, lane) for name, lane in episodes),
        tuple(
            ("", 0) if name == "old" else (f"ep-{index:06d}", index)
            for index, (name, _) in enumerate(episodes, 1)
        ),
    )


class Progress:
    def __init__(self) -> None:
        self.returns: list[float] = []

    def update(self, episode_return: float) -> None:
        self.returns.append(episode_return)


def test_counts_in_order_skipping_unstarted_and_full_lanes_and_reports_each_as_counted() -> None:
    reported: list[str] = []
    progress = Progress()
    hooks = _EvaluationHooks(
        EpisodeQuotas((1, 2)), progress, False, lambda record: reported.append(record.episode_id)
    )  # type: ignore[arg-type]
    asyncio.run(hooks.episodes_completed(step_event(("old", 0), ("a", 0), ("b", 0), ("c", 1))))
    assert reported == ["a", "c"] and progress.returns == [float(ord("a")), float(ord("c"))]
    assert [record.episode_id for record in hooks.quotas.records] == ["a", "c"]
    assert hooks.error is None and hooks.ended_ns is None and not hooks.quotas.met
    asyncio.run(hooks.episodes_completed(step_event(("d", 1), ("e", 1))))
    assert reported == ["a", "c", "d"] and hooks.quotas.met and hooks.ended_ns is not None
    asyncio.run(hooks.episodes_completed(step_event(("f", 0))))  # met: nothing more is counted
    assert reported == ["a", "c", "d"]


def test_a_failure_keeps_and_reports_what_was_counted_before_it() -> None:
    reported: list[str] = []
    hooks = _EvaluationHooks(
        EpisodeQuotas((2, 2)), None, False, lambda record: reported.append(record.episode_id)
    )
    asyncio.run(hooks.episodes_completed(step_event(("a", 0), ("z", 5), ("b", 1))))
    assert reported == ["a"] and [record.episode_id for record in hooks.quotas.records] == ["a"]
    assert isinstance(hooks.error, ValueError) and "reports lane 5, outside the 2 lane(s)" in str(hooks.error)
    assert hooks.ended_ns is not None  # the session was asked to stop

    def refuse_second(record) -> None:
        if reported:
            raise OSError("queue closed")
        reported.append(record.episode_id)

    reported.clear()
    hooks = _EvaluationHooks(EpisodeQuotas((2, 2)), None, False, refuse_second)
    asyncio.run(hooks.episodes_completed(step_event(("a", 0), ("b", 1), ("c", 1))))
    assert reported == ["a"] and isinstance(hooks.error, OSError)
    # The record whose report failed was counted; the step's later episodes were not.
    assert [record.episode_id for record in hooks.quotas.records] == ["a", "b"]


def test_the_hook_retires_each_lane_when_its_next_episode_is_its_last_counted_one() -> None:
    from rlmesh_gym.runtime.events import SessionStartedEvent

    retired: list[list[int]] = []
    quotas = EpisodeQuotas((0, 1, 2, 3))
    hooks = _EvaluationHooks(quotas, None, False, retire_lanes=retired.append)

    async def run() -> None:
        await hooks.session_started(SessionStartedEvent("s", ROUTE, "env"))
        await hooks.episodes_completed(step_event(("a", 2), ("b", 3)))  # lane 2 one short, 3 two
        await hooks.episodes_completed(step_event(("c", 1), ("d", 2)))  # met: nothing to retire
        await hooks.episodes_completed(step_event(("e", 3)))  # lane 3 one short
        await hooks.episodes_completed(step_event(("f", 3)))  # every quota met

    asyncio.run(run())
    # At the start the lanes with at most one to count (0: none, 1: one), then as each falls one short.
    assert retired == [[0, 1], [2], [3]]
    assert quotas.met


def test_a_failure_to_retire_warns_and_the_counting_goes_on() -> None:
    import pytest

    from rlmesh_gym.runtime.events import SessionStartedEvent

    def refuse(lanes: list[int]) -> None:
        raise ValueError("no such lanes")

    quotas = EpisodeQuotas((1, 2))
    hooks = _EvaluationHooks(quotas, None, False, retire_lanes=refuse)

    async def run() -> None:
        with pytest.warns(RuntimeWarning, match=r"could not retire lanes \[0\] \(no such lanes\)"):
            await hooks.session_started(SessionStartedEvent("s", ROUTE, "env"))
        await hooks.episodes_completed(step_event(("a", 0), ("b", 1), ("c", 1)))

    asyncio.run(run())
    assert hooks.retire_lanes is None and hooks.error is None and quotas.met
