"""Per-route state: lane slots, the episode record registry, counters and request ids.

Faithful to upstream rlmesh-runtime 0.1.0-rc.1's ``state`` module
(docs/design/runtime.md#route-state):

* one slot per lane: ``env_index``, current episode (id, record id), ``step`` (driver steps
  since the lane's episode began) and ``reset`` (the lane's next observation is a fresh
  reset observation); slots start at ``step=0, reset=True`` with no episode;
* one episode record registry per route, shared by the lanes: a new env episode id gets
  the next route-global index and the record id ``ep-000001``, ``ep-000002``, ...; a reused id
  keeps its record and is not reported as started again;
* request ids ``<session>:<route>:<phase>:<seq:06>``, one sequence per route, used up by every
  predict request and by the close-route request;
* snapshots are lane-0-centric for their single-valued fields.

>>> state = RouteState("session", "route", num_envs=2)
>>> [started.record.record_id for started in state.start_episodes(["a", "b"], False)]
['ep-000001', 'ep-000002']
>>> state.next_request_id("reset")
'session:route:reset:000001'
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import partial
from itertools import compress
from operator import ne
from typing import TYPE_CHECKING

from rlmesh_gym._wire import (
    CONTEXT_REQUEST_ID,
    CONTEXT_ROUTE_ID,
    CONTEXT_SESSION_ID,
    CONTEXT_SLOTS,
    SLOT_ENV_INDEX,
    SLOT_EPISODE_ID,
    SLOT_RESET,
    SLOT_STEP,
    length_delimited,
)
from rlmesh_gym._wire import varint as _varint
from rlmesh_gym.proto import common_pb2, model_pb2
from rlmesh_gym.runtime.events import RuntimeRouteContext
from rlmesh_gym.runtime.seams import ArrayPredictContext

if TYPE_CHECKING:
    from rlmesh_gym.runtime.spec import RuntimeSessionSpec

__all__ = [
    "EpisodeRegistry",
    "RegisteredEpisode",
    "RequestPhase",
    "RouteSnapshot",
    "RouteState",
    "SlotState",
    "StartedEpisode",
]

_INT32_MAX = (1 << 31) - 1


def _field(tag: bytes, data: bytes) -> bytes:
    """A length-delimited field (empty when ``data`` is, as proto3 writes defaults)."""
    return length_delimited(tag, data) if data else b""


# PredictContext / PredictSlot wire pieces. Contexts are built as bytes and parsed once: one
# C-level parse is much cheaper than a Python-level message construction per slot.
_SLOT_TAG = CONTEXT_SLOTS
_STEP_FIELDS = tuple(SLOT_STEP + _varint(step) if step else b"" for step in range(1 << 14))
_RESET_FIELD = SLOT_RESET + b"\x01"  # reset = true
_SLOT_HEADERS = tuple(_SLOT_TAG + _varint(size) for size in range(128))
_REQUEST_ID_HEADERS = tuple(CONTEXT_REQUEST_ID + _varint(size) for size in range(128))


def _slot(prefix: bytes, step: int, reset: bool) -> bytes:
    """One encoded ``PredictContext.slots`` entry."""
    body = prefix + (SLOT_STEP + _varint(step) if step else b"") + (_RESET_FIELD if reset else b"")
    return _SLOT_TAG + _varint(len(body)) + body


def _slot_prefix(env_index: int, episode_id: str) -> bytes:
    """PredictSlot fields 1 and 2 of a lane."""
    index_field = SLOT_ENV_INDEX + _varint(env_index) if env_index else b""
    return index_field + _field(SLOT_EPISODE_ID, episode_id.encode("utf-8"))


class RequestPhase(str, Enum):
    """The phase part of a request id."""

    RESET_OBSERVATION = "reset_observation"
    STEP_OBSERVATION = "step_observation"
    CLOSE_ROUTE = "close_route"


@dataclass(slots=True)
class RegisteredEpisode:
    """What the route registered for an env episode id the first time it saw it (treat as read-only).

    ``record_id`` (``ep-000001``, ...) is the route-global name events carry as
    ``episode_record_id``. Not to be confused with :class:`rlmesh_gym.recording.EpisodeRecord`, the
    evaluated episode's summary (return, length, seed, ...).
    """

    record_id: str
    index: int
    env_index: int
    started_from_auto_reset: bool


@dataclass(slots=True)
class StartedEpisode:
    """An episode id seen for the first time, with its new record (treat as read-only)."""

    episode_id: str
    record: RegisteredEpisode


@dataclass(frozen=True, slots=True)
class SlotState:
    """One lane's slot (``episode_id == ""`` when the lane has no episode)."""

    env_index: int
    episode_id: str
    episode_record_id: str
    step: int
    reset: bool


