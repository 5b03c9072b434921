"""LaneEpisodes on its own: the lane lifecycle, the interrupted buffer and drain."""

from __future__ import annotations

import subprocess
import sys
import uuid
import warnings

import numpy as np
import pytest

from rlmesh_gym.envs import LaneEpisodes
from rlmesh_gym.envs.episodes import INTERRUPTED_BUFFER_LIMIT, new_episode_id, new_episode_ids
from rlmesh_gym.proto import env_pb2
from rlmesh_gym.runtime.message_form import episode_metadata

NEXT, SAME, DISABLED = (
    env_pb2.AUTORESET_MODE_NEXT_STEP,
    env_pb2.AUTORESET_MODE_SAME_STEP,
    env_pb2.AUTORESET_MODE_DISABLED,
)


def step(book: LaneEpisodes, rewards, terminated, truncated=None):
    """One recorded step: its completed episodes as a StepResponse would carry them, and
    ``(lane, episode)`` of the episodes finished on it."""
    response = env_pb2.StepResponse()
    truncated = [False] * len(rewards) if truncated is None else truncated
    completed, finished = book.record_step(
        np.asarray(rewards, dtype=np.float64),
        np.asarray(terminated, dtype=np.bool_),
        np.asarray(truncated, dtype=np.bool_),
    )
    assert completed[len(completed) - len(finished) :] == finished
    for episode in completed:
        episode_metadata(episode, response.completed_episodes.add())
    return response, [(episode.env_index, episode) for episode in finished]


def test_seed_zero_is_recorded_and_unseeded_lanes_have_none():
    book = LaneEpisodes(2, DISABLED)
    book.start([0, 1], [0, None])
    response, finished = step(book, [1.5, 2.0], [True, True])
    assert [m.HasField("seed") for m in response.completed_episodes] == [True, False]
    assert response.completed_episodes[0].seed == 0
    assert [lane for lane, _ in finished] == [0, 1]
    assert [entry.episode_id for _, entry in finished] == [m.episode_id for m in response.completed_episodes]


def test_next_step_counts_exclude_the_reset_step():
    book = LaneEpisodes(1, NEXT)
    book.start([0], [5])
    (first,) = book.ids
    step(book, [1.0], [False])
    response, _ = step(book, [2.0], [True])
    assert [(m.step_count, m.cumulative_reward, m.seed) for m in response.completed_episodes] == [(2, 3.0, 5)]
    assert book.ids == [first]
    step(book, [0.0], [False])  # the reset step
    (second,) = book.ids
    assert second != first
    step(book, [4.0], [False])
    response, _ = step(book, [4.0], [True])
    (metadata,) = response.completed_episodes
    assert (metadata.episode_id, metadata.step_count, metadata.cumulative_reward) == (second, 2, 8.0)
    assert not metadata.HasField("seed")


def test_next_step_reset_step_must_not_be_done():
    book = LaneEpisodes(2, NEXT)
    book.start([0, 1], [None, None])
    step(book, [1.0, 1.0], [True, False])
    with pytest.raises(ValueError, match=r"NEXT_STEP lanes \[0\] were waiting.*terminated \[True\]"):
        step(book, [0.0, 1.0], [True, False])
    with pytest.raises(ValueError, match=r"truncated \[True\]"):
        step(book, [0.0, 1.0], [False, False], [True, False])
    response, _ = step(book, [0.0, 1.0], [False, True])  # nothing changed by the refused steps
    assert [(m.env_index, m.step_count, m.cumulative_reward) for m in response.completed_episodes] == [
        (1, 2, 2.0)
    ]


