"""Reading a recording back: :func:`load_recording`, :class:`Recording`, :class:`RecordedEpisode`."""

from __future__ import annotations

import html
import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

import numpy as np
from google.protobuf.message import DecodeError

from rlmesh_gym._regular_file import require_regular_file
from rlmesh_gym.proto import env_pb2, spaces_pb2
from rlmesh_gym.recording._format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    MAX_LANES,
    RecordingFormatError,
    frame_problem,
    read_records,
)
from rlmesh_gym.recording._lanes import concat_values, tuples_from_lists
from rlmesh_gym.recording.episode_record import EpisodeRecord
from rlmesh_gym.spaces.limits import check_space_spec
from rlmesh_gym.spaces.meta import from_meta_map

if TYPE_CHECKING:
    import pandas

__all__ = ["RecordedEpisode", "Recording", "RecordingHeader", "RecordingWarning", "load_recording"]

# Observation/action leaves with at most this many elements get one steps_frame column per element.
_MAX_FLAT_COLUMNS = 16
_HTML_ROWS = 20
# The columns of Recording.episode_table; _episode_row fills them.
EPISODE_TABLE_COLUMNS = (
    "#",
    "lane",
    "episode id",
    "seed",
    "return",
    "length",
    "term",
    "trunc",
    "counted",
    "steps",
    "frames",
)
_RECORD_FIELDS = frozenset(EpisodeRecord.__dataclass_fields__)
_SHOWN_LANES = 16
_INT64_MAX = 2**63 - 1


class RecordingWarning(UserWarning):
    """A recording was read only in part (cut off or damaged after some complete records)."""


@dataclass(frozen=True, slots=True)
class RecordingHeader:
    """The first record of a recording: what was recorded, from which env, how."""

    version: int
    writer: str
    created_ns: int
    env_id: str
    contract: env_pb2.EnvContract
    num_envs: int
    autoreset_mode: str
    base_seed: int | None
    options: dict[str, Any]
    # The env's make kwargs (None: none given, or not storable: then env_kwargs_note says why).
    env_kwargs: dict[str, Any] | None = None
    env_kwargs_note: str | None = None

    @property
    def observation_space(self) -> spaces_pb2.SpaceSpec:
        """The per-lane observation ``SpaceSpec``."""
        return self.contract.observation_space

    @property
    def action_space(self) -> spaces_pb2.SpaceSpec:
        """The per-lane action ``SpaceSpec``."""
        return self.contract.action_space

    @property
    def lanes(self) -> tuple[int, ...]:
        """The recorded lanes."""
        lanes = self.options.get("lanes")
        return tuple(range(self.num_envs)) if lanes is None else tuple(lanes)

    def describe_lanes(self) -> str:
        """The recorded lanes in a few words: ``all 8``, ``0, 2, 5`` or the first 16 then ``...``."""
        lanes = self.options.get("lanes")
        if lanes is None:
            return f"all {self.num_envs}"
        shown = ", ".join(map(str, lanes[:_SHOWN_LANES]))
        return shown if len(lanes) <= _SHOWN_LANES else f"{shown}, ... ({len(lanes)} lanes)"

    @property
    def render_fps(self) -> float | None:
        """The env's ``metadata["render_fps"]`` (steps per second of real time), or ``None``."""
        try:
            fps = from_meta_map(self.contract.metadata).get("render_fps")
        except Exception:  # noqa: BLE001 - metadata a newer writer stores differently: no fps
            return None
        if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not 0 < fps < math.inf:
            return None
        return float(fps)


