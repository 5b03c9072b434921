"""The recorder hook: :class:`EpisodeRecorder` writes a runtime session's episodes to a file.

Hot path: three hooks per step keep references (the observation and action payloads the
model saw and sent, and the step response) in a step buffer; nothing is decoded or written.
When a recorded lane's episode ends, its slice of that buffer becomes one ``steps`` record
(numpy arrays per field), then the env's summary becomes an ``episode`` record and the file
is flushed. Session end, failure and :meth:`EpisodeRecorder.close` write what is still
buffered and flush.

Which steps belong to an episode (the alignment, the same in every autoreset mode): a lane's
episode starts at the first observation emitted with its new episode id, and ends with the
first step whose terminated or truncated flag is set for that lane (or the env's report that
the episode completed). Step ``t`` of an episode pairs the observation the model saw (after
``transform_observation``) with the action the env received (after ``transform_action``) and
that step's reward and flags. Consequences per mode:

* NEXT_STEP: after a lane's last step the model still sees the terminal observation and the
  env then spends one step resetting that lane (reward 0, flags unset, action ignored). That
  autoreset step is outside both episodes: the old one has ended and the new id only shows in
  the next observation. It is not recorded.
* SAME_STEP: the step that ends an episode already returns the next episode's first
  observation, which is recorded as step 0 of the new episode.
* DISABLED: the driver resets finished lanes; the reset observation is step 0 of the new episode.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
import warnings
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlmesh_gym import __version__
from rlmesh_gym.proto import env_pb2
from rlmesh_gym.recording._exclusive import open_exclusive
from rlmesh_gym.recording._format import FORMAT_NAME, FORMAT_VERSION, MAX_LANES, frame_problem, new_packer
from rlmesh_gym.recording._lanes import LaneValues
from rlmesh_gym.recording._options import RecordingOptions
from rlmesh_gym.recording.episode_record import EpisodeRecord
from rlmesh_gym.runtime import AutoresetMode, RuntimeHooks
from rlmesh_gym.runtime.events import (
    ActionReceivedEvent,
    EpisodeCompletedEvent,
    ObservationEmittedEvent,
    SessionEndedEvent,
    SessionFailedEvent,
    SessionStartedEvent,
    StepCompletedEvent,
)

__all__ = ["EpisodeRecorder"]

_log = logging.getLogger("rlmesh_gym.recording")


# A lane's episode is written in chunks once the step buffer holds this many steps, which
# bounds memory for very long episodes.
_MAX_BUFFERED_STEPS = 4096


@dataclass(slots=True)
class _Lane:
    """The episode a recorded lane is in."""

    episode_id: str = ""
    active: bool = False
    start: int = 0  # global step index of the first buffered step of this episode
    offset: int = 0  # the episode's own index of that step (non-zero after a chunk was written)
    chunk: int = 0
    frames: list[np.ndarray] = field(default_factory=list)
    frame_steps: list[int] = field(default_factory=list)


def _stops_on_write_error(
    hook: Callable[[EpisodeRecorder, Any], Coroutine[Any, Any, None]],
) -> Callable[[EpisodeRecorder, Any], Coroutine[Any, Any, None]]:
    """A hook that does nothing once a write failed, and turns its own failed write into that stop."""

    @functools.wraps(hook)
    async def guarded(self: EpisodeRecorder, event: Any) -> None:
        if self.write_error is not None:
            return
        try:
            await hook(self, event)
        except OSError as error:
            self._stop(error)

    return guarded


class EpisodeRecorder(RuntimeHooks):
    """A runtime hook that records the episodes of chosen lanes to a msgpack file.

    Args:
        record: the file path, or :class:`RecordingOptions` for lanes, strides, observations
            and frames.
        contract: the env's contract (spaces, ``num_envs``, autoreset mode), stored in the header.
        env_id: the env id to store (defaults to ``contract.id``); :func:`replay_episode` makes
            the env from it.
        base_seed: the session's base seed, stored in the header.
        render_frames: a callable returning one rendered frame (an ``(H, W, 3)`` uint8 array) per
            lane, or ``None`` when the env does not render; required when frames are asked for.
        env_kwargs: the keyword arguments the env was made with (``gymnasium.make(env_id,
            **env_kwargs)``), stored so :func:`replay_episode` makes the same env. Values msgpack
            cannot encode are not stored: a ``RuntimeWarning`` says so, and a replay then needs
            ``env=``.
        counted: called with a completed episode's id when its summary is written; its answer
            is stored as the episode's ``counted`` flag (whether the evaluation counted it).
            ``None`` stores no answer (``RecordedEpisode.counted`` is then ``None``). Hooks run
            in order, so the hook that counts must come before the recorder.

    The header is written (and flushed) on construction, so a bad path fails here, as does a
    path another recorder is writing (the file is locked until :meth:`close`; ``OSError``
    ``EBUSY`` naming it, the file untouched). Pass the
    recorder in a driver's hooks, and call :meth:`close` when the run is over.

    Example:
        >>> import asyncio
        >>> from rlmesh_gym.envs import GymVectorEnv
        >>> from rlmesh_gym.policies import RandomPolicy
        >>> from rlmesh_gym.recording import load_recording
        >>> from rlmesh_gym.runtime import RuntimeDriver, RuntimeSessionSpec
        >>> env = GymVectorEnv.make("CartPole-v1", num_envs=2)
        >>> spec = RuntimeSessionSpec(session_id="s", route_id="r", env_contract=env.contract,
        ...                           num_envs=2, base_seed=0, max_episodes=2)
        >>> recorder = EpisodeRecorder("run.rec", env.contract, base_seed=0)
        >>> model = RandomPolicy(0, env.contract)
        >>> report = asyncio.run(RuntimeDriver(spec, env, model, hooks=[recorder]).run())
        >>> recorder.close()
        >>> len(load_recording("run.rec").episodes) == report.total_episodes
        True
    """

    def __init__(
        self,
        record: str | os.PathLike[str] | RecordingOptions,
        contract: env_pb2.EnvContract,
        *,
        env_id: str | None = None,
        base_seed: int | None = None,
        render_frames: Callable[[], Sequence[Any] | None] | None = None,
        env_kwargs: Mapping[str, Any] | None = None,
        counted: Callable[[str], bool] | None = None,
    ) -> None:
        options = record if isinstance(record, RecordingOptions) else RecordingOptions(record)
        if not isinstance(contract, env_pb2.EnvContract):
            raise TypeError(
                f"EpisodeRecorder: contract must be an EnvContract, got {type(contract).__name__}"
            )
        num_envs = int(contract.num_envs)
        if not 1 <= num_envs <= MAX_LANES:
            raise ValueError(
                f"EpisodeRecorder: contract.num_envs must be in [1, {MAX_LANES}] (the most lanes a "
                f"recording holds), got {num_envs}"
            )
        lanes = tuple(range(num_envs)) if options.lanes is None else options.lanes
        bad = [lane for lane in (*lanes, *options.frame_lanes) if lane >= num_envs]
        if bad:
            raise ValueError(
                f"EpisodeRecorder: lanes {sorted(set(bad))} do not exist: the env has {num_envs} lane(s), "
                f"0..{num_envs - 1}"
            )
        if options.frame_lanes and render_frames is None:
            raise ValueError(
                "EpisodeRecorder: frame_lanes were asked for but no render_frames callable was given; "
                "make the env with render_mode='rgb_array' and pass its render_frames"
            )
        if render_frames is not None and not callable(render_frames):
            raise TypeError(f"EpisodeRecorder: render_frames must be callable, got {render_frames!r}")
        if counted is not None and not callable(counted):
            raise TypeError(f"EpisodeRecorder: counted must be callable or None, got {counted!r}")
        if base_seed is not None and (isinstance(base_seed, bool) or not isinstance(base_seed, int)):
            raise TypeError(f"EpisodeRecorder: base_seed must be an int or None, got {base_seed!r}")
        stored_kwargs, kwargs_note = _storable_kwargs(env_kwargs)

        self.options = options
        self.path = os.fspath(options.path)
        self._num_envs = num_envs
        self._lanes = lanes
        self._frame_lanes = options.frame_lanes if render_frames is not None else ()
        self._render_frames = render_frames
        self._counted = counted
        self._stride = options.step_stride
        self._actions = LaneValues(contract.action_space, num_envs, "action")
        self._observations = (
            LaneValues(contract.observation_space, num_envs, "observation") if options.observations else None
        )
        self._packer = new_packer()
        # Locked until close(): a second writer to this path is refused before it touches the file.
        self._file, _ = open_exclusive(self.path, truncate=True)
        self._closed = False
        self.write_error: OSError | None = None
        """Why recording stopped early (a write failed), or ``None``."""
        self._write_error_raised = False
        self._reset_session_state()
        self._write(
            {
                "kind": "header",
                "format": FORMAT_NAME,
                "version": FORMAT_VERSION,
                "writer": f"rlmesh-gym {__version__}",
                "created_ns": time.time_ns(),
                "env_id": contract.id if env_id is None else str(env_id),
                "contract": contract.SerializeToString(deterministic=True),
                "num_envs": num_envs,
                "autoreset_mode": _header_autoreset(contract.autoreset_mode),
                "base_seed": base_seed,
                "options": options.to_dict(),
                **({} if stored_kwargs is None else {"env_kwargs": stored_kwargs}),
                **({} if kwargs_note is None else {"env_kwargs_note": kwargs_note}),
            }
        )
        self._file.flush()

    # -- state ---------------------------------------------------------------------------------

    def _reset_session_state(self) -> None:
        self._state = [_Lane() for _ in range(self._num_envs)]
        # One entry per completed step: (observation, action, rewards, terminated, truncated).
        self._steps: list[tuple[bytes | None, bytes | None, Sequence[float], bytes, bytes]] = []
        self._base = 0  # global step index of self._steps[0]
        self._count = 0  # completed steps in this session
        self._seen_ids: tuple[str, ...] = ()
        self._obs: bytes | None = None
        self._action: bytes | None = None
        self._ended = False
        self._actions.clear()
        if self._observations is not None:
            self._observations.clear()

    # -- hooks (hot path first) ---------------------------------------------------------------

    @_stops_on_write_error
    async def observation_emitted(self, event: ObservationEmittedEvent) -> None:
        self._obs = event.observation
        ids = tuple(event.episode_ids)
        if ids != self._seen_ids:
            self._on_episode_ids(ids)
        if self._frame_lanes:
            self._maybe_render()

    async def action_received(self, event: ActionReceivedEvent) -> None:
        self._action = event.action

    @_stops_on_write_error
    async def step_completed(self, event: StepCompletedEvent) -> None:
        result = getattr(event, "result", None)
        if result is not None:  # the array form: no StepResponse is built for two masks
            terminated, truncated = _mask_bytes(result.terminated), _mask_bytes(result.truncated)
        else:
            response = event.response
            terminated = response.terminated_mask if response is not None else b""
            truncated = response.truncated_mask if response is not None else b""
        # event.rewards is the driver's own copy; the masks are immutable bytes.
        self._steps.append((self._obs, self._action, event.rewards, terminated, truncated))
        step = self._count
        self._count = step + 1
        if terminated.count(0) != len(terminated) or truncated.count(0) != len(truncated):
            for lane in self._lanes:
                state = self._state[lane]
                if state.active and (
                    (lane < len(terminated) and terminated[lane])
                    or (lane < len(truncated) and truncated[lane])
                ):
                    self._write_steps(lane, step, final=True)
            self._trim()
        if len(self._steps) >= _MAX_BUFFERED_STEPS:
            self._write_chunks()

    @_stops_on_write_error
    async def episode_completed(self, event: EpisodeCompletedEvent) -> None:
        lane = event.env_index
        if lane not in self._lanes:
            return
        state = self._state[lane]
        episode_id = event.episode_id
        if state.active and state.episode_id == episode_id:
            # The env reported the end without a done flag (for example empty masks).
            self._write_steps(lane, self._count - 1, final=True)
            self._trim()
        episode = getattr(event, "episode", None)
        if episode is not None:  # the array form: final_info is not converted to a MetaMap
            record = EpisodeRecord.from_episode(episode)
        else:
            metadata = getattr(event, "metadata", None)
            record = _record_from_event(event) if metadata is None else EpisodeRecord.from_metadata(metadata)
        counted = None if self._counted is None else bool(self._counted(episode_id))
        self._write(
            {
                "kind": "episode",
                "lane": lane,
                "episode_id": episode_id,
                "record": record.to_dict(),
                "counted": counted,
            }
        )
        self._file.flush()

    @_stops_on_write_error
    async def session_started(self, event: SessionStartedEvent) -> None:
        self._reset_session_state()
        route = getattr(event, "route", None)
        self._write(
            {
                "kind": "session",
                "session_id": event.session_id,
                "route_id": getattr(route, "route_id", ""),
                "env_id": event.env_id,
            }
        )
        self._file.flush()

    @_stops_on_write_error
    async def session_ended(self, event: SessionEndedEvent) -> None:
        self._finish_session(
            "ended", event.reason, total_steps=event.total_steps, total_episodes=event.total_episodes
        )

    @_stops_on_write_error
    async def session_failed(self, event: SessionFailedEvent) -> None:
        self._finish_session("failed", event.reason)

    def close(self) -> None:
        """Write whatever is still buffered, flush and close the file (safe to call twice).

        Raises:
            OSError: a write failed, now or during the session (:attr:`write_error`), raised by
                the first ``close`` only; the file holds the records written before it.
        """
        if not self._closed:
            try:
                if not self._ended:
                    self._finish_session("closed", "recorder closed before the session ended")
                self._closed = True
                self._file.close()
            except OSError as error:
                self._stop(error)
            finally:
                self._closed = True
        if self.write_error is not None and not self._write_error_raised:
            self._write_error_raised = True
            raise self.write_error

    def _stop(self, error: OSError) -> None:
        """Stop recording after a failed write (a full disk, a file size limit): keep the error
        naming the file, close the file, and say so once."""
        self.write_error = OSError(
            error.errno,
            f"writing recording file {self.path!r} failed ({error.strerror or error}); recording "
            "stopped, the file keeps the records written before the failure",
        )
        self.write_error.__cause__ = error
        self._closed = True
        with contextlib.suppress(OSError):
            self._file.close()  # its flush fails again, but the descriptor is closed
        _log.warning("%s", self.write_error)

    def __enter__(self) -> EpisodeRecorder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- bookkeeping ---------------------------------------------------------------------------

    def _on_episode_ids(self, ids: tuple[str, ...]) -> None:
        self._seen_ids = ids
        for lane in self._lanes:
            episode_id = ids[lane] if lane < len(ids) else ""
            state = self._state[lane]
            if episode_id == state.episode_id:
                continue
            if state.active:
                # Replaced without a done flag (e.g. an env-side reset): keep its steps, unfinished.
                self._write_steps(lane, self._count - 1, final=True)
            self._state[lane] = _Lane(episode_id=episode_id, active=bool(episode_id), start=self._count)
        self._trim()

    def _maybe_render(self) -> None:
        wanted = [
            lane
            for lane in self._frame_lanes
            if self._state[lane].active
            and (self._count - self._state[lane].start + self._state[lane].offset) % self.options.frame_stride
            == 0
        ]
        if not wanted:
            return
        try:
            frames = self._render_frames()  # type: ignore[misc]
            problem = None if frames is not None else "the env rendered no frames"
        except Exception as exc:  # noqa: BLE001 - any render failure only switches frames off
            frames, problem = None, f"rendering failed: {exc}"
        if frames is None:
            # Warn once and go on: a recording without frames beats a warning on every step.
            warnings.warn(
                f"EpisodeRecorder: {problem} (was the env made with render_mode='rgb_array'?); "
                "frame recording is switched off for the rest of this recording",
                RuntimeWarning,
                stacklevel=2,
            )
            self._frame_lanes = ()
            return
        for lane in wanted:
            frame = frames[lane]
            if frame is None:
                continue
            frame = np.array(frame)  # a copy: renderers may reuse their buffer
            unshowable = frame_problem(frame, leading=0)
            if unshowable is not None:  # a reader would refuse such frames; the ones kept are fine
                warnings.warn(
                    f"EpisodeRecorder: lane {lane} rendered {unshowable}, not a uint8 (H, W, C) image "
                    "with 1, 3 or 4 channels; frame recording is switched off for the rest of this "
                    "recording",
                    RuntimeWarning,
                    stacklevel=2,
                )
                self._frame_lanes = ()
                return
            state = self._state[lane]
            state.frames.append(frame)
            state.frame_steps.append(self._count - state.start + state.offset)

    def _write_steps(self, lane: int, last: int, *, final: bool) -> None:
        """Write the lane's buffered steps up to global step ``last`` (inclusive)."""
        state = self._state[lane]
        first = state.start
        stride = self._stride
        skip = (-state.offset) % stride  # keep episode step indices that are multiples of the stride
        selected = self._steps[first - self._base + skip : last - self._base + 1 : stride]
        if selected or state.frames:
            step_index = np.arange(len(selected), dtype=np.int64) * stride + (state.offset + skip)
            global_first = first + skip
            observations = None
            if self._observations is not None and selected:
                observations = self._observations.gather([s[0] for s in selected], global_first, stride, lane)
            actions = (
                self._actions.gather([s[1] for s in selected], global_first, stride, lane)
                if selected
                else None
            )
            rewards = np.array([s[2][lane] if len(s[2]) > lane else 0.0 for s in selected], dtype=np.float64)
            terminated = np.array([_flag(s[3], lane) for s in selected], dtype=np.bool_)
            truncated = np.array([_flag(s[4], lane) for s in selected], dtype=np.bool_)
            self._write(
                {
                    "kind": "steps",
                    "lane": lane,
                    "episode_id": state.episode_id,
                    "chunk": state.chunk,
                    "steps": step_index,
                    "observations": observations,
                    "actions": actions,
                    "rewards": rewards,
                    "terminated": terminated,
                    "truncated": truncated,
                    "frames": np.stack(state.frames) if state.frames else None,
                    "frame_steps": np.array(state.frame_steps, dtype=np.int64) if state.frames else None,
                }
            )
        state.chunk += 1
        state.frames = []
        state.frame_steps = []
        if final:
            state.active = False
        else:
            state.offset += last + 1 - first
            state.start = last + 1

    def _write_chunks(self) -> None:
        last = self._count - 1
        for lane in self._lanes:
            if self._state[lane].active:
                self._write_steps(lane, last, final=False)
        self._trim()

    def _trim(self) -> None:
        starts = [self._state[lane].start for lane in self._lanes if self._state[lane].active]
        keep_from = min(starts) if starts else self._count
        drop = keep_from - self._base
        if drop > 0:
            del self._steps[:drop]
            self._base = keep_from
            self._actions.forget_before(keep_from)
            if self._observations is not None:
                self._observations.forget_before(keep_from)

    def _finish_session(self, status: str, reason: str, **totals: int) -> None:
        if self._ended or self._closed:
            return
        self._ended = True
        try:
            last = self._count - 1
            for lane in self._lanes:
                if self._state[lane].active:
                    self._write_steps(lane, last, final=True)
            self._write({"kind": "end", "status": status, "reason": reason, **totals})
        finally:
            self._steps.clear()
            self._file.flush()

    def _write(self, record: dict[str, Any]) -> None:
        if self._closed:
            raise ValueError(
                f"EpisodeRecorder: {self.path!r} is closed; a closed recorder cannot record another "
                "session (create a new EpisodeRecorder)"
            )
        self._file.write(self._packer.pack(record))


