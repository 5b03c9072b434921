"""What a recording holds: :class:`RecordingOptions`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["RecordingOptions"]


def _lane_tuple(name: str, value: Any) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"RecordingOptions.{name} must be a sequence of lane indices, got {value!r}")
    lanes = []
    for lane in value:
        if isinstance(lane, bool) or not isinstance(lane, int) or lane < 0:
            raise ValueError(f"RecordingOptions.{name} must hold non-negative int lane indices, got {lane!r}")
        if lane in lanes:
            raise ValueError(f"RecordingOptions.{name} lists lane {lane} twice")
        lanes.append(lane)
    return tuple(sorted(lanes))


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"RecordingOptions.{name} must be an int >= 1, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class RecordingOptions:
    """Where to write a recording and what to put in it.

    Args:
        path: the file to write (created or overwritten).
        lanes: the lanes whose episodes are recorded (sorted on construction); ``None``
            records every lane.
        step_stride: record every ``step_stride``-th step of an episode (steps ``0, k, 2k, ...``
            counted from the episode's first step). Episode summaries are always complete.
        observations: record the observation of each recorded step (off: actions, rewards and
            flags only, which keeps files small for image observations).
        frame_lanes: lanes whose rendered frames are recorded; each must also be a recorded
            lane, and the env must render ``rgb_array`` frames.
        frame_stride: record a frame every ``frame_stride``-th step of an episode.

    Example:
        >>> RecordingOptions("run.rec", lanes=[2, 0], frame_lanes=[0]).lanes
        (0, 2)
    """

    path: str | os.PathLike[str]
    lanes: Sequence[int] | None = None
    step_stride: int = 1
    observations: bool = True
    frame_lanes: Sequence[int] = ()
    frame_stride: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.path, (str, os.PathLike)) or not os.fspath(self.path):
            raise TypeError(
                f"RecordingOptions.path must be a non-empty str or os.PathLike, got {self.path!r}"
            )
        if self.lanes is not None:
            lanes = _lane_tuple("lanes", self.lanes)
            if not lanes:
                raise ValueError("RecordingOptions.lanes is empty: pass None to record every lane")
            object.__setattr__(self, "lanes", lanes)
        object.__setattr__(self, "step_stride", _positive_int("step_stride", self.step_stride))
        if not isinstance(self.observations, bool):
            raise TypeError(f"RecordingOptions.observations must be a bool, got {self.observations!r}")
        frame_lanes = _lane_tuple("frame_lanes", self.frame_lanes)
        if self.lanes is not None:
            missing = [lane for lane in frame_lanes if lane not in self.lanes]
            if missing:
                raise ValueError(
                    f"RecordingOptions.frame_lanes {missing} are not recorded lanes {list(self.lanes)}: "
                    "frames are stored with their episode, so a frame lane must also be in lanes"
                )
        object.__setattr__(self, "frame_lanes", frame_lanes)
        object.__setattr__(self, "frame_stride", _positive_int("frame_stride", self.frame_stride))

    def to_dict(self) -> dict[str, Any]:
        """The options as stored in a recording's header (``path`` excluded)."""
        return {
            "lanes": None if self.lanes is None else list(self.lanes),
            "step_stride": self.step_stride,
            "observations": self.observations,
            "frame_lanes": list(self.frame_lanes),
            "frame_stride": self.frame_stride,
        }