@dataclass(eq=False, slots=True)
class RecordedEpisode:
    """One lane's episode: its recorded steps as numpy arrays and the env's summary.

    ``steps`` holds the episode's own step index of each recorded step (``0, k, 2k, ...`` with a
    step stride ``k``); ``observations`` (``None`` when not recorded), ``actions``, ``rewards``,
    ``terminated`` and ``truncated`` are aligned with it along their first axis. Observations
    and actions are arrays of shape ``(steps, *space_shape)`` for Box, Discrete, MultiBinary and
    MultiDiscrete spaces, a ``str`` array for Text, and a dict / tuple of those for Dict / Tuple.
    ``frames`` (``(F, H, W, 3)`` uint8, or ``None``) were rendered at steps ``frame_steps``.
    ``record`` is the env's summary; it is ``None`` for an episode still running when the
    session ended or failed (then ``complete`` is false). ``counted`` says whether the
    evaluation counted the episode (its ``EvalResult.episodes`` hold exactly the counted ones);
    ``None`` when the writer did not know (a recorder outside ``evaluate``, a version-1 file, an
    incomplete episode).
    """

    lane: int
    episode_id: str
    record: EpisodeRecord | None
    steps: np.ndarray
    observations: Any
    actions: Any
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    frames: np.ndarray | None = None
    frame_steps: np.ndarray | None = None
    counted: bool | None = None
    # From the header: the env's render_fps and the recording's frame stride (for videos and playback).
    render_fps: float | None = None
    frame_stride: int = 1
    # The recording's frame lanes (None: not known), to say why an episode has no frames.
    frame_lanes: tuple[int, ...] | None = None

    @property
    def complete(self) -> bool:
        """Whether the env reported this episode finished (it has a summary)."""
        return self.record is not None

    @property
    def seed(self) -> int | None:
        """The seed the lane was reset with for this episode, or ``None``."""
        return None if self.record is None else self.record.seed

    @property
    def episode_return(self) -> float:
        """The env's return of the episode (the sum of recorded rewards when incomplete)."""
        return float(self.rewards.sum()) if self.record is None else self.record.episode_return

    @property
    def length(self) -> int:
        """The env's step count of the episode (recorded steps when incomplete)."""
        return int(len(self.steps)) if self.record is None else self.record.length

    @property
    def frame_fps(self) -> float | None:
        """Frames per second that play the frames in the env's real time (``render_fps / frame_stride``)."""
        return None if self.render_fps is None else self.render_fps / self.frame_stride

    def play(self, *, fps: float | None = None) -> Any:
        """An interactive player of this episode for Jupyter (see :func:`rlmesh_gym.recording.play`)."""
        from rlmesh_gym.recording._player import play

        return play(self, fps=fps)

    def to_video(self, path: str | os.PathLike[str], *, fps: float | None = None) -> str:
        """Write the recorded frames to an MP4 or GIF file (by ``path``'s extension); return the path.

        ``fps`` defaults to :attr:`frame_fps` (the env's real time), else 30. Needs the ``video``
        extra (imageio). An episode without frames raises ``ValueError`` saying why.
        """
        from rlmesh_gym.recording._video import write_video

        return write_video(self, path, fps=fps)

    def __repr__(self) -> str:
        status = "complete" if self.complete else "incomplete"
        return (
            f"RecordedEpisode(lane={self.lane}, episode_id={self.episode_id!r}, seed={self.seed}, "
            f"return={self.episode_return:g}, length={self.length}, {status}, "
            f"recorded_steps={len(self.steps)}, frames={0 if self.frames is None else len(self.frames)})"
        )

    def _repr_html_(self) -> str:
        rows = [
            ("lane", self.lane),
            ("episode id", self.episode_id),
            ("seed", self.seed),
            ("return", f"{self.episode_return:g}"),
            ("length", self.length),
            (
                "terminated / truncated",
                "" if self.record is None else f"{self.record.terminated} / {self.record.truncated}",
            ),
            ("status", "complete" if self.complete else "incomplete (session ended mid-episode)"),
            ("counted", "unknown" if self.counted is None else self.counted),
            ("recorded steps", len(self.steps)),
            ("observations", _describe(self.observations)),
            ("actions", _describe(self.actions)),
            ("frames", _describe(self.frames)),
        ]
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
            for k, v in rows
        )
        return f"<table><caption>RecordedEpisode</caption>{body}</table>"


