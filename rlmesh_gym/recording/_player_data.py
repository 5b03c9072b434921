"""What the episode player shows, as JSON-ready data built once per episode.

The player (``player_assets/player.js``) renders every step in the browser from this data, so
moving the slider or playing never goes back to Python. Frames become JPEG data URLs (several
times faster to encode than PNG for the same picture); image observations become PNG data URLs
(exactly what the policy saw); numeric leaves become flat lists of numbers (non-finite values
as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``, which JSON cannot hold as numbers).
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlmesh_gym.recording._reader import RecordedEpisode

__all__ = [
    "DEFAULT_FPS",
    "check_episodes",
    "episode_payload",
    "episode_title",
    "frame_data_url",
    "no_frames_reason",
    "leaf_value",
    "png_data_url",
    "step_values",
]

# Steps (or frames) per second when the env does not give its render_fps.
DEFAULT_FPS = 30.0
# Numeric leaves with more values than this show only their first ones in a player panel.
_SHOWN_VALUES = 64
# A uint8 leaf of shape (H, W), (H, W, 1), (H, W, 3) or (H, W, 4), H and W at least this, is an image.
_MIN_IMAGE_SIDE = 8
# Frames are for looking at; at 90 compression artefacts are hard to see on rendered scenes.
_JPEG_QUALITY = 90


def png_data_url(image: np.ndarray) -> str:
    """A ``data:image/png;base64,...`` URL of an ``(H, W)``, ``(H, W, 3)`` or ``(H, W, 4)`` uint8 image."""
    pil = _pillow()
    array = np.ascontiguousarray(image)
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    if array.dtype != np.uint8 or not (array.ndim == 2 or (array.ndim == 3 and array.shape[2] in (3, 4))):
        raise ValueError(
            f"cannot show an image of dtype {array.dtype} and shape {array.shape}: expected uint8 "
            "(H, W), (H, W, 1), (H, W, 3) or (H, W, 4)"
        )
    buffer = io.BytesIO()
    pil.fromarray(array).save(buffer, format="PNG", compress_level=6)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def frame_data_url(frame: np.ndarray) -> str:
    """A data URL of a rendered frame: JPEG for RGB frames, PNG for grey or RGBA ones."""
    array = np.asarray(frame)
    if array.ndim != 3 or array.shape[2] != 3:
        return png_data_url(array)
    buffer = io.BytesIO()
    _pillow().fromarray(np.ascontiguousarray(array)).save(buffer, format="JPEG", quality=_JPEG_QUALITY)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _numbers(array: np.ndarray) -> list[Any]:
    """A flat list of JSON numbers (bools as 0/1; non-finite floats as strings)."""
    flat = np.asarray(array).reshape(-1)
    if flat.dtype.kind == "b":
        return flat.astype(np.int8).tolist()
    if flat.dtype.kind in "iu":
        return flat.tolist()
    if flat.dtype.kind == "c":
        return [str(value) for value in flat.tolist()]
    values = flat.astype(np.float64)
    if bool(np.isfinite(values).all()):
        return values.tolist()
    return [
        v if math.isfinite(v) else ("NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity"))
        for v in values.tolist()
    ]


def _is_image(array: np.ndarray) -> bool:
    shape = array.shape[1:]
    return (
        array.dtype == np.uint8
        and len(shape) in (2, 3)
        and (len(shape) == 2 or shape[2] in (1, 3, 4))
        and min(shape[:2]) >= _MIN_IMAGE_SIDE
    )


def _leaves(value: Any, name: str = "") -> list[tuple[str, np.ndarray]]:
    """The named array leaves of a stored value tree (Dict keys as ``.key``, Tuple items as ``[i]``)."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [
            leaf for key, child in value.items() for leaf in _leaves(child, f"{name}.{key}" if name else key)
        ]
    if isinstance(value, tuple):
        return [leaf for i, child in enumerate(value) for leaf in _leaves(child, f"{name}[{i}]")]
    return [(name, np.asarray(value))]


def _leaf_payload(name: str, array: np.ndarray) -> dict[str, Any]:
    rows = len(array)
    if array.dtype.kind in "US":
        return {
            "name": name,
            "kind": "text",
            "width": 1,
            "data": [str(v) for v in array.reshape(rows).tolist()],
        }
    if _is_image(array):
        return {
            "name": name,
            "kind": "image",
            "shape": list(array.shape[1:]),
            "data": [png_data_url(a) for a in array],
        }
    width = math.prod(array.shape[1:])
    return {
        "name": name,
        "kind": "values",
        "shape": list(array.shape[1:]),
        "width": width,
        "shown": _SHOWN_VALUES,
        "data": _numbers(array),
    }


def _group(value: Any) -> list[dict[str, Any]] | None:
    leaves = _leaves(value)
    return None if value is None else [_leaf_payload(name, array) for name, array in leaves]


