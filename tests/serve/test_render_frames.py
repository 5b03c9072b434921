"""Render frames of every layout reach rlmesh 0.1.0b3's client with the shape upstream's server gives."""

from __future__ import annotations

import asyncio
import itertools

import gymnasium as gym
import numpy as np
import rlmesh
import rlmesh.numpy
from _serve_fakes import run

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.serve import EnvServer

SIZES = range(1, 6)
LAYOUTS = ["grey", "hwc3", "hwc4", "chw3", "chw4", "hw1"]


class FrameEnv(gym.Env):
    """A one-lane env whose ``render()`` returns whatever frame the test sets."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self) -> None:
        self.render_mode = "rgb_array"
        self.observation_space = gym.spaces.Box(0, 1, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.frame: np.ndarray | None = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), 0.0, False, False, {}

    def render(self):
        return self.frame


def frame(layout: str, height: int, width: int) -> np.ndarray:
    shape = {
        "grey": (height, width),
        "hwc3": (height, width, 3),
        "hwc4": (height, width, 4),
        "chw3": (3, height, width),
        "chw4": (4, height, width),
        "hw1": (height, width, 1),
    }[layout]
    return ((np.arange(int(np.prod(shape))) * 7 + 3) % 256).astype(np.uint8).reshape(shape)


def rendered(env: FrameEnv, address: str, frames: list[np.ndarray]) -> list[np.ndarray | None]:
    """Each frame as b3's client decodes it from the server at ``address``."""
    client = rlmesh.numpy.RemoteEnv(address)
    try:
        client.reset(seed=0)
        out = []
        for value in frames:
            env.frame = value
            got = client.render()
            out.append(None if got is None else np.asarray(got))
        return out
    finally:
        client.close()


def test_frames_of_every_size_and_channel_count_match_upstreams_server():
    cases = list(itertools.product(LAYOUTS, SIZES, SIZES))
    frames = [frame(*case) for case in cases]

    ours_env = FrameEnv()

    async def serve_ours():
        async with EnvServer(GymVectorEnv(ours_env)) as server:
            return await asyncio.to_thread(rendered, ours_env, server.address, frames)

    ours = run(serve_ours())

    b3_env = FrameEnv()
    b3_server = rlmesh.EnvServer(b3_env, "127.0.0.1:0")
    b3_server.start()
    try:
        theirs = rendered(b3_env, b3_server.address, frames)
    finally:
        b3_server.shutdown()
        b3_server.wait(10.0)

    for case, got, expected in zip(cases, ours, theirs, strict=True):
        assert (got is None) == (expected is None), case
        if expected is not None:
            assert got.shape == expected.shape, case
            np.testing.assert_array_equal(got, expected, err_msg=str(case))
    # The grey, RGB and RGBA frames themselves arrive unchanged: (H, W) grey, (H, W, C) colour.
    for case, value, got in zip(cases, frames, ours, strict=True):
        layout = case[0]
        if layout in ("grey", "hwc3", "hwc4"):
            np.testing.assert_array_equal(got, value, err_msg=str(case))
        elif layout in ("chw3", "chw4") and value.shape[-1] not in (3, 4):
            np.testing.assert_array_equal(got, np.moveaxis(value, 0, -1), err_msg=str(case))