@dataclass(eq=False, slots=True)
class Recording:
    """A loaded recording: its header, sessions and episodes.

    ``episodes`` are the complete episodes in the order they finished; ``incomplete_episodes``
    were still running when their session ended or failed (their steps are kept, they have no
    summary). ``partial`` says the file was cut off or damaged and only its first complete
    records were read.
    """

    path: str
    header: RecordingHeader
    episodes: list[RecordedEpisode]
    incomplete_episodes: list[RecordedEpisode]
    sessions: list[dict[str, Any]] = field(default_factory=list)
    ends: list[dict[str, Any]] = field(default_factory=list)
    partial: bool = False

    def __len__(self) -> int:
        return len(self.episodes)

    def episode(self, key: int | str | RecordedEpisode) -> RecordedEpisode:
        """An episode by position in ``episodes``, by episode id (complete or not), or itself."""
        if isinstance(key, RecordedEpisode):
            return key
        if isinstance(key, str):
            for episode in (*self.episodes, *self.incomplete_episodes):
                if episode.episode_id == key:
                    return episode
            raise KeyError(f"no episode with id {key!r} in recording {self.path!r}")
        if isinstance(key, bool) or not isinstance(key, (int, np.integer)):
            raise TypeError(f"episode must be an index, an episode id or a RecordedEpisode, got {key!r}")
        if not -len(self.episodes) <= key < len(self.episodes):
            raise IndexError(
                f"episode index {key} out of range: the recording has "
                f"{len(self.episodes)} complete episode(s)"
            )
        return self.episodes[int(key)]

    def play(
        self,
        *episodes: int | str | RecordedEpisode,
        labels: Sequence[str] | None = None,
        fps: float | None = None,
    ) -> Any:
        """An interactive player of episodes of this recording (default: the first), side by side.

        Each key is an index, an episode id or an episode (see :meth:`episode`). Returns an
        ``EpisodePlayer`` widget; see :func:`rlmesh_gym.recording.play`.
        """
        from rlmesh_gym.recording._player import play

        chosen = [self.episode(key) for key in (episodes or (0,))]
        return play(*chosen, labels=labels, fps=fps)

    def to_html(
        self,
        path: str | os.PathLike[str],
        *,
        episodes: Sequence[int | str] | None = None,
        frames: bool = True,
        title: str | None = None,
    ) -> str:
        """Write one self-contained HTML page (summary table, return histogram, episode player).

        ``episodes`` limits the page to some complete episodes (indices or ids; default all);
        ``frames=False`` leaves the frames out (a much smaller file). Returns the path written.
        """
        from rlmesh_gym.recording._html import write_html

        return write_html(self, path, episodes=episodes, frames=frames, title=title)

    def to_pandas(self, *, include_incomplete: bool = False) -> pandas.DataFrame:
        """One row per episode: summary fields, ``complete``, ``counted``, recorded step and frame counts."""
        pd = _pandas()
        episodes = [*self.episodes, *(self.incomplete_episodes if include_incomplete else ())]
        rows = []
        for episode in episodes:
            if episode.record is not None:
                row = episode.record.to_dict()
            else:
                row = {name: None for name in EpisodeRecord.__dataclass_fields__}
                row.update(lane=episode.lane, episode_id=episode.episode_id)
            row["complete"] = episode.complete
            row["counted"] = episode.counted
            row["recorded_steps"] = len(episode.steps)
            row["frames"] = 0 if episode.frames is None else len(episode.frames)
            rows.append(row)
        columns = [*EpisodeRecord.__dataclass_fields__, "complete", "counted", "recorded_steps", "frames"]
        frame = pd.DataFrame(rows, columns=columns)
        # Nullable: None where the writer did not know (a version-1 file, a recorder outside evaluate).
        frame["counted"] = frame["counted"].astype("boolean")
        return frame

    def steps_frame(self, episode: int | str | RecordedEpisode) -> pandas.DataFrame:
        """One row per recorded step of ``episode``: step, reward, flags, action and observation.

        Small array leaves are spread over one column per element (``obs[0]``, ``obs[1]``, ...,
        ``obs.key[0]`` for Dict spaces); larger leaves (images) stay one array per row.
        """
        pd = _pandas()
        chosen = self.episode(episode)
        columns: dict[str, Any] = {
            "step": chosen.steps,
            "reward": chosen.rewards,
            "terminated": chosen.terminated,
            "truncated": chosen.truncated,
        }
        _flatten_into(columns, "action", chosen.actions, len(chosen.steps))
        _flatten_into(columns, "obs", chosen.observations, len(chosen.steps))
        return pd.DataFrame(columns)

    def summary(self) -> dict[str, Any]:
        """Aggregate statistics of the complete episodes (count, return mean/std/min/max, mean length)."""
        returns = np.array([e.episode_return for e in self.episodes], dtype=np.float64)
        lengths = np.array([e.length for e in self.episodes], dtype=np.float64)
        if len(returns) == 0:
            return {"episodes": 0, "incomplete": len(self.incomplete_episodes)}
        return {
            "episodes": len(self.episodes),
            "incomplete": len(self.incomplete_episodes),
            "return_mean": float(returns.mean()),
            "return_std": float(returns.std()),
            "return_min": float(returns.min()),
            "return_max": float(returns.max()),
            "length_mean": float(lengths.mean()),
        }

    def summary_lines(self) -> list[tuple[str, str]]:
        """The summary to show first, as (label, text) lines: the episodes the evaluation counted
        (its own figures), then every complete episode when some were not counted, then the
        incomplete ones with what that means."""
        from rlmesh_gym.recording._summary_lines import summary_lines  # it reads Recording

        return summary_lines(self)

    def __repr__(self) -> str:
        return (
            f"Recording({self.path!r}, env_id={self.header.env_id!r}, num_envs={self.header.num_envs}, "
            f"autoreset={self.header.autoreset_mode}, episodes={len(self.episodes)}, "
            f"incomplete={len(self.incomplete_episodes)}{', partial' if self.partial else ''})"
        )

    def episode_table(self, limit: int | None = None) -> list[tuple[str, ...]]:
        """The episode table ``rlmesh-gym episodes`` prints and the notebook view shows: the column
        names, then one row of text cells for each of the first ``limit`` episodes (all by default)."""
        shown = self.episodes if limit is None else self.episodes[:limit]
        return [EPISODE_TABLE_COLUMNS, *(episode_row(index, episode) for index, episode in enumerate(shown))]

    def _repr_html_(self) -> str:
        header = self.header
        facts = [
            ("file", self.path + (" (partial: cut off or damaged)" if self.partial else "")),
            *self.summary_lines(),  # the evaluation's figures first
            ("env", header.env_id or "(no id)"),
            ("lanes", f"{header.num_envs} (recorded: {header.describe_lanes()})"),
            ("autoreset", header.autoreset_mode),
            ("base seed", header.base_seed),
        ]
        facts_html = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
            for k, v in facts
        )
        table = self.episode_table(_HTML_ROWS)
        head = "".join(f"<th>{html.escape(name)}</th>" for name in table[0])
        rows = [
            "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in table[1:]
        ]
        more = len(self.episodes) - _HTML_ROWS
        tail = f"<p>... {more} more episode(s)</p>" if more > 0 else ""
        return (
            f"<div><table><caption>Recording</caption>{facts_html}</table>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>{tail}</div>"
        )


