"""One finished episode as users see it: the row shared by evaluation results and recordings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from rlmesh_gym.proto import env_pb2, spaces_pb2
from rlmesh_gym.runtime.message_form import completed_episode
from rlmesh_gym.runtime.seams import CompletedEpisode
from rlmesh_gym.spaces.meta import from_meta_map, to_meta_map

__all__ = ["EpisodeRecord"]


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    """A completed episode of one lane.

    ``seed`` is the seed the lane was reset with, or ``None`` when it was not seeded (an
    unseeded reset, or a gymnasium autoreset). ``success`` is ``info["is_success"]`` of the
    episode's last step when the env reports it, else ``None``.

    In a fleet evaluation (several env servers) ``lane`` is the fleet-wide lane number,
    ``server`` the ``HOST:PORT`` of the server that ran the episode and ``server_lane`` the
    lane's number on that server; both are ``None`` everywhere else. In an evaluation on a Ray
    cluster (``evaluate_on_ray``) ``lane`` is the global lane number and ``shard`` the index of
    the Ray task that ran it; ``None`` everywhere else.
    """

    lane: int
    episode_id: str
    seed: int | None
    episode_return: float
    length: int
    terminated: bool
    truncated: bool
    duration_ms: int
    success: bool | None = None
    start_timestamp_ns: int = 0
    end_timestamp_ns: int = 0
    server: str | None = None
    server_lane: int | None = None
    shard: int | None = None

    @classmethod
    def from_metadata(cls, metadata: env_pb2.EpisodeMetadata) -> EpisodeRecord:
        """The record of an env's ``EpisodeMetadata`` (as in ``StepResponse.completed_episodes``)."""
        return cls.from_episode(completed_episode(metadata))

    @classmethod
    def from_episode(cls, episode: CompletedEpisode) -> EpisodeRecord:
        """The record of a finished episode in array form (``EpisodeCompletedEvent.episode``)."""
        if cls is not EpisodeRecord:  # a subclass may add fields: built through its __init__
            return cls(**asdict(EpisodeRecord.from_episode(episode)))
        # Once per finished episode of an evaluation: the slots' own setters make the same
        # object as __init__ (whose frozen assignments go through object.__setattr__) in half
        # the time.
        record = _new_object(EpisodeRecord)
        _set_lane(record, episode.env_index)
        _set_episode_id(record, episode.episode_id)
        _set_seed(record, episode.seed)
        _set_episode_return(record, episode.cumulative_reward)
        _set_length(record, episode.step_count)
        _set_terminated(record, episode.terminated)
        _set_truncated(record, episode.truncated)
        _set_duration_ms(record, episode.duration_ms)
        _set_success(record, _success(episode.final_info))
        _set_start_timestamp_ns(record, episode.start_timestamp_ns)
        _set_end_timestamp_ns(record, episode.end_timestamp_ns)
        _set_server(record, None)
        _set_server_lane(record, None)
        _set_shard(record, None)
        return record

    def to_dict(self) -> dict[str, Any]:
        """The record as a JSON-ready dict (``server``/``server_lane`` only for fleet episodes,
        ``shard`` only for episodes of a Ray evaluation)."""
        values = asdict(self)
        if self.server is None and self.server_lane is None:
            # Results and recordings of one env look exactly as before fleets existed.
            del values["server"], values["server_lane"]
        if self.shard is None:
            del values["shard"]
        return values


_new_object = object.__new__
(
    _set_lane,
    _set_episode_id,
    _set_seed,
    _set_episode_return,
    _set_length,
    _set_terminated,
    _set_truncated,
    _set_duration_ms,
    _set_success,
    _set_start_timestamp_ns,
    _set_end_timestamp_ns,
    _set_server,
    _set_server_lane,
    _set_shard,
) = (getattr(EpisodeRecord, field.name).__set__ for field in fields(EpisodeRecord))


def _success(final_info: Mapping[str, Any] | spaces_pb2.MetaMap | None) -> bool | None:
    """``final_info["is_success"]`` as it reads after the wire (``None`` when absent)."""
    if final_info is None or (type(final_info) is dict and "is_success" not in final_info):
        return None  # the common case, checked first: an env's info dict without the key
    if isinstance(final_info, spaces_pb2.MetaMap):
        if "is_success" not in final_info.entries:
            return None
    elif "is_success" in final_info:
        # Only this key crosses, so in-process and served envs read the same value.
        final_info = to_meta_map({"is_success": final_info["is_success"]}, name="final_info")
    else:
        return None
    value = from_meta_map(final_info).get("is_success")
    return None if value is None else bool(value)