def episode_title(episode: RecordedEpisode, label: str | None) -> str:
    """The heading of an episode's panel: the label, lane, seed, return and length."""
    parts = [] if label is None else [label]
    parts.append(f"lane {episode.lane}")
    if episode.seed is not None:
        parts.append(f"seed {episode.seed}")
    parts.append(f"return {episode.episode_return:g}")
    parts.append(f"{episode.length} steps" + ("" if episode.complete else " (incomplete)"))
    return " · ".join(parts)


def episode_payload(
    episode: RecordedEpisode, *, label: str | None = None, frames: bool = True
) -> dict[str, Any]:
    """Everything the player shows of ``episode``, once: per-step arrays, frames, the summary."""
    steps = np.asarray(episode.steps, dtype=np.int64)
    rewards = np.asarray(episode.rewards, dtype=np.float64)
    payload: dict[str, Any] = {
        "title": episode_title(episode, label),
        "label": label,
        "lane": episode.lane,
        "episode_id": episode.episode_id,
        "seed": episode.seed,
        "episode_return": _numbers(np.array([episode.episode_return]))[0],
        "length": episode.length,
        "complete": episode.complete,
        "counted": episode.counted,
        "steps": steps.tolist(),
        "rewards": _numbers(rewards),
        # With a step stride the recorded rewards skip steps: the running sum is over recorded steps.
        "returns": _numbers(np.cumsum(rewards)),
        "terminated": _numbers(episode.terminated),
        "truncated": _numbers(episode.truncated),
        "action": _group(episode.actions),
        "observation": _group(episode.observations),
        "frames": None,
        "frame_steps": None,
        "frame_index": None,
        "no_frames": None,
    }
    if frames and episode.frames is not None and len(episode.frames):
        frame_steps = np.asarray(episode.frame_steps, dtype=np.int64)
        payload["frames"] = [frame_data_url(frame) for frame in episode.frames]
        payload["frame_steps"] = frame_steps.tolist()
        # The frame a step shows: the latest one rendered at or before it (frame_stride > 1 skips steps).
        payload["frame_index"] = (np.searchsorted(frame_steps, steps, side="right") - 1).tolist()
    else:
        payload["no_frames"] = no_frames_reason(episode, frames=frames)
    return payload


def no_frames_reason(episode: RecordedEpisode, *, frames: bool = True) -> str:
    """Why the player shows no rendered frame for ``episode`` (which has none to show)."""
    if not frames and episode.frames is not None and len(episode.frames):
        return "No frames: this view leaves them out (frames=False)."
    lanes = episode.frame_lanes
    if lanes is not None and not lanes:
        return (
            "No frames: this recording has none. Record them with RecordingOptions(path, frame_lanes=[0]) "
            "or rlmesh-gym eval ... --record FILE --frame-lanes 0."
        )
    if lanes is not None and episode.lane not in lanes:
        shown = ", ".join(map(str, lanes))
        return (
            f"No frames: frames were recorded on lane(s) {shown} only, "
            f"and this episode ran on lane {episode.lane}."
        )
    return "No frames: the env rendered none for this episode."


def leaf_value(value: Any, row: int) -> Any:
    """Row ``row`` of a stored value tree as plain Python (what the player shows at that row)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return {key: leaf_value(child, row) for key, child in value.items()}
    if isinstance(value, tuple):
        return tuple(leaf_value(child, row) for child in value)
    item = np.asarray(value)[row]
    return item.tolist() if isinstance(item, np.ndarray) else item.item()


def step_values(episode: RecordedEpisode, position: int) -> dict[str, Any]:
    """What a player panel shows when its slider is at ``position`` (past the end: the last step)."""
    rows = len(episode.steps)
    if rows == 0:
        return {"row": None, "step": None, "ended": True}
    row = min(position, rows - 1)
    frame_step = None
    if episode.frames is not None and episode.frame_steps is not None and len(episode.frame_steps):
        index = int(np.searchsorted(episode.frame_steps, episode.steps[row], side="right")) - 1
        frame_step = int(episode.frame_steps[index]) if index >= 0 else None
    return {
        "row": row,
        "step": int(episode.steps[row]),
        "ended": position >= rows,
        "reward": float(episode.rewards[row]),
        "return": float(np.sum(episode.rewards[: row + 1], dtype=np.float64)),
        "terminated": bool(episode.terminated[row]),
        "truncated": bool(episode.truncated[row]),
        "action": leaf_value(episode.actions, row),
        "observation": leaf_value(episode.observations, row),
        "frame_step": frame_step,
    }


def check_episodes(episodes: Sequence[Any]) -> list[RecordedEpisode]:
    """The episodes a player is asked to show, checked (at least one, each a ``RecordedEpisode``)."""
    if not episodes:
        raise ValueError("play needs at least one episode")
    for episode in episodes:
        if not isinstance(episode, RecordedEpisode):
            raise TypeError(
                f"play takes RecordedEpisode objects (recording.episode(i)), got {type(episode).__name__}"
            )
    return list(episodes)


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - pillow ships with the notebook extra
        raise ImportError(
            "the episode player encodes frames with Pillow: pip install 'rlmesh-gym[notebook]'"
        ) from exc
    return Image