def _yes_no(flag: bool | None) -> str:
    return "-" if flag is None else ("yes" if flag else "no")


def episode_row(index: int, episode: RecordedEpisode, *, frames: bool = True) -> tuple[str, ...]:
    """The cells of ``episode`` (the ``index``-th) under :data:`EPISODE_TABLE_COLUMNS`
    (``frames=False``: a view that leaves the frames out counts 0 of them)."""
    record = episode.record
    return (
        str(index),
        str(episode.lane),
        episode.episode_id,
        "-" if episode.seed is None else str(episode.seed),
        f"{episode.episode_return:g}",
        str(episode.length),
        _yes_no(None if record is None else record.terminated),
        _yes_no(None if record is None else record.truncated),
        _yes_no(episode.counted),
        str(len(episode.steps)),
        str(0 if episode.frames is None or not frames else len(episode.frames)),
    )


def load_recording(path: str | os.PathLike[str]) -> Recording:
    """Read a recording written by :class:`EpisodeRecorder`.

    A file cut off mid-record (a crash while writing) or damaged after its header is read up to
    its last complete record, with a :class:`RecordingWarning` saying where reading stopped.

    Raises:
        FileNotFoundError: ``path`` does not exist or is a directory.
        ValueError: ``path`` is a FIFO, socket or device (never opened: reading it could block).
        RecordingFormatError: the file is not a recording, or was written in a newer format
            version than this rlmesh-gym reads.

    Example:
        >>> from rlmesh_gym import evaluate
        >>> _ = evaluate("CartPole-v1", "random", episodes=2, num_envs=1, seed=0, autoreset="disabled",
        ...              progress=False, record="run.rec")
        >>> recording = load_recording("run.rec")
        >>> recording.to_pandas()[["lane", "seed", "episode_return"]]
           lane                 seed  episode_return
        0     0  9116764537325399125            18.0
        1     0  3862005244114359458            27.0
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"load_recording: path must be a str or os.PathLike, got {path!r}")
    filename = os.fspath(path)
    require_regular_file(filename, "load_recording", "a recording written by EpisodeRecorder")
    size = os.path.getsize(filename)
    with open(filename, "rb") as stream:
        records, _, problem = read_records(stream, size)
    if not records:
        reason = "the file is empty" if size == 0 else (problem or "it holds no records")
        raise RecordingFormatError(f"{filename!r} is not an rlmesh-gym recording: {reason}")
    header = _parse_header(records[0], filename)
    body, malformed = _valid_prefix(records[1:], header)
    if malformed is not None:
        problem = malformed
    if problem is not None:
        warnings.warn(
            f"recording {filename!r} was read only in part: {problem}; the {len(body) + 1} complete "
            "record(s) before that point are loaded",
            RecordingWarning,
            stacklevel=2,
        )
    return _assemble(filename, header, body, partial=problem is not None)


def _parse_header(record: dict[str, Any], filename: str) -> RecordingHeader:
    if record.get("kind") != "header" or record.get("format") != FORMAT_NAME:
        raise RecordingFormatError(
            f"{filename!r} is not an rlmesh-gym recording: its first record is not a {FORMAT_NAME} header"
        )
    version = record.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise RecordingFormatError(f"{filename!r} has an invalid recording format version {version!r}")
    if version > FORMAT_VERSION:
        writer = record.get("writer", "an unknown writer")
        raise RecordingFormatError(
            f"{filename!r} uses recording format version {version}, newer than the version "
            f"{FORMAT_VERSION} this rlmesh-gym reads (written by {writer}); "
            "upgrade rlmesh-gym"
        )
    try:
        return _header_fields(record, version)
    except (KeyError, TypeError, ValueError, OverflowError, DecodeError) as exc:
        raise RecordingFormatError(
            f"{filename!r} has a malformed recording header: {type(exc).__name__}: {exc}"
        ) from exc


def _header_fields(record: dict[str, Any], version: int) -> RecordingHeader:
    """The header's fields, each checked for its type and its bounds (never trusted for a size)."""
    num_envs = record["num_envs"]
    if not _is_int(num_envs) or not 1 <= num_envs <= MAX_LANES:
        raise ValueError(f"num_envs must be an int in [1, {MAX_LANES}], got {num_envs!r}")
    created_ns = record.get("created_ns", 0)
    if not _is_int(created_ns) or not 0 <= created_ns <= _INT64_MAX:
        raise ValueError(f"created_ns must be an int in [0, 2**63 - 1] (ns since 1970), got {created_ns!r}")
    options = record.get("options") or {}
    if not isinstance(options, dict):
        raise TypeError(f"options must be a map, got {type(options).__name__}")
    for name in ("lanes", "frame_lanes"):
        _check_lane_list(options.get(name), name, num_envs)
    base_seed = record.get("base_seed")
    if base_seed is not None and (not _is_int(base_seed) or not -(2**63) <= base_seed < 2**64):
        raise ValueError(f"base_seed must be a 64-bit int or nil, got {base_seed!r}")
    env_kwargs = record.get("env_kwargs")
    if env_kwargs is not None and not (
        isinstance(env_kwargs, dict) and all(isinstance(key, str) for key in env_kwargs)
    ):
        raise TypeError(f"env_kwargs must be a map of str keys or nil, got {env_kwargs!r}")
    note = record.get("env_kwargs_note")
    if note is not None and not isinstance(note, str):
        raise TypeError(f"env_kwargs_note must be a string or nil, got {note!r}")
    for name in ("env_id", "autoreset_mode"):
        if not isinstance(record[name], str):
            raise TypeError(f"{name} must be a string, got {record[name]!r}")
    writer = record.get("writer", "")
    if not isinstance(writer, str):
        raise TypeError(f"writer must be a string, got {writer!r}")
    contract = record["contract"]
    if not isinstance(contract, bytes):
        raise TypeError(f"contract must be EnvContract bytes, got {type(contract).__name__}")
    contract = env_pb2.EnvContract.FromString(contract)
    if contract.num_envs != num_envs:
        raise ValueError(f"num_envs {num_envs} disagrees with its contract's num_envs {contract.num_envs}")
    check_space_spec(contract.observation_space, name="contract.observation_space")
    check_space_spec(contract.action_space, name="contract.action_space")
    return RecordingHeader(
        version=version,
        writer=writer,
        created_ns=created_ns,
        env_id=record["env_id"],
        contract=contract,
        num_envs=num_envs,
        autoreset_mode=record["autoreset_mode"],
        base_seed=base_seed,
        options=dict(options),
        env_kwargs=env_kwargs,
        env_kwargs_note=note,
    )