def test_next_step_reset_step_reward_is_not_counted_and_warned_once():
    book = LaneEpisodes(2, NEXT)
    book.start([0, 1], [None, None])
    step(book, [1.0, 1.0], [True, False])
    warned = r"NEXT_STEP lanes \[0\] reported rewards \[-0.01\] on their autoreset step"
    with pytest.warns(RuntimeWarning, match=warned):
        step(book, [-0.01, 1.0], [False, True])  # lane 0's reset step; lane 1 finishes
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per instance, not per step
        third, _ = step(book, [2.0, -0.01], [True, False])  # lane 1's reset step
        fourth, _ = step(book, [-0.01, 5.0], [False, True])  # lane 0's reset step
    # The second episodes: 1 step each, the reset steps' rewards left out.
    completed = [*third.completed_episodes, *fourth.completed_episodes]
    assert [(m.env_index, m.step_count, m.cumulative_reward) for m in completed] == [(0, 1, 2.0), (1, 1, 5.0)]


def test_same_step_rolls_in_the_done_step():
    book = LaneEpisodes(1, SAME)
    book.start([0], [3])
    (first,) = book.ids
    response, _ = step(book, [1.0], [True])
    (second,) = book.ids
    assert second != first and response.completed_episodes[0].episode_id == first
    response, _ = step(book, [2.0], [True])
    assert [(m.episode_id, m.step_count, m.cumulative_reward) for m in response.completed_episodes] == [
        (second, 1, 2.0)
    ]


def test_disabled_lane_id_is_empty_from_the_step_after_it_finished():
    book = LaneEpisodes(2, DISABLED)
    book.start([0, 1], [1, 2])
    a, b = book.ids
    step(book, [1.0, 1.0], [True, False])
    assert book.ids == [a, b] and not book.all_active
    assert book.idle_lanes().tolist() == [0]
    response, _ = step(book, [9.0, 1.0], [True, False])  # an idle lane's reward and done are ignored
    assert book.ids == ["", b] and not response.completed_episodes
    book.start([0], [4])
    assert book.ids[0] not in ("", a) and book.all_active
    response, _ = step(book, [3.0, 1.0], [True, True])
    assert [
        (m.env_index, m.step_count, m.cumulative_reward, m.seed) for m in response.completed_episodes
    ] == [
        (0, 1, 3.0, 4),
        (1, 3, 3.0, 2),
    ]


def test_interrupted_episodes_are_buffered_and_capped():
    book = LaneEpisodes(1, NEXT)
    book.start([0], [0])
    with pytest.warns(RuntimeWarning, match="dropping the oldest"):
        for seed in range(1, INTERRUPTED_BUFFER_LIMIT + 2):
            book.start([0], [seed])
    response, _ = step(book, [1.0], [False])
    seeds = [m.seed for m in response.completed_episodes]
    assert seeds == list(range(1, INTERRUPTED_BUFFER_LIMIT + 1))  # seed 0's episode was dropped
    assert all(
        (m.terminated, m.truncated, m.step_count) == (False, True, 0) for m in response.completed_episodes
    )


def test_drain_ends_everything_and_leaves_lanes_idle():
    book = LaneEpisodes(3, NEXT)
    book.start([0, 1, 2], [None, None, None])
    step(book, [1.0, 1.0, 1.0], [True, False, False])  # lane 0 pending its autoreset
    book.start([1], [8])  # interrupts lane 1's episode
    drained = book.drain()
    assert [(m.env_index, m.step_count, m.truncated, m.terminated) for m in drained] == [
        (1, 1, True, False),  # the interrupted one first
        (1, 0, True, False),
        (2, 1, True, False),
    ]
    assert book.ids == ["", "", ""] and book.idle_lanes().tolist() == [0, 1, 2]
    response, _ = step(book, [0.0, 1.0, 1.0], [False, False, False])
    assert not response.completed_episodes  # the pending roll was dropped with the drain


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="num_envs must be at least 1"):
        LaneEpisodes(0, NEXT)
    with pytest.raises(ValueError, match="autoreset_mode must be NEXT_STEP"):
        LaneEpisodes(1, env_pb2.AUTORESET_MODE_UNSPECIFIED)
    with pytest.raises(ValueError, match=r"one seed \(or None\) per started lane \(2\), got 1"):
        LaneEpisodes(2, NEXT).start([0, 1], [None])