@dataclass(frozen=True, slots=True)
class RouteSnapshot:
    """Every lane's episode ids plus lane 0's episode, step, index and reset flag."""

    episode_ids: list[str]
    episode_record_ids: list[str]
    episode_id: str
    episode_record_id: str
    step: int
    env_index: int
    reset: bool


class EpisodeRegistry:
    """Env episode id -> :class:`RegisteredEpisode`, for one route; records are never deleted.

    Records are kept as columns (an id's index into lists of record ids, lanes and auto-reset
    flags) and handed out as :class:`RegisteredEpisode`: registering an episode allocates no
    object the garbage collector tracks, so a session of short episodes (one record each) does
    not set off collections, and a long session's registry is never walked by one.
    """

    __slots__ = ("_indices", "_record_ids", "_env_indices", "_auto_resets")

    def __init__(self) -> None:
        self._indices: dict[str, int] = {}  # episode id -> index (1, 2, ...)
        # By index - 1:
        self._record_ids: list[str] = []
        self._env_indices: list[int] = []
        self._auto_resets: list[bool] = []

    def __len__(self) -> int:
        return len(self._indices)

    def get(self, episode_id: str) -> RegisteredEpisode | None:
        """The record of ``episode_id``, or ``None`` if the route never saw it."""
        index = self._indices.get(episode_id)
        return None if index is None else self._record(index)

    def names(self, episode_ids: Iterable[str]) -> list[tuple[str, int]]:
        """``(record_id, index)`` of each of ``episode_ids``, in order: ``("", 0)`` for an id the
        route never saw (what an event of that episode carries)."""
        get, record_ids, unknown = self._indices.get, self._record_ids, ("", 0)
        return [
            (record_ids[index - 1], index) if (index := get(episode_id)) is not None else unknown
            for episode_id in episode_ids
        ]

    def ensure_for_slots(
        self, episode_ids: Sequence[str], started_from_auto_reset: bool
    ) -> tuple[list[str], list[StartedEpisode]]:
        """Record ids aligned with ``episode_ids`` (``""`` for an empty id), and the new ones.

        A new id gets ``env_index`` = its position and the given ``started_from_auto_reset``.
        """
        started: list[StartedEpisode] = []
        record_ids = self.ensure_lanes(episode_ids, range(len(episode_ids)), started_from_auto_reset, started)
        return record_ids, started

    def ensure_lanes(
        self,
        episode_ids: Sequence[str],
        lanes: Iterable[int],
        started_from_auto_reset: bool,
        started: list[StartedEpisode] | None,
    ) -> list[str]:
        """The record ids of ``episode_ids[lane]`` for each of ``lanes`` (``""`` for an empty id).

        An id seen for the first time is registered with ``env_index`` = its lane and appended
        to ``started`` (unless ``None``: nobody asked).
        """
        indices, registered = self._indices, self._record_ids
        record_ids: list[str] = []
        for lane in lanes:
            episode_id = episode_ids[lane]
            if not episode_id:
                record_ids.append("")
                continue
            index = indices.get(episode_id)
            if index is None:
                index = indices[episode_id] = len(registered) + 1
                registered.append(f"ep-{index:06d}")
                self._env_indices.append(lane)
                self._auto_resets.append(started_from_auto_reset)
                if started is not None:
                    started.append(StartedEpisode(episode_id, self._record(index)))
            record_ids.append(registered[index - 1])
        return record_ids

    def _record(self, index: int) -> RegisteredEpisode:
        position = index - 1
        return RegisteredEpisode(
            self._record_ids[position], index, self._env_indices[position], self._auto_resets[position]
        )