def _check_lane_list(lanes: Any, name: str, num_envs: int) -> None:
    """``options[name]``: nil or a list of distinct lane indices in ``[0, num_envs)``."""
    if lanes is None:
        return
    if not isinstance(lanes, list) or not all(_is_int(lane) and 0 <= lane < num_envs for lane in lanes):
        raise ValueError(
            f"options[{name!r}] must be nil or a list of lane indices in [0, {num_envs}), got {lanes!r:.200}"
        )
    if len(set(lanes)) != len(lanes):
        raise ValueError(f"options[{name!r}] lists a lane twice: {lanes!r:.200}")


class _MalformedRecord(Exception):
    """A record that parsed as msgpack but does not hold what its kind promises."""


def _valid_prefix(
    records: list[dict[str, Any]], header: RecordingHeader
) -> tuple[list[dict[str, Any]], str | None]:
    """The records before the first malformed one, and a sentence about that one (or ``None``).

    Damaged bytes can still parse as msgpack; such a record ends reading like a cut-off file.
    """
    shapes: dict[str, tuple[Any, ...]] = {}
    for index, record in enumerate(records):
        try:
            kind = record["kind"]
            if kind == "steps":
                _check_steps(record, header.num_envs, shapes)
            elif kind == "episode":
                _check_episode(record, header.num_envs)
            elif kind == "session":
                _check_strings(record, ("session_id", "route_id"))
            elif kind == "end":
                _check_strings(record, ("status", "reason"))
                if ("total_steps" in record or "total_episodes" in record) and not (
                    _is_int(record.get("total_steps")) and _is_int(record.get("total_episodes"))
                ):
                    raise _MalformedRecord("total_steps and total_episodes must both be ints")
        except _MalformedRecord as exc:
            return records[:index], f"record {index + 1} (kind {record['kind']!r}) is malformed: {exc}"
    return records, None


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _what(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} array of shape {value.shape}"
    return "nil" if value is None else f"a {type(value).__name__}"