def test_episode_ids_are_uuid4():
    ids = {new_episode_id() for _ in range(1000)} | set(new_episode_ids(600))  # 600: past a pool block
    assert len(ids) == 1600
    for text in ids:
        parsed = uuid.UUID(text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122 and str(parsed) == text
    assert new_episode_ids(0) == []


def test_envs_package_does_not_import_torch():
    code = "import sys, rlmesh_gym.envs; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.parametrize("mode", [NEXT, SAME, DISABLED])
def test_done_lanes_told_match_the_full_book_keeping(mode):
    # Two books fed the same steps: one is told which lanes are done, the other works it out
    # from the masks; their episodes must agree at every step.
    told, plain = LaneEpisodes(3, mode), LaneEpisodes(3, mode)
    for book in (told, plain):
        book.start([0, 1, 2], [5, 6, 7])
    rng = np.random.default_rng(0)
    waiting = np.zeros(3, dtype=np.bool_)  # NEXT_STEP lanes whose next step is the reset step
    for _ in range(200):
        rewards = rng.normal(size=3)
        terminated = rng.random(3) < 0.1
        truncated = rng.random(3) < 0.05
        rewards[waiting] = 0.0
        terminated[waiting] = truncated[waiting] = False
        if mode == DISABLED and not told.all_active:
            idle = told.idle_lanes().tolist()
            for book in (told, plain):
                book.start(idle, [None] * len(idle))
        completed = []
        for book, done in ((told, np.flatnonzero(terminated | truncated).tolist()), (plain, None)):
            ended, _ = book.record_step(rewards, terminated, truncated, done=done)
            completed.append([(m.env_index, m.step_count, m.cumulative_reward) for m in ended])
        assert completed[0] == completed[1]
        assert [bool(episode_id) for episode_id in told.ids] == [bool(episode_id) for episode_id in plain.ids]
        if mode == NEXT:
            waiting = np.isin(np.arange(3), [lane for lane, _, _ in completed[0]])
    told.drain()
    assert told.ids == ["", "", ""]


@pytest.mark.parametrize("told", [True, False])  # done lanes given / read off the masks
@pytest.mark.parametrize("lanes", [3, 20])  # returns kept in a list / in an array
def test_same_step_rolls_count_like_a_plain_tally(lanes, told):
    # SAME_STEP's usual finishing step takes a one-pass path; a restart of some lanes in the
    # middle (interrupted episodes waiting) sends a step through the general path. Both must
    # give what a plain per-lane tally gives.
    book = LaneEpisodes(lanes, SAME)
    book.start(list(range(lanes)), list(range(100, 100 + lanes)))
    rng = np.random.default_rng(lanes)
    steps, returns = [0] * lanes, [0.0] * lanes
    seeds: list[int | None] = list(range(100, 100 + lanes))
    ids = book.ids
    for step_number in range(300):
        expected = []
        if step_number == 150:
            restarted = [0, lanes - 1]
            book.start(restarted, [7, None])
            for lane, seed in zip(restarted, [7, None], strict=True):
                expected.append((ids[lane], lane, steps[lane], returns[lane], False, True, seeds[lane]))
                steps[lane], returns[lane], seeds[lane] = 0, 0.0, seed
            ids = book.ids
        rewards = rng.normal(size=lanes)
        terminated = rng.random(lanes) < 0.2
        truncated = ~terminated & (rng.random(lanes) < 0.1)
        done = np.flatnonzero(terminated | truncated).tolist()
        for lane in range(lanes):
            steps[lane] += 1
            returns[lane] += rewards[lane]
        for lane in done:
            expected.append(
                (
                    ids[lane],
                    lane,
                    steps[lane],
                    returns[lane],
                    bool(terminated[lane]),
                    bool(truncated[lane]),
                    seeds[lane],
                )
            )
            steps[lane], returns[lane], seeds[lane] = 0, 0.0, None
        completed, finished = book.record_step(rewards, terminated, truncated, done=done if told else None)
        if done:
            # The one-pass path (one list for both) exactly when nothing waited from a restart.
            assert (completed is finished) == (step_number != 150)
        got = [
            (e.episode_id, e.env_index, e.step_count, e.cumulative_reward, e.terminated, e.truncated, e.seed)
            for e in completed
        ]
        assert [row[:3] + row[4:] for row in got] == [row[:3] + row[4:] for row in expected]
        assert [row[3] for row in got] == pytest.approx([row[3] for row in expected])
        assert [e.env_index for e in finished] == done
        new_ids = book.ids
        assert [lane for lane in range(lanes) if new_ids[lane] != ids[lane]] == done
        assert len(set(new_ids)) == lanes and not set(new_ids) & {row[0] for row in expected}
        ids = new_ids
    for episode in completed:
        assert episode.start_timestamp_ns <= episode.end_timestamp_ns and episode.duration_ms >= 0


def test_episode_ids_taken_from_several_threads_are_all_different():
    import threading

    taken: list[list[str]] = [[] for _ in range(4)]

    def take(into: list[str]) -> None:
        for count in range(1, 700):
            into.extend(new_episode_ids(count % 9))

    threads = [threading.Thread(target=take, args=(into,)) for into in taken]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [episode_id for into in taken for episode_id in into]
    assert len(every) == 4 * sum(count % 9 for count in range(1, 700))
    assert len(set(every)) == len(every)


def test_a_forked_child_takes_fresh_ids_even_when_forked_mid_refill():
    import os

    from rlmesh_gym.envs import episodes

    new_episode_ids(1)  # the parent's pool now holds ids
    reader, writer = os.pipe()
    with episodes._id_pool_lock, warnings.catch_warnings():  # as if a thread were refilling
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: forking a threaded process
        pid = os.fork()
        if pid == 0:  # the child: must neither reuse the parent's ids nor wait for its lock
            try:
                os.close(reader)
                import signal

                signal.alarm(10)  # a deadlocked child dies instead of hanging the suite
                os.write(writer, "\n".join(new_episode_ids(300)).encode())
            finally:
                os._exit(0)
    os.close(writer)
    with os.fdopen(reader) as pipe:
        child_ids = set(pipe.read().split())
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(child_ids) == 300
    assert not child_ids & set(new_episode_ids(300))


@pytest.mark.parametrize("interrupted_waiting", [False, True])
def test_a_retiring_same_step_lane_ends_its_episode_and_begins_none(interrupted_waiting: bool):
    # With an interrupted episode waiting the step takes the general path, else the one-pass roll.
    book = LaneEpisodes(3, SAME)
    book.start([0, 1, 2], [1, 2, 3])
    if interrupted_waiting:
        book.start([2], [4])  # lane 2's running episode is interrupted and waits for the step
    book.retire([1])
    first = book.ids
    step(book, [1.0, 1.0, 1.0], [False, False, False])
    response, finished = step(book, [1.0, 2.0, 1.0], [True, True, False])
    assert [
        (lane, episode.episode_id, episode.step_count, episode.cumulative_reward)
        for lane, episode in finished
    ] == [
        (0, first[0], 2, 2.0),
        (1, first[1], 2, 3.0),
    ]
    ids = book.ids
    assert ids[1] == "" and ids[0] not in ("", first[0]) and ids[2] == first[2]
    assert book.idle_lanes().tolist() == [1]
    _, later = step(book, [1.0, 0.0, 1.0], [True, False, True])
    assert [lane for lane, _ in later] == [0, 2]  # the idle lane has nothing to end
    book.start([0, 1, 2], [5, 6, 7])  # a reset brings it back, and it rolls again
    _, rolled = step(book, [1.0, 1.0, 1.0], [False, True, False])
    assert [lane for lane, _ in rolled] == [1] and book.ids[1] not in ("", ids[1])


def test_only_same_step_lanes_retire():
    for mode in (NEXT, DISABLED):
        with pytest.raises(ValueError, match="only SAME_STEP lanes retire after their episode"):
            LaneEpisodes(2, mode).retire([0])