class RouteState:
    """Slots, counters, episode records and request ids of one route."""

    __slots__ = (
        "session_id",
        "route_id",
        "env_component_id",
        "model_component_id",
        "num_envs",
        "registry",
        "request_seq",
        "total_steps",
        "total_episodes",
        "_request_prefix",
        "_id_prefixes",
        "_context_head",
        "_slot_prefixes",
        "_env_indices",
        "_episode_ids",
        "_record_ids",
        "_starts",
        "_resets",
        "_any_reset",
        "_lockstep_tail",
        "_stale_prefixes",
    )

    def __init__(
        self,
        session_id: str,
        route_id: str,
        num_envs: int = 1,
        env_component_id: str = "env",
        model_component_id: str = "model",
    ) -> None:
        lanes = max(1, num_envs)
        self.session_id = session_id
        self.route_id = route_id
        self.env_component_id = env_component_id
        self.model_component_id = model_component_id
        self.num_envs = lanes
        self.registry = EpisodeRegistry()
        self.request_seq = 0
        self.total_steps = 0
        self.total_episodes = 0
        self._request_prefix = f"{session_id}:{route_id}:"
        self._id_prefixes: dict[RequestPhase | str, bytes] = {}
        self._context_head = _field(CONTEXT_SESSION_ID, session_id.encode("utf-8")) + _field(
            CONTEXT_ROUTE_ID, route_id.encode("utf-8")
        )
        self._env_indices = [min(lane, _INT32_MAX) for lane in range(lanes)]
        self._slot_prefixes = [_slot_prefix(env_index, "") for env_index in self._env_indices]
        self._episode_ids = [""] * lanes
        self._record_ids = [""] * lanes
        # A lane's step is total_steps - its start, so record_step() is O(1).
        self._starts = [0] * lanes
        self._resets = [True] * lanes
        self._any_reset = True
        # Lanes 1..'s slot prefixes when every lane has the same step and lanes 1.. the same
        # prefix length ([] when they do not, None when not yet known): see encode_context().
        self._lockstep_tail: list[bytes] | None = None
        # Lanes whose slot prefix is out of date: encoded when a context is next encoded (an
        # array-form model never asks for one, so a rolled id costs no encoding there).
        self._stale_prefixes: set[int] = set()

    @classmethod
    def from_spec(cls, spec: RuntimeSessionSpec) -> RouteState:
        """The state of a session spec's route."""
        return cls(
            spec.session_id, spec.route_id, spec.num_envs, spec.env_component_id, spec.model_component_id
        )

    def route_context(self) -> RuntimeRouteContext:
        """The ``route`` of this route's events."""
        return RuntimeRouteContext(self.route_id, self.env_component_id, self.model_component_id)

    # -- episodes -------------------------------------------------------------------------

    def start_episodes(
        self, episode_ids: Sequence[str], started_from_auto_reset: bool
    ) -> list[StartedEpisode]:
        """Adopt a full reset's ids: every lane restarts (``step=0, reset=True``)."""
        record_ids, started = self.registry.ensure_for_slots(episode_ids, started_from_auto_reset)
        self._sync_slots(episode_ids, record_ids, force_reset=True)
        return started

    def episode_ids_changed(self, episode_ids: Sequence[str]) -> bool:
        """Whether a step's ids differ from the lanes' (an empty list, no ids reported, does not)."""
        return bool(episode_ids) and episode_ids != self._episode_ids

    def observe_episode_ids(
        self, episode_ids: Sequence[str], report_started: bool = True
    ) -> list[StartedEpisode]:
        """Adopt a step's (or partial reset's) ids: only lanes whose id rolled restart.

        Returns the episodes seen for the first time; with ``report_started=False`` they are
        registered all the same but not listed (``[]``), for a caller nobody listens to.
        """
        if episode_ids == self._episode_ids:
            return []  # the common step: every id known and unchanged, nothing to do
        ids = list(episode_ids)
        if len(ids) != self.num_envs:
            record_ids, started_now = self.registry.ensure_for_slots(ids, True)
            self._sync_slots(ids, record_ids, force_reset=False)
            return started_now
        # Full width: an unchanged id is already registered and its slot already synced, so
        # only the lanes that changed need the registry and a sync (same result, in lane order).
        changed = list(compress(range(self.num_envs), map(ne, ids, self._episode_ids)))
        started: list[StartedEpisode] | None = [] if report_started else None
        record_ids = self.registry.ensure_lanes(ids, changed, True, started)
        self._sync_lanes(changed, ids, record_ids, force_reset=False)
        return started or []

    def _sync_slots(self, episode_ids: Sequence[str], record_ids: list[str], *, force_reset: bool) -> None:
        # Upstream also stores each slot's record index and auto-reset flag; nothing reads
        # them, so they are not kept here. Lanes past the ids given have no episode; ids past
        # the lanes are ignored.
        lanes = self.num_envs
        missing = [""] * max(0, lanes - len(episode_ids))
        ids = [*episode_ids[:lanes], *missing]
        self._sync_lanes(range(lanes), ids, [*record_ids[:lanes], *missing], force_reset=force_reset)

    def _sync_lanes(
        self,
        lanes: Iterable[int],
        episode_ids: Sequence[str],
        record_ids: Sequence[str],
        *,
        force_reset: bool,
    ) -> None:
        """Give each of ``lanes`` the episode ``episode_ids[lane]`` with the record id at the same
        position in ``record_ids``; a lane whose id rolled (or every lane, ``force_reset``)
        restarts at step 0 with ``reset`` set."""
        current, slot_record_ids = self._episode_ids, self._record_ids
        starts, resets, total = self._starts, self._resets, self.total_steps
        for lane, record_id in zip(lanes, record_ids, strict=True):
            episode_id, previous = episode_ids[lane], current[lane]
            if episode_id != previous:
                self._stale_prefixes.add(lane)
                self._lockstep_tail = None
            current[lane] = episode_id
            slot_record_ids[lane] = record_id
            # An empty id leaves the lane without an episode but does not reset its step.
            if force_reset or (episode_id and episode_id != previous):
                starts[lane] = total
                resets[lane] = True
                self._any_reset = True
                self._lockstep_tail = None

    def record_step(self) -> None:
        """One driver step: every lane's ``step`` + 1 and ``reset`` = False."""
        self.total_steps += 1
        if self._any_reset:
            self._resets = [False] * self.num_envs
            self._any_reset = False

    def complete_episode(self, episode_id: str) -> RegisteredEpisode | None:
        """Count one completed episode (always) and return its record, if the route knows it."""
        self.total_episodes += 1
        return self.registry.get(episode_id)

    def complete_episodes(self, episode_ids: Sequence[str]) -> list[tuple[str, int]]:
        """Count each of ``episode_ids`` as completed; their ``(record_id, index)`` in order
        (``("", 0)`` for an episode the route never saw), as their events carry them."""
        self.total_episodes += len(episode_ids)
        return self.registry.names(episode_ids)

    # -- views ----------------------------------------------------------------------------

    @property
    def step(self) -> int:
        """Lane 0's step (the ``step`` of snapshots and error messages)."""
        return self.total_steps - self._starts[0]

    @property
    def episode_id(self) -> str:
        """Lane 0's episode id (``""`` for none)."""
        return self._episode_ids[0]

    @property
    def episode_record_id(self) -> str:
        """Lane 0's episode record id (``""`` for none)."""
        return self._record_ids[0]

    def episode_ids(self) -> list[str]:
        """Every lane's episode id (``""`` for none), as a new list."""
        return list(self._episode_ids)

    def episode_record_ids(self) -> list[str]:
        """Every lane's episode record id (``""`` for none), as a new list."""
        return list(self._record_ids)

    def lane_steps(self) -> list[int]:
        """Every lane's step."""
        total = self.total_steps
        return [total - start for start in self._starts]

    def slots(self) -> list[SlotState]:
        """Every lane's slot, in lane order."""
        total = self.total_steps
        return [
            SlotState(env_index, episode_id, record_id, total - start, reset)
            for env_index, episode_id, record_id, start, reset in zip(
                self._env_indices,
                self._episode_ids,
                self._record_ids,
                self._starts,
                self._resets,
                strict=True,
            )
        ]

    def snapshot(self) -> RouteSnapshot:
        """Every lane's ids plus lane 0's episode, step, env index and reset flag."""
        return RouteSnapshot(
            list(self._episode_ids),
            list(self._record_ids),
            self._episode_ids[0],
            self._record_ids[0],
            self.total_steps - self._starts[0],
            self._env_indices[0],
            self._resets[0],
        )

    # -- requests -------------------------------------------------------------------------

    def next_request_id(self, phase: RequestPhase | str) -> str:
        """Use up the next request id: ``<session>:<route>:<phase>:<seq:06>``."""
        self.request_seq += 1
        text = phase.value if type(phase) is RequestPhase else phase
        return f"{self._request_prefix}{text}:{self.request_seq:06d}"

    def fill_context(self, context: model_pb2.PredictContext, phase: RequestPhase | str) -> bytes:
        """Write a fresh context (next request id, every slot as it is now) into ``context``.

        Returns the context's serialized bytes (canonical: what ``SerializeToString`` gives).
        """
        data = self.encode_context(phase)
        context.ParseFromString(data)
        return data

    def encode_context(self, phase: RequestPhase | str) -> bytes:
        """A fresh ``PredictContext`` (next request id, every slot as it is now), serialized."""
        self.request_seq += 1
        return self._encode_context(phase, self.request_seq)

    def predict_context(self, phase: RequestPhase | str) -> ArrayPredictContext:
        """The context of the next array-form predict: uses up a request id now; its message
        (every slot as it is when built) is encoded only if the model asks for it."""
        self.request_seq += 1
        return ArrayPredictContext(
            self.session_id,
            self.route_id,
            self.num_envs,
            partial(self._encode_context, phase, self.request_seq),
        )

    def _encode_context(self, phase: RequestPhase | str, seq: int) -> bytes:
        id_prefix = self._id_prefixes.get(phase)
        if id_prefix is None:
            text = phase.value if type(phase) is RequestPhase else phase
            id_prefix = self._id_prefixes[phase] = f"{self._request_prefix}{text}:".encode()
        request_id = b"%s%06d" % (id_prefix, seq)  # next_request_id(), as bytes
        size = len(request_id)
        parts = [
            self._context_head,
            _REQUEST_ID_HEADERS[size] if size < 128 else CONTEXT_REQUEST_ID + _varint(size),
            request_id,
        ]
        total = self.total_steps
        if self._stale_prefixes:
            for lane in self._stale_prefixes:
                self._slot_prefixes[lane] = _slot_prefix(self._env_indices[lane], self._episode_ids[lane])
            self._stale_prefixes.clear()
        prefixes, starts = self._slot_prefixes, self._starts
        steps, headers = _STEP_FIELDS, _SLOT_HEADERS
        if not self._any_reset and total - starts[0] < len(steps):
            tail = self._lockstep_tail
            if tail is None:
                tail = self._lockstep_tail = self._find_lockstep_tail()
            if tail:
                # Every slot is header + prefix + step field, and the header and step field are
                # the same for lanes 1.., so they are joined in one call (same bytes as the loop).
                step_field = steps[total - starts[0]]
                first = prefixes[0] + step_field
                size = len(prefixes[1]) + len(step_field)
                if len(first) < 128 and size < 128:
                    header = headers[size]
                    tail_slots = (step_field + header).join(tail)
                    parts += (headers[len(first)], first, header, tail_slots, step_field)
                    return b"".join(parts)
        append = parts.append
        try:
            for prefix, start in zip(prefixes, starts, strict=True):
                body = prefix + steps[total - start]
                append(headers[len(body)] + body)
        except IndexError:  # a step past the table or a slot of 128+ bytes: encode in full
            del parts[3:]
            parts.extend(
                _slot(prefix, total - start, False) for prefix, start in zip(prefixes, starts, strict=True)
            )
        if self._any_reset:
            for lane, reset in enumerate(self._resets):
                if reset:
                    parts[3 + lane] = _slot(prefixes[lane], total - starts[lane], True)
        return b"".join(parts)

    def _find_lockstep_tail(self) -> list[bytes]:
        """Lanes 1..'s slot prefixes if all lanes share one step and lanes 1.. one prefix length, else []."""
        starts, tail = self._starts, self._slot_prefixes[1:]
        if not tail or starts.count(starts[0]) != len(starts):
            return []
        size = len(tail[0])
        return tail if all(len(prefix) == size for prefix in tail) else []

    def predict_request(
        self, observation: bytes | common_pb2.MessageBytes | None, phase: RequestPhase | str
    ) -> model_pb2.PredictRequest:
        """A predict request for ``observation`` (absent if ``None``); uses up a request id."""
        request = model_pb2.PredictRequest()
        self.fill_context(request.context, phase)
        if observation is not None:
            if isinstance(observation, bytes):
                request.observation.bytes.data = observation
            else:
                request.observation.bytes.CopyFrom(observation)
        return request

    def close_route_request(self, reason: str) -> model_pb2.CloseRouteRequest:
        """The ``CloseRouteRequest`` of this route (phase ``close_route``); uses up a request id."""
        request = model_pb2.CloseRouteRequest(reason=reason)
        self.fill_context(request.context, RequestPhase.CLOSE_ROUTE)
        return request