def _check_strings(record: dict[str, Any], names: tuple[str, ...]) -> None:
    for name in names:
        if not isinstance(record.get(name), str):
            raise _MalformedRecord(f"{name} must be a string, got {record.get(name)!r}")


def _check_lane(record: dict[str, Any], num_envs: int) -> None:
    _check_strings(record, ("episode_id",))
    lane = record.get("lane")
    if not _is_int(lane) or not 0 <= lane < num_envs:
        raise _MalformedRecord(f"lane must be an int in [0, {num_envs}), got {lane!r}")


def _array(record: dict[str, Any], name: str, kinds: str, length: int | None) -> np.ndarray:
    value = record.get(name)
    if not isinstance(value, np.ndarray) or value.ndim != 1 or value.dtype.kind not in kinds:
        raise _MalformedRecord(f"{name} must be a 1-d numpy array of kind {kinds!r}, got {_what(value)}")
    if length is not None and len(value) != length:
        raise _MalformedRecord(f"{name} has {len(value)} rows, expected {length}")
    return value


def _tree_shape(value: Any, rows: int, name: str) -> Any:
    """The structure, leaf kinds and per-row shapes of a stored value tree (checked to have ``rows`` rows)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return tuple((key, _tree_shape(child, rows, name)) for key, child in value.items())
    if isinstance(value, list):
        return [_tree_shape(child, rows, name) for child in value]
    if not isinstance(value, np.ndarray) or value.ndim < 1 or len(value) != rows:
        raise _MalformedRecord(f"{name} must hold numpy arrays of {rows} rows, got {_what(value)}")
    return (value.dtype.kind, value.shape[1:])


def _check_steps(record: dict[str, Any], num_envs: int, shapes: dict[str, tuple[Any, ...]]) -> None:
    _check_lane(record, num_envs)
    chunk = record.get("chunk")
    if not _is_int(chunk) or chunk < 0:
        raise _MalformedRecord(f"chunk must be an int >= 0, got {chunk!r}")
    missing = [name for name in ("observations", "actions") if name not in record]
    if missing:
        raise _MalformedRecord(f"it has no {' or '.join(missing)} field")
    rows = len(_array(record, "steps", "iu", None))
    _array(record, "rewards", "fiu", rows)
    _array(record, "terminated", "b", rows)
    _array(record, "truncated", "b", rows)
    frames = record.get("frames")
    frame_steps = record.get("frame_steps")
    if frames is None or frame_steps is None:
        if frames is not None or frame_steps is not None:
            raise _MalformedRecord("frames and frame_steps must both be present or both nil")
        frame_shape = None
    else:
        problem = frame_problem(frames, leading=1)
        if problem is not None:  # the player and videos could not show them
            raise _MalformedRecord(
                f"frames must be a uint8 (F, H, W, C) array with H, W >= 1 and C of 1, 3 or 4 channels "
                f"(grey, RGB, RGBA), got {problem}"
            )
        _array(record, "frame_steps", "iu", len(frames))
        frame_shape = frames.shape[1:]
    # Chunks of one episode are joined: their observations, actions and frames must agree.
    shape = (
        _tree_shape(record.get("observations"), rows, "observations"),
        _tree_shape(record.get("actions"), rows, "actions"),
        frame_shape,
    )
    before = shapes.setdefault(record["episode_id"], shape)
    if any(
        old is not None and new is not None and old != new for old, new in zip(before, shape, strict=True)
    ):
        raise _MalformedRecord(
            "its observations, actions or frames do not match the episode's earlier chunks"
        )


_SUMMARY_TYPES: dict[str, tuple[type, ...]] = {
    "lane": (int,),
    "episode_id": (str,),
    "seed": (int, type(None)),
    "episode_return": (int, float),
    "length": (int,),
    "terminated": (bool,),
    "truncated": (bool,),
    "duration_ms": (int, float),
    "success": (bool, type(None)),
    "start_timestamp_ns": (int,),
    "end_timestamp_ns": (int,),
    "server": (str, type(None)),
    "server_lane": (int, type(None)),
    "shard": (int, type(None)),
}
_OPTIONAL_SUMMARY_FIELDS = frozenset(
    {"success", "start_timestamp_ns", "end_timestamp_ns", "server", "server_lane", "shard"}
)


def _check_episode(record: dict[str, Any], num_envs: int) -> None:
    _check_lane(record, num_envs)
    counted = record.get("counted")  # absent before format version 2
    if counted is not None and type(counted) is not bool:  # 1.0 == True: compare the type
        raise _MalformedRecord(f"counted must be a bool or nil, got {counted!r}")
    summary = record.get("record")
    if not isinstance(summary, dict):
        raise _MalformedRecord(f"record must be a map of EpisodeRecord fields, got {_what(summary)}")
    for name, types in _SUMMARY_TYPES.items():
        if name not in summary:
            if name in _OPTIONAL_SUMMARY_FIELDS:
                continue
            raise _MalformedRecord(f"its summary has no {name!r}")
        value = summary[name]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise _MalformedRecord(
                f"summary field {name!r} is {value!r}, expected {' or '.join(t.__name__ for t in types)}"
            )


def _assemble(
    filename: str, header: RecordingHeader, records: list[dict[str, Any]], *, partial: bool
) -> Recording:
    chunks: dict[str, list[dict[str, Any]]] = {}
    lanes: dict[str, int] = {}
    summaries: dict[str, EpisodeRecord] = {}
    counted: dict[str, bool | None] = {}
    finished: list[str] = []
    sessions: list[dict[str, Any]] = []
    ends: list[dict[str, Any]] = []
    for record in records:
        kind = record["kind"]
        if kind == "steps":
            chunks.setdefault(record["episode_id"], []).append(record)
            lanes.setdefault(record["episode_id"], int(record["lane"]))
        elif kind == "episode":
            episode_id = record["episode_id"]
            if episode_id not in summaries:
                finished.append(episode_id)
            # A newer writer may add summary fields: keep the ones this EpisodeRecord has.
            fields = {k: v for k, v in record["record"].items() if k in _RECORD_FIELDS}
            summaries[episode_id] = EpisodeRecord(**fields)
            counted[episode_id] = record.get("counted")
            lanes.setdefault(episode_id, int(record["lane"]))
        elif kind == "session":
            sessions.append(record)
        elif kind == "end":
            ends.append(record)
        # Other kinds come from newer writers of the same format version: skipped.
    episodes = [
        _episode(eid, lanes[eid], summaries[eid], chunks.get(eid, []), counted[eid]) for eid in finished
    ]
    incomplete = [
        _episode(eid, lanes[eid], None, parts) for eid, parts in chunks.items() if eid not in summaries
    ]
    render_fps = header.render_fps
    frame_stride = header.options.get("frame_stride")
    frame_lanes = header.options.get("frame_lanes")
    known_lanes = (
        tuple(frame_lanes)
        if isinstance(frame_lanes, list) and all(_is_int(lane) for lane in frame_lanes)
        else None
    )
    for episode in (*episodes, *incomplete):
        episode.render_fps = render_fps
        if _is_int(frame_stride) and frame_stride >= 1:
            episode.frame_stride = frame_stride
        episode.frame_lanes = known_lanes
    return Recording(filename, header, episodes, incomplete, sessions, ends, partial)


def _episode(
    episode_id: str,
    lane: int,
    record: EpisodeRecord | None,
    parts: list[dict[str, Any]],
    counted: bool | None = None,
) -> RecordedEpisode:
    parts = sorted(parts, key=lambda part: part["chunk"])
    with_steps = [part for part in parts if part["actions"] is not None]
    with_frames = [part for part in parts if part.get("frames") is not None]

    def joined(name: str, dtype: str) -> np.ndarray:
        if not with_steps:
            return np.zeros(0, dtype=dtype)
        return np.concatenate([part[name] for part in with_steps])

    observations = concat_values([tuples_from_lists(part["observations"]) for part in with_steps])
    actions = concat_values([tuples_from_lists(part["actions"]) for part in with_steps])
    return RecordedEpisode(
        lane=lane,
        episode_id=episode_id,
        record=record,
        steps=joined("steps", "int64"),
        observations=observations,
        actions=actions,
        rewards=joined("rewards", "float64"),
        terminated=joined("terminated", "bool"),
        truncated=joined("truncated", "bool"),
        frames=np.concatenate([part["frames"] for part in with_frames]) if with_frames else None,
        frame_steps=np.concatenate([part["frame_steps"] for part in with_frames]) if with_frames else None,
        counted=counted,
    )


def _flatten_into(columns: dict[str, Any], name: str, value: Any, rows: int) -> None:
    if value is None:
        return
    if isinstance(value, dict):
        for key, child in value.items():
            _flatten_into(columns, f"{name}.{key}", child, rows)
        return
    if isinstance(value, tuple):
        for index, child in enumerate(value):
            _flatten_into(columns, f"{name}.{index}", child, rows)
        return
    array = np.asarray(value)
    if array.ndim == 1:
        columns[name] = array
        return
    numel = math.prod(array.shape[1:])
    if numel > _MAX_FLAT_COLUMNS:
        columns[name] = list(array)
        return
    flat = array.reshape(rows, numel)
    for flat_index, position in enumerate(np.ndindex(*array.shape[1:])):
        columns[f"{name}[{','.join(map(str, position))}]"] = flat[:, flat_index]


def _describe(value: Any) -> str:
    if value is None:
        return "not recorded"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_describe(v)}" for k, v in value.items()) + "}"
    if isinstance(value, tuple):
        return "(" + ", ".join(_describe(v) for v in value) + ")"
    array = np.asarray(value)
    return f"{array.dtype} {tuple(array.shape)}"


def _pandas() -> Any:
    try:
        import pandas
    except ImportError as exc:  # pragma: no cover - pandas ships with the notebook extra
        raise ImportError(
            "Recording.to_pandas/steps_frame need pandas: pip install 'rlmesh-gym[notebook]'"
        ) from exc
    return pandas
