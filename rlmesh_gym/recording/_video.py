"""A recorded episode's frames as a video file: :func:`write_video` (MP4 or GIF, through imageio)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from rlmesh_gym.recording._player_data import DEFAULT_FPS
from rlmesh_gym.recording._reader import RecordedEpisode

__all__ = ["write_video"]

_INSTALL_HINT = "pip install 'rlmesh-gym[video]'"


def _imageio() -> Any:
    try:
        import imageio.v3 as iio
    except ImportError as exc:
        raise ImportError(f"episode.to_video needs imageio: {_INSTALL_HINT}") from exc
    return iio


def _even(frames: np.ndarray) -> np.ndarray:
    """Frames padded (edge pixels repeated) to even height and width, which H.264 in yuv420p needs."""
    height, width = frames.shape[1:3]
    pad_h, pad_w = height % 2, width % 2
    if not pad_h and not pad_w:
        return frames
    return np.pad(frames, ((0, 0), (0, pad_h), (0, pad_w), (0, 0)), mode="edge")


def write_video(episode: RecordedEpisode, path: str | os.PathLike[str], *, fps: float | None = None) -> str:
    """Write ``episode``'s frames to ``path`` (``.mp4`` or ``.gif``); return the path written.

    ``fps`` defaults to the env's ``render_fps`` divided by the recording's ``frame_stride`` (so
    the video plays in the env's real time), or 30 when the env did not say.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"to_video: path must be a str or os.PathLike, got {path!r}")
    filename = os.fspath(path)
    extension = os.path.splitext(filename)[1].lower()
    if extension not in (".mp4", ".gif"):
        raise ValueError(f"to_video writes .mp4 or .gif files, got {filename!r}")
    if episode.frames is None or not len(episode.frames):
        raise ValueError(
            f"episode {episode.episode_id!r} (lane {episode.lane}) has no recorded frames, so there is no "
            "video to write; record with RecordingOptions(frame_lanes=[...]) including this lane"
        )
    if fps is None:
        fps = episode.frame_fps if episode.frame_fps is not None else DEFAULT_FPS
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not fps > 0:
        raise ValueError(f"fps must be a number > 0, got {fps!r}")
    iio = _imageio()
    frames = np.ascontiguousarray(episode.frames, dtype=np.uint8)
    if extension == ".mp4":
        try:
            import imageio_ffmpeg  # noqa: F401 - only to say what is missing
        except ImportError as exc:
            raise ImportError(f"episode.to_video writes MP4 through imageio-ffmpeg: {_INSTALL_HINT}") from exc
        iio.imwrite(
            filename, _even(frames), plugin="FFMPEG", fps=float(fps), codec="libx264", macro_block_size=1
        )
    else:
        # GIF frame durations are in milliseconds (whole hundredths of a second in the file).
        iio.imwrite(filename, frames, plugin="pillow", duration=1000.0 / float(fps), loop=0)
    return filename
