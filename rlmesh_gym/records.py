"""One finished episode as users see it: the row shared by evaluation results and recordings."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from rlmesh_gym.proto import env_pb2
from rlmesh_gym.spaces.meta import from_meta_map

__all__ = ["EpisodeRecord"]


@dataclass(frozen=True, slots=True)
class EpisodeRecord:
    """A completed episode of one lane.

    ``seed`` is the seed the lane was reset with, or ``None`` when it was not seeded (an
    unseeded reset, or a gymnasium autoreset). ``success`` is ``info["is_success"]`` of the
    episode's last step when the env reports it, else ``None``.
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

    @classmethod
    def from_metadata(cls, metadata: env_pb2.EpisodeMetadata) -> EpisodeRecord:
        """The record of an env's ``EpisodeMetadata`` (as in ``StepResponse.completed_episodes``)."""
        success = None
        if metadata.HasField("final_info") and "is_success" in metadata.final_info.entries:
            value = from_meta_map(metadata.final_info).get("is_success")
            success = None if value is None else bool(value)
        return cls(
            lane=metadata.env_index,
            episode_id=metadata.episode_id,
            seed=metadata.seed if metadata.HasField("seed") else None,
            episode_return=metadata.cumulative_reward,
            length=metadata.step_count,
            terminated=metadata.terminated,
            truncated=metadata.truncated,
            duration_ms=metadata.duration_ms,
            success=success,
            start_timestamp_ns=metadata.start_timestamp_ns,
            end_timestamp_ns=metadata.end_timestamp_ns,
        )

    def to_dict(self) -> dict[str, Any]:
        """The record as a JSON-ready dict."""
        return asdict(self)
