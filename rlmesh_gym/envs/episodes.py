"""Per-lane episode ids and ``EpisodeMetadata`` book-keeping of a vector env.

Semantics: docs/envs.md, "Autoreset, mapped".

The env side owns episode ids: a fresh UUIDv4 per lane at every reset and at every autoreset
roll. :class:`LaneEpisodes` keeps, for each lane, the current id, the seed it was reset with,
the counted steps and return, and the start timestamps, and turns finished episodes into
:class:`~rlmesh_gym.runtime.seams.CompletedEpisode` records (``EpisodeMetadata`` in array
form). It knows nothing about gymnasium; the adapter feeds it the reward and done masks of each
step.

Lane lifecycle (one of three states):

* **active**: an episode is running; a step counts (``step_count += 1``, ``return += reward``).
* **pending** (NEXT_STEP only): the lane finished on the previous step; this step is the env's
  reset step. A new episode starts here with no seed, and the step (and its reward) is not
  counted; a done flag on it is an error.
* **idle**: no episode (before the first reset, or after a DISABLED lane finished). The lane's
  id is ``""`` from the step after it finished until it is reset.

Under SAME_STEP a finished lane rolls to a new (unseeded) episode in the same step.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Iterable, Sequence
from itertools import compress
from operator import or_

import numpy as np

from rlmesh_gym.runtime.autoreset import AutoresetMode
from rlmesh_gym.runtime.seams import CompletedEpisode

__all__ = ["INTERRUPTED_BUFFER_LIMIT", "LaneEpisodes", "new_episode_id", "new_episode_ids"]

_LIST_RETURNS_MAX_LANES = 16

INTERRUPTED_BUFFER_LIMIT = 100
"""At most this many interrupted episodes wait for the next step (as in rlmesh's env server)."""

# Wire numbers, compared on every finished episode.
_NEXT_STEP = AutoresetMode.NEXT_STEP.wire
_SAME_STEP = AutoresetMode.SAME_STEP.wire
_WIRE_MODES = frozenset(mode.wire for mode in AutoresetMode)

_ID_POOL_SIZE = 256
_id_pool: list[str] = []
_id_pool_lock = threading.Lock()


def _fresh_pool_in_child() -> None:
    # A forked child must not hand out the parent's remaining ids (duplicates), nor inherit the
    # lock held by a parent thread that was refilling when the fork happened.
    global _id_pool_lock
    _id_pool.clear()
    _id_pool_lock = threading.Lock()


os.register_at_fork(after_in_child=_fresh_pool_in_child)


_HEX_DIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
# The columns of a UUID's 36-character text that hold its 32 hex digits (hyphens at 8, 13, 18, 23).
_DIGIT_COLUMNS = np.array([column for column in range(36) if column not in (8, 13, 18, 23)])


def _fresh_ids(count: int) -> list[str]:
    """``count`` random UUIDv4 strings from one ``os.urandom`` call, formatted as one array."""
    raw = np.frombuffer(os.urandom(16 * count), dtype=np.uint8).reshape(count, 16).copy()
    raw[:, 6] = (raw[:, 6] & 0x0F) | 0x40  # version 4
    raw[:, 8] = (raw[:, 8] & 0x3F) | 0x80  # RFC 4122 variant
    digits = np.empty((count, 32), dtype=np.uint8)
    digits[:, 0::2] = raw >> 4
    digits[:, 1::2] = raw & 0x0F
    text = np.full((count, 36), ord("-"), dtype=np.uint8)
    text[:, _DIGIT_COLUMNS] = _HEX_DIGITS[digits]
    joined = text.tobytes().decode("ascii")
    return [joined[start : start + 36] for start in range(0, 36 * count, 36)]


def new_episode_id() -> str:
    """A random UUIDv4 in lowercase hyphenated form (the same as ``str(uuid.uuid4())``).

    Ids are made 256 at a time from one ``os.urandom`` call: one system call and one vectorised
    formatting pass per block instead of per id, which matters when episodes are short.

    >>> import uuid
    >>> episode_id = new_episode_id()
    >>> len(episode_id), uuid.UUID(episode_id).version, str(uuid.UUID(episode_id)) == episode_id
    (36, 4, True)
    """
    return new_episode_ids(1)[0]


def new_episode_ids(count: int) -> list[str]:
    """``count`` ids of :func:`new_episode_id`, taken from the pool."""
    taken: list[str] = []
    take, pop = taken.append, _id_pool.pop
    while len(taken) < count:
        try:
            take(pop())  # one atomic list operation: two threads never get the same id
        except IndexError:
            with _id_pool_lock:  # refilled by one thread at a time
                if not _id_pool:
                    _id_pool.extend(_fresh_ids(max(_ID_POOL_SIZE, count - len(taken))))
    return taken


class LaneEpisodes:
    """Episode ids and running statistics of ``num_envs`` lanes under one autoreset mode.

    >>> from rlmesh_gym.proto import env_pb2
    >>> book = LaneEpisodes(2, env_pb2.AUTORESET_MODE_DISABLED)
    >>> book.start([0, 1], [7, None])
    >>> completed, finished = book.record_step(np.array([1.0, 2.0]), np.array([True, False]),
    ...                                        np.array([False, False]))
    >>> [(e.env_index, e.seed, e.step_count, e.cumulative_reward, e.terminated) for e in completed]
    [(0, 7, 1, 1.0, True)]
    >>> finished == completed, book.ids[0] != "", book.idle_lanes().tolist()
    (True, True, [0])
    """

    def __init__(self, num_envs: int, autoreset_mode: int) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        if autoreset_mode not in _WIRE_MODES:
            raise ValueError(
                f"autoreset_mode must be NEXT_STEP (1), SAME_STEP (2) or DISABLED (3), got {autoreset_mode}"
            )
        self.num_envs = num_envs
        self.autoreset_mode = autoreset_mode
        self._ids: list[str] = [""] * num_envs
        self._seeds: list[int | None] = [None] * num_envs
        # Lane state as Python lists: per-step numpy operations on a few lanes cost more than
        # the Python they replace, and the hot path touches them only when an episode ends.
        self._active = [False] * num_envs
        self._active_count = 0
        self._pending: list[int] = []  # NEXT_STEP lanes whose next step is the env's reset step
        # Step counts as "steps recorded since the episode began": one int tick, no per-lane adds.
        self._tick = 0
        self._start_tick = [0] * num_envs
        # Running returns: a Python list for a few lanes (one numpy add on a tiny array costs
        # more than the loop), an array for many; float64 sums either way.
        self._returns: list[float] | np.ndarray = (
            [0.0] * num_envs if num_envs <= _LIST_RETURNS_MAX_LANES else np.zeros(num_envs, dtype=np.float64)
        )
        self._start_wall_ns = [0] * num_envs
        self._start_mono_ns = [0] * num_envs
        # DISABLED lanes that finished last step: their id is shown once more, then cleared.
        self._stale: list[int] = []
        self._interrupted: list[CompletedEpisode] = []
        self._retiring: set[int] = set()  # SAME_STEP lanes whose next ending begins no episode
        self._warned_reset_reward = False

    @property
    def ids(self) -> list[str]:
        """The episode id of every lane as a response reports it (``""`` for an idle lane)."""
        return list(self._ids)

    @property
    def all_active(self) -> bool:
        """Whether every lane has a running episode."""
        return self._active_count == self.num_envs

    def idle_lanes(self) -> np.ndarray:
        """Indices of lanes with no running episode and no autoreset pending."""
        pending = set(self._pending)
        return np.array(
            [lane for lane, active in enumerate(self._active) if not active and lane not in pending],
            dtype=np.int64,
        )

    def start(self, lanes: Sequence[int], seeds: Sequence[int | None]) -> None:
        """Start a new episode on each of ``lanes`` (a reset), with the seed at the same position.

        A lane whose episode is still running has it completed as interrupted
        (``terminated=False, truncated=True``, no final_info); it is delivered with the next
        :meth:`record_step` (or :meth:`drain`).
        """
        if len(seeds) != len(lanes):
            raise ValueError(f"expected one seed (or None) per started lane ({len(lanes)}), got {len(seeds)}")
        self._clear_stale()
        wall, mono = time.time_ns(), time.monotonic_ns()
        for lane, seed, episode_id in zip(lanes, seeds, new_episode_ids(len(lanes)), strict=True):
            if self._active[lane]:
                self._buffer_interrupted(self._completed(lane, False, True, wall, mono))
            self._begin(lane, seed, episode_id, wall, mono)
        if self._pending:
            started = set(lanes)
            self._pending = [lane for lane in self._pending if lane not in started]

    def record_step(
        self,
        rewards: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        *,
        done: Sequence[int] | None = None,
    ) -> tuple[list[CompletedEpisode], list[CompletedEpisode]]:
        """Account one step of every lane: ``(completed, finished)``.

        ``rewards`` (float64), ``terminated`` and ``truncated`` (bool) have one entry per lane.
        ``completed`` is what the step reports: interrupted episodes waiting from earlier resets
        first, then the episodes finished on this step in lane order; ``finished`` is that
        second part (whose ``final_info`` the caller fills; possibly the same list, on
        SAME_STEP's one-pass path).

        Raises ``ValueError`` (and changes nothing) when a NEXT_STEP lane that is waiting for its
        autoreset reports done. A reward on that reset step is not counted (docs/envs.md); a
        non-zero one (e.g. from a vector reward wrapper that shifts every reward) gets one
        ``RuntimeWarning`` per instance.

        ``done``, when the caller already knows them, are the lanes that are terminated or
        truncated, in lane order (``[]``: none), which skips reading them off the masks; with
        none due to finish either, the step is one tick and the rewards.
        """
        if done is not None and not done:
            if not (self._pending or self._stale or self._interrupted):
                # The common step: every running episode goes on, nothing to complete or clear.
                self._tick += 1
                self._add_rewards(rewards)
                return [], []
            ended_flags: list[bool] = []
            cut_flags: list[bool] = []
        else:
            ended_flags, cut_flags = terminated.tolist(), truncated.tolist()
            if done is None:
                done = list(compress(range(self.num_envs), map(or_, ended_flags, cut_flags)))
            if (
                done
                and self.autoreset_mode == _SAME_STEP
                and not (self._pending or self._stale or self._interrupted)
                and (self._active_count == self.num_envs or all(map(self._active.__getitem__, done)))
            ):
                ended = self._roll(rewards, done, ended_flags, cut_flags)
                return ended, ended
        pending = self._pending
        if pending:
            broken = sorted(set(pending).intersection(done)) if done else None
            if broken:
                raise ValueError(
                    f"NEXT_STEP lanes {broken} were waiting for their autoreset, so this step must be the "
                    "env's reset step (not done), but the env reported "
                    f"terminated {terminated[broken].tolist()}, truncated {truncated[broken].tolist()}"
                )
            if not self._warned_reset_reward:
                self._warn_reset_reward(rewards)
        self._clear_stale()
        completed: list[CompletedEpisode] = []
        if self._interrupted:
            completed.extend(self._interrupted)
            self._interrupted.clear()

        self._tick += 1
        # Lanes without a running episode (idle or pending) add garbage here; _begin zeroes their sum.
        self._add_rewards(rewards)
        active = self._active
        finished = done if self._active_count == self.num_envs else [lane for lane in done if active[lane]]
        if not pending and not finished:
            return completed, []

        wall, mono = time.time_ns(), time.monotonic_ns()
        if pending:
            for lane, episode_id in zip(pending, new_episode_ids(len(pending)), strict=True):
                self._begin(lane, None, episode_id, wall, mono)
            self._pending = []
        completing = self._completed
        ended = [completing(lane, ended_flags[lane], cut_flags[lane], wall, mono) for lane in finished]
        for lane in finished:
            active[lane] = False
        self._active_count -= len(finished)
        mode = self.autoreset_mode
        if mode == _NEXT_STEP:
            self._pending.extend(finished)
        elif mode == _SAME_STEP:
            retiring = self._retiring
            for lane, episode_id in zip(finished, new_episode_ids(len(finished)), strict=True):
                if lane in retiring:
                    self._retire_now(lane)
                else:
                    self._begin(lane, None, episode_id, wall, mono)
        else:
            self._stale.extend(finished)
        completed.extend(ended)
        return completed, ended

    def _roll(
        self, rewards: np.ndarray, done: Sequence[int], ended_flags: list[bool], cut_flags: list[bool]
    ) -> list[CompletedEpisode]:
        """SAME_STEP's usual finishing step (every lane running, nothing waiting): each of the
        ``done`` lanes' episodes ends and a new one begins on it. The general path of
        :meth:`record_step` in one pass, because short episodes finish some lane most steps."""
        tick = self._tick = self._tick + 1
        self._add_rewards(rewards)
        wall, mono = time.time_ns(), time.monotonic_ns()
        ids, seeds, returns, retiring = self._ids, self._seeds, self._returns, self._retiring
        start_tick, start_wall, start_mono = self._start_tick, self._start_wall_ns, self._start_mono_ns
        ended: list[CompletedEpisode] = []
        for lane, episode_id in zip(done, new_episode_ids(len(done)), strict=True):
            ended.append(
                CompletedEpisode(
                    ids[lane],
                    lane,
                    tick - start_tick[lane],
                    float(returns[lane]),
                    ended_flags[lane],
                    cut_flags[lane],
                    start_wall[lane],
                    wall,
                    (mono - start_mono[lane]) // 1_000_000,
                    seeds[lane],
                )
            )
            if retiring and lane in retiring:
                self._retire_now(lane)
                continue
            ids[lane] = episode_id
            seeds[lane] = None
            start_tick[lane] = tick
            returns[lane] = 0.0
            start_wall[lane] = wall
            start_mono[lane] = mono
        return ended

    def retire(self, lanes: Iterable[int]) -> None:
        """SAME_STEP: when the next episode of one of ``lanes`` ends (the running one, or the one
        a later start begins), no new one begins on it; the lane is idle (id ``""``) until it
        is started again."""
        if self.autoreset_mode != _SAME_STEP:
            raise ValueError("only SAME_STEP lanes retire after their episode (the others do not roll)")
        self._retiring.update(lanes)

    def drain(self) -> list[CompletedEpisode]:
        """End every running episode as truncated and return them after the waiting interrupted ones.

        This is what a ``CloseResponse.final_episodes`` carries. Afterwards every lane is idle.
        """
        wall, mono = time.time_ns(), time.monotonic_ns()
        episodes = list(self._interrupted)
        self._interrupted.clear()
        for lane, active in enumerate(self._active):
            if active:
                episodes.append(self._completed(lane, False, True, wall, mono))
        self._active = [False] * self.num_envs
        self._active_count = 0
        self._pending = []
        self._stale.clear()
        self._ids = [""] * self.num_envs
        return episodes

    def _add_rewards(self, rewards: np.ndarray) -> None:
        returns = self._returns
        if type(returns) is list:
            for lane, reward in enumerate(rewards.tolist()):
                returns[lane] += reward
        else:
            returns += rewards

    def _begin(self, lane: int, seed: int | None, episode_id: str, wall: int, mono: int) -> None:
        self._ids[lane] = episode_id
        self._seeds[lane] = seed
        if not self._active[lane]:
            self._active[lane] = True
            self._active_count += 1
        self._start_tick[lane] = self._tick
        self._returns[lane] = 0.0
        self._start_wall_ns[lane] = wall
        self._start_mono_ns[lane] = mono

    def _retire_now(self, lane: int) -> None:
        """The lane's episode just ended and it retires: idle, no new episode."""
        self._retiring.discard(lane)
        self._ids[lane] = ""
        if self._active[lane]:
            self._active[lane] = False
            self._active_count -= 1

    def _completed(
        self, lane: int, terminated: bool, truncated: bool, wall: int, mono: int
    ) -> CompletedEpisode:
        return CompletedEpisode(
            self._ids[lane],
            lane,
            self._tick - self._start_tick[lane],
            float(self._returns[lane]),
            terminated,
            truncated,
            self._start_wall_ns[lane],
            wall,
            (mono - self._start_mono_ns[lane]) // 1_000_000,
            self._seeds[lane],
        )

    def _warn_reset_reward(self, rewards: np.ndarray) -> None:
        lanes = sorted(lane for lane in self._pending if rewards[lane] != 0.0)
        if not lanes:
            return
        self._warned_reset_reward = True
        warnings.warn(
            f"NEXT_STEP lanes {lanes} reported rewards {rewards[lanes].tolist()} on their autoreset step "
            "(gymnasium's reset step, normally reward 0; a vector reward wrapper such as TransformReward "
            "also shifts it); that step is not part of any episode, so these rewards are not counted. "
            "Warned once per env.",
            RuntimeWarning,
            stacklevel=4,
        )

    def _buffer_interrupted(self, metadata: CompletedEpisode) -> None:
        if len(self._interrupted) >= INTERRUPTED_BUFFER_LIMIT:
            dropped = self._interrupted.pop(0)
            warnings.warn(
                f"more than {INTERRUPTED_BUFFER_LIMIT} interrupted episodes are waiting for a step; "
                f"dropping the oldest (episode {dropped.episode_id} of lane {dropped.env_index})",
                RuntimeWarning,
                stacklevel=3,
            )
        self._interrupted.append(metadata)

    def _clear_stale(self) -> None:
        if self._stale:
            for lane in self._stale:
                if not self._active[lane]:
                    self._ids[lane] = ""
            self._stale.clear()
