"""``episodes_completed``, this port's one added hook: a step's completed episodes at once,
before their ``episode_completed`` events (docs/runtime.md, "Where this port differs")."""

from __future__ import annotations

import asyncio
import logging

from _runtime_fakes import SAME_STEP, EchoModel, RecordingHooks, ScriptedVectorEnv, vector_spec

from rlmesh_gym.runtime import CompositeHooks, RuntimeDriver, RuntimeHooks
from rlmesh_gym.runtime import driver as driver_module
from rlmesh_gym.runtime.events import EpisodesCompletedEvent
from rlmesh_gym.runtime.seams import CompletedEpisode


class Batches(RecordingHooks):
    async def episodes_completed(self, event: EpisodesCompletedEvent) -> None:
        self.entries.append(("episodes_completed", event))


def run(driver: RuntimeDriver):
    return asyncio.run(driver.run())


def test_fires_once_per_step_that_completed_episodes_before_their_own_events() -> None:
    # Lanes of 1, 2 and 2 steps under SAME_STEP: step 1 completes lane 0's episode, step 2
    # lanes 0, 1 and 2, and the run stops at 4 episodes.
    hooks = Batches()
    env = ScriptedVectorEnv([1, 2, 2], SAME_STEP)
    report = run(RuntimeDriver(vector_spec(3, SAME_STEP, max_episodes=4), env, EchoModel(), hooks))
    assert (report.total_steps, report.total_episodes) == (2, 4)
    completions = [
        entry for entry in hooks.entries if entry[0] in ("episodes_completed", "episode_completed")
    ]
    assert [name for name, _ in completions] == [
        "episodes_completed",
        "episode_completed",
        "episodes_completed",
        "episode_completed",
        "episode_completed",
        "episode_completed",
    ]
    batches = hooks.named("episodes_completed")
    singles = hooks.named("episode_completed")
    assert [[episode.episode_id for episode in batch.episodes] for batch in batches] == [
        ["ep-0-0"],
        ["ep-0-1", "ep-1-0", "ep-2-0"],
    ]
    # The same episodes, names and order as the per-episode events carry.
    flat = [
        (episode, names)
        for batch in batches
        for episode, names in zip(batch.episodes, batch.records, strict=True)
    ]
    assert all(type(episode) is CompletedEpisode for episode, _ in flat)
    assert [(e.episode_id, e.env_index, e.step_count, e.cumulative_reward, names) for e, names in flat] == [
        (s.episode_id, s.env_index, s.step_count, s.cumulative_reward, (s.episode_record_id, s.episode_index))
        for s in singles
    ]
    assert [names for _, names in flat] == [
        ("ep-000001", 1),
        ("ep-000004", 4),
        ("ep-000002", 2),
        ("ep-000003", 3),
    ]
    assert {(batch.session_id, batch.route.route_id) for batch in batches} == {("session-vec", "route-vec")}


def test_an_episode_the_route_never_started_is_named_empty() -> None:
    class Stale(ScriptedVectorEnv):
        async def step(self, request):
            stepped = await super().step(request)
            if self.steps == 1:  # an episode of an earlier session, ended now
                stepped.response.completed_episodes.add(episode_id="old", env_index=0, step_count=5)
            return stepped

    hooks = Batches()
    run(RuntimeDriver(vector_spec(1, SAME_STEP, max_episodes=2), Stale([3], SAME_STEP), EchoModel(), hooks))
    first, second = hooks.named("episodes_completed")
    assert [episode.episode_id for episode in first.episodes] == ["old"]
    assert list(first.records) == [("", 0)]
    assert list(second.records) == [("ep-000001", 1)]


def test_not_built_when_nobody_listens_and_fanned_out_by_composite_hooks(caplog, monkeypatch) -> None:
    calls: list[str] = []

    class Counting(RuntimeHooks):
        def __init__(self, tag: str) -> None:
            self.tag = tag

        async def episodes_completed(self, event: EpisodesCompletedEvent) -> None:
            calls.append(self.tag)
            if self.tag == "a":
                raise RuntimeError("counting failed")

    built: list[object] = []

    def counting_event(*fields: object) -> EpisodesCompletedEvent:
        built.append(fields)
        return EpisodesCompletedEvent(*fields)  # type: ignore[arg-type]

    monkeypatch.setattr(driver_module, "EpisodesCompletedEvent", counting_event)
    plain = RecordingHooks()
    run(
        RuntimeDriver(
            vector_spec(2, SAME_STEP, max_episodes=2),
            ScriptedVectorEnv([1, 1], SAME_STEP),
            EchoModel(),
            plain,
        )
    )
    assert not built and len(plain.named("episode_completed")) == 2

    hooks = CompositeHooks(Counting("a"), Counting("b"))
    with caplog.at_level(logging.WARNING, logger="rlmesh_gym.runtime"):
        report = run(
            RuntimeDriver(
                vector_spec(2, SAME_STEP, max_episodes=4),
                ScriptedVectorEnv([1, 1], SAME_STEP),
                EchoModel(),
                hooks,
            )
        )
    assert report.total_episodes == 4  # best-effort: a failing listener does not end the run
    assert calls == ["a", "b", "a", "b"] and len(built) == 2
    assert caplog.text.count("runtime hook episodes_completed failed: counting failed") == 2