def _flag(mask: bytes, lane: int) -> bool:
    return lane < len(mask) and mask[lane] != 0


def _mask_bytes(mask: Any) -> bytes:
    """A done mask as the bytes a ``StepResponse`` carries (one 0/1 byte per lane)."""
    return np.ascontiguousarray(mask, dtype=np.bool_).tobytes()


def _record_from_event(event: EpisodeCompletedEvent) -> EpisodeRecord:
    return EpisodeRecord(
        lane=event.env_index,
        episode_id=event.episode_id,
        seed=None,
        episode_return=event.cumulative_reward,
        length=event.step_count,
        terminated=event.terminated,
        truncated=event.truncated,
        duration_ms=event.duration_ms,
    )


def _storable_kwargs(env_kwargs: Mapping[str, Any] | None) -> tuple[dict[str, Any] | None, str | None]:
    """``(kwargs to store, None)``, or ``(None, why they are not stored)`` when msgpack cannot encode them."""
    if env_kwargs is None:
        return None, None
    if not isinstance(env_kwargs, Mapping) or not all(isinstance(key, str) for key in env_kwargs):
        raise TypeError(
            f"EpisodeRecorder: env_kwargs must be a mapping of str keys or None, got {env_kwargs!r}"
        )
    kwargs = dict(env_kwargs)
    try:
        new_packer().pack(kwargs)
    except (TypeError, ValueError, OverflowError) as exc:
        note = (
            f"env_kwargs {sorted(kwargs)} were not stored (msgpack cannot encode them: {exc}); "
            "replay_episode needs env="
        )
        warnings.warn(f"EpisodeRecorder: {note}", RuntimeWarning, stacklevel=3)
        return None, note
    return kwargs, None


def _header_autoreset(wire: int) -> str:
    """The header's ``autoreset_mode``: the mode's spelling; the contract's word where it has no mode.

    An UNSPECIFIED contract runs as DISABLED, but the header keeps what the contract said
    (``"unspecified"``), and a number this build does not know stays that number.
    """
    if wire == env_pb2.AUTORESET_MODE_UNSPECIFIED:
        return "unspecified"
    try:
        return AutoresetMode.from_wire(wire).value
    except ValueError:
        return str(wire)
