"""One RGB frame per lane of a gymnasium env (what ``GymVectorEnv.render_frames`` returns)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rlmesh_gym.envs.headless import quietly_headless

__all__ = ["lane_frames"]


def lane_frames(
    env: Any,
    lanes_env: Any,
    num_envs: int,
    lanes: Sequence[int] | None,
    run: Callable[[Callable[[], Any]], Any],
) -> list[np.ndarray | None]:
    """The frame of each lane (``None`` where the env gave none), rendered by ``run(render)``.

    ``env`` is the user's env (its ``render_mode`` is checked), ``lanes_env`` the vector env
    of its lanes. With ``lanes``, only those lanes are rendered where the vector env exposes
    its sub-envs (``SyncVectorEnv``); otherwise every lane is.
    """
    if env.render_mode != "rgb_array":
        raise ValueError(
            f"render_frames needs an env built with render_mode='rgb_array'; "
            f"this env has render_mode={env.render_mode!r}"
        )
    if lanes is not None:
        bad = [lane for lane in lanes if not 0 <= lane < num_envs]
        if bad:
            raise ValueError(f"render_frames: lanes {bad} do not exist (the env has {num_envs})")
    rendered = run(quietly_headless(_render_function(lanes_env, num_envs, lanes)))
    frames = [None] * num_envs if rendered is None else list(rendered)
    if len(frames) != num_envs:
        raise ValueError(f"env.render() returned {len(frames)} frames for {num_envs} lanes")
    return [None if frame is None else np.asarray(frame) for frame in frames]


def _render_function(lanes_env: Any, num_envs: int, lanes: Sequence[int] | None) -> Callable[[], Any]:
    """What renders the frames: the chosen sub-envs alone when they are reachable, else every lane."""
    sub_envs = getattr(lanes_env, "envs", None)
    if lanes is None or sub_envs is None or len(sub_envs) != num_envs:
        return lanes_env.render
    chosen = frozenset(lanes)
    return lambda: [env.render() if lane in chosen else None for lane, env in enumerate(sub_envs)]
