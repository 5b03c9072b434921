"""Per-lane episode ids and :class:`EpisodeMetadata` book-keeping of a vector env (wire.md §7).

The env side owns episode ids: a fresh UUIDv4 per lane at every reset and at every autoreset
roll. :class:`LaneEpisodes` keeps, for each lane, the current id, the seed it was reset with,
the counted steps and return, and the start timestamps, and turns finished episodes into
``EpisodeMetadata`` messages. It knows nothing about gymnasium; the adapter feeds it the
reward and done masks of each step.

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
from collections.abc import Sequence

import numpy as np
from google.protobuf.internal.containers import RepeatedCompositeFieldContainer

from rlmesh_gym._wire import length_delimited
from rlmesh_gym.proto import env_pb2

__all__ = ["INTERRUPTED_BUFFER_LIMIT", "LaneEpisodes", "new_episode_id"]

INTERRUPTED_BUFFER_LIMIT = 100
"""At most this many interrupted episodes wait for the next step (as in rlmesh's env server)."""

_NEXT_STEP = env_pb2.AUTORESET_MODE_NEXT_STEP
_SAME_STEP = env_pb2.AUTORESET_MODE_SAME_STEP
_MODES = (env_pb2.AUTORESET_MODE_NEXT_STEP, env_pb2.AUTORESET_MODE_SAME_STEP, env_pb2.AUTORESET_MODE_DISABLED)


_ID_TAG = b"\x3a"  # StepResponse.episode_ids (7, length-delimited)
_EMPTY_ID_FIELD = length_delimited(_ID_TAG, b"")

_ID_POOL_BYTES = 16 * 256
_id_pool = bytearray()
_id_pool_lock = threading.Lock()
# A forked child must not hand out the parent's remaining random bytes (duplicate ids).
os.register_at_fork(after_in_child=_id_pool.clear)


def new_episode_id() -> str:
    """A random UUIDv4 in lowercase hyphenated form (the same as ``str(uuid.uuid4())``).

    Random bytes come from ``os.urandom`` in blocks of 256 ids: one system call per block
    instead of one per id, which matters when many lanes roll on the same step.

    >>> import uuid
    >>> episode_id = new_episode_id()
    >>> len(episode_id), uuid.UUID(episode_id).version, str(uuid.UUID(episode_id)) == episode_id
    (36, 4, True)
    """
    with _id_pool_lock:
        if not _id_pool:
            _id_pool.extend(os.urandom(_ID_POOL_BYTES))
        raw = _id_pool[-16:]
        del _id_pool[-16:]
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


class LaneEpisodes:
    """Episode ids and running statistics of ``num_envs`` lanes under one autoreset mode.

    >>> from rlmesh_gym.proto import env_pb2
    >>> book = LaneEpisodes(2, env_pb2.AUTORESET_MODE_DISABLED)
    >>> book.start([0, 1], [7, None])
    >>> response = env_pb2.StepResponse()
    >>> done = book.record_step(np.array([1.0, 2.0]), np.array([True, False]), np.array([False, False]),
    ...                         response.completed_episodes)
    >>> [(m.env_index, m.seed, m.step_count, m.cumulative_reward, m.terminated)
    ...  for m in response.completed_episodes]
    [(0, 7, 1, 1.0, True)]
    >>> [lane for lane, _ in done], book.ids[0] != "", book.idle_lanes().tolist()
    ([0], True, [0])
    """

    def __init__(self, num_envs: int, autoreset_mode: int) -> None:
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        if autoreset_mode not in _MODES:
            raise ValueError(
                f"autoreset_mode must be NEXT_STEP (1), SAME_STEP (2) or DISABLED (3), got {autoreset_mode}"
            )
        self.num_envs = num_envs
        self.autoreset_mode = autoreset_mode
        self._ids: list[str] = [""] * num_envs
        # encoded_ids(): each lane's encoded id, and their concatenation (dropped when an id changes).
        self._id_fields: list[bytes] = [_EMPTY_ID_FIELD] * num_envs
        self._ids_field: bytes | None = None
        self._seeds: list[int | None] = [None] * num_envs
        self._active = np.zeros(num_envs, dtype=np.bool_)
        self._all_active = False
        self._pending = np.zeros(num_envs, dtype=np.bool_)
        self._any_pending = False
        # Step counts as "steps recorded since the episode began": one int tick, no per-lane adds.
        self._tick = 0
        self._start_tick = [0] * num_envs
        self._returns = np.zeros(num_envs, dtype=np.float64)
        self._start_wall_ns = [0] * num_envs
        self._start_mono_ns = [0] * num_envs
        # DISABLED lanes that finished last step: their id is shown once more, then cleared.
        self._stale: list[int] = []
        self._interrupted: list[env_pb2.EpisodeMetadata] = []
        self._warned_reset_reward = False

    @property
    def ids(self) -> list[str]:
        """The episode id of every lane as a response reports it (``""`` for an idle lane)."""
        return list(self._ids)

    def encoded_ids(self) -> bytes:
        """:attr:`ids` encoded as the repeated string field ``StepResponse.episode_ids`` (7).

        Cached until an id changes, so a step whose ids did not roll encodes nothing.
        """
        if self._ids_field is None:
            self._ids_field = b"".join(self._id_fields)
        return self._ids_field

    @property
    def all_active(self) -> bool:
        """Whether every lane has a running episode."""
        return self._all_active

    def idle_lanes(self) -> np.ndarray:
        """Indices of lanes with no running episode and no autoreset pending."""
        return np.flatnonzero(~(self._active | self._pending))

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
        for lane, seed in zip(lanes, seeds, strict=True):
            if self._active[lane]:
                self._buffer_interrupted(self._fill(env_pb2.EpisodeMetadata(), lane, False, True, wall, mono))
            self._begin(lane, seed, wall, mono)
        self._pending[list(lanes)] = False
        self._any_pending = bool(self._pending.any())
        self._all_active = bool(self._active.all())

    def record_step(
        self,
        rewards: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        completed: RepeatedCompositeFieldContainer[env_pb2.EpisodeMetadata],
        *,
        any_done: bool | None = None,
    ) -> list[tuple[int, env_pb2.EpisodeMetadata]]:
        """Account one step of every lane and append the finished episodes to ``completed``.

        ``rewards`` (float64), ``terminated`` and ``truncated`` (bool) have one entry per lane.
        ``completed`` is a repeated ``EpisodeMetadata`` field (``StepResponse.completed_episodes``):
        interrupted episodes waiting from earlier resets come first, then the episodes finished on
        this step in lane order. Returns ``(lane, entry)`` for each episode finished on this step
        (not the interrupted ones), so the caller can fill its ``final_info``.

        Raises ``ValueError`` (and changes nothing) when a NEXT_STEP lane that is waiting for its
        autoreset reports done. A reward on that reset step is not counted (wire.md §7.2); a
        non-zero one (e.g. from a vector reward wrapper that shifts every reward) gets one
        ``RuntimeWarning`` per instance.

        ``any_done=False`` tells that no lane is terminated or truncated (the caller has already
        looked at the masks), which skips the mask arithmetic when nothing else is due either.
        """
        if any_done is False and not (self._any_pending or self._stale or self._interrupted):
            # The common step: every running episode goes on, nothing to complete or clear.
            self._tick += 1
            self._returns += rewards
            return []
        done = terminated | truncated
        if self._any_pending:
            broken = self._pending & done
            if broken.any():
                lanes = np.flatnonzero(broken).tolist()
                raise ValueError(
                    f"NEXT_STEP lanes {lanes} were waiting for their autoreset, so this step must be the "
                    "env's reset step (not done), but the env reported "
                    f"terminated {terminated[lanes].tolist()}, truncated {truncated[lanes].tolist()}"
                )
            if not self._warned_reset_reward:
                self._warn_reset_reward(rewards)
        self._clear_stale()
        if self._interrupted:
            completed.extend(self._interrupted)
            self._interrupted.clear()

        self._tick += 1
        # Lanes without a running episode (idle or pending) add garbage here; _begin zeroes their sum.
        self._returns += rewards
        finished = done.nonzero()[0] if self._all_active else (done & self._active).nonzero()[0]

        if not self._any_pending and not finished.size:
            return []

        wall, mono = time.time_ns(), time.monotonic_ns()
        if self._any_pending:
            for lane in np.flatnonzero(self._pending).tolist():
                self._begin(lane, None, wall, mono)
            self._pending[:] = False
            self._any_pending = False
        entries = []
        for lane in finished.tolist():
            entry = self._fill(
                completed.add(), lane, bool(terminated[lane]), bool(truncated[lane]), wall, mono
            )
            entries.append((lane, entry))
            self._active[lane] = False
            if self.autoreset_mode == _NEXT_STEP:
                self._pending[lane] = True
                self._any_pending = True
            elif self.autoreset_mode == _SAME_STEP:
                self._begin(lane, None, wall, mono)
            else:
                self._stale.append(lane)
        self._all_active = bool(self._active.all())
        return entries

    def drain(self) -> list[env_pb2.EpisodeMetadata]:
        """End every running episode as truncated and return them after the waiting interrupted ones.

        This is what a ``CloseResponse.final_episodes`` carries. Afterwards every lane is idle.
        """
        wall, mono = time.time_ns(), time.monotonic_ns()
        episodes = list(self._interrupted)
        self._interrupted.clear()
        for lane in np.flatnonzero(self._active).tolist():
            episodes.append(self._fill(env_pb2.EpisodeMetadata(), lane, False, True, wall, mono))
        self._active[:] = False
        self._all_active = False
        self._pending[:] = False
        self._any_pending = False
        self._stale.clear()
        self._ids = [""] * self.num_envs
        self._id_fields = [_EMPTY_ID_FIELD] * self.num_envs
        self._ids_field = None
        return episodes

    def _begin(self, lane: int, seed: int | None, wall: int, mono: int) -> None:
        episode_id = self._ids[lane] = new_episode_id()
        self._id_fields[lane] = length_delimited(_ID_TAG, episode_id.encode())
        self._ids_field = None
        self._seeds[lane] = seed
        self._active[lane] = True
        self._start_tick[lane] = self._tick
        self._returns[lane] = 0.0
        self._start_wall_ns[lane] = wall
        self._start_mono_ns[lane] = mono

    def _fill(
        self,
        metadata: env_pb2.EpisodeMetadata,
        lane: int,
        terminated: bool,
        truncated: bool,
        wall: int,
        mono: int,
    ) -> env_pb2.EpisodeMetadata:
        metadata.episode_id = self._ids[lane]
        metadata.env_index = lane
        metadata.step_count = self._tick - self._start_tick[lane]
        metadata.cumulative_reward = float(self._returns[lane])
        metadata.terminated = terminated
        metadata.truncated = truncated
        metadata.start_timestamp_ns = self._start_wall_ns[lane]
        metadata.end_timestamp_ns = wall
        metadata.duration_ms = (mono - self._start_mono_ns[lane]) // 1_000_000
        seed = self._seeds[lane]
        if seed is not None:
            metadata.seed = seed
        return metadata

    def _warn_reset_reward(self, rewards: np.ndarray) -> None:
        nonzero = self._pending & (rewards != 0.0)
        if not nonzero.any():
            return
        self._warned_reset_reward = True
        lanes = np.flatnonzero(nonzero).tolist()
        warnings.warn(
            f"NEXT_STEP lanes {lanes} reported rewards {rewards[lanes].tolist()} on their autoreset step "
            "(gymnasium's reset step, normally reward 0; a vector reward wrapper such as TransformReward "
            "also shifts it); that step is not part of any episode, so these rewards are not counted. "
            "Warned once per env.",
            RuntimeWarning,
            stacklevel=4,
        )

    def _buffer_interrupted(self, metadata: env_pb2.EpisodeMetadata) -> None:
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
                    self._id_fields[lane] = _EMPTY_ID_FIELD
                    self._ids_field = None
            self._stale.clear()
