"""Helpers of the gRPC transport tests: bounded asyncio runs, small fake peers, port checks."""

from __future__ import annotations

import asyncio
import socket
import struct
import uuid
import zlib
from collections.abc import Coroutine
from typing import Any

import gymnasium as gym
import numpy as np

from rlmesh_gym.proto import env_pb2, model_pb2, spaces_pb2
from rlmesh_gym.runtime.errors import EnvRpcError, ModelRpcError
from rlmesh_gym.runtime.seams import (
    RuntimeEnv,
    RuntimeEnvReset,
    RuntimeEnvStep,
    RuntimeModel,
    RuntimeModelPrediction,
)

OBS_SPEC = spaces_pb2.SpaceSpec(
    shape=[2], dtype=spaces_pb2.D_TYPE_FLOAT32, box=spaces_pb2.BoxSpec(unbounded=True)
)
ACTION_SPEC = spaces_pb2.SpaceSpec(dtype=spaces_pb2.D_TYPE_INT64, discrete=spaces_pb2.DiscreteSpec(n=2))


def run(coroutine: Coroutine[Any, Any, Any], timeout: float = 30.0) -> Any:
    """Run ``coroutine`` on a fresh event loop, failing the test if it takes longer than ``timeout``."""

    async def bounded() -> Any:
        return await asyncio.wait_for(coroutine, timeout)

    return asyncio.run(bounded())


def contract(num_envs: int = 1, render_mode: str = "") -> env_pb2.EnvContract:
    return env_pb2.EnvContract(
        id="Counting-v0",
        observation_space=OBS_SPEC,
        action_space=ACTION_SPEC,
        num_envs=num_envs,
        autoreset_mode=env_pb2.AUTORESET_MODE_DISABLED if num_envs == 1 else env_pb2.AUTORESET_MODE_NEXT_STEP,
        render_mode=render_mode,
    )


class CountingEnv(RuntimeEnv):
    """N lanes; lane i's observation is [i, t]; every episode lasts ``length`` steps, reward 1 each.

    Actions must be N int64 values in {0, 1}; anything else is a recoverable EnvRpcError (as
    GymVectorEnv does for bad input). ``fail_on_step`` makes that step raise a non-recoverable one.
    """

    def __init__(
        self, num_envs: int = 1, length: int = 3, render_mode: str = "", fail_on_step: int | None = None
    ):
        self.contract = contract(num_envs, render_mode)
        self.num_envs = num_envs
        self.length = length
        self.fail_on_step = fail_on_step
        self.t = 0
        self.steps = 0
        self.ids = [""] * num_envs
        self.requests: list[str] = []
        self.drained = 0

    def _observation(self) -> bytes:
        return np.array([[lane, self.t] for lane in range(self.num_envs)], np.float32).tobytes()

    async def reset(self, request: env_pb2.ResetRequest) -> RuntimeEnvReset:
        self.requests.append("reset")
        self.t = 0
        self.ids = [str(uuid.uuid4()) for _ in range(self.num_envs)]
        response = env_pb2.ResetResponse(episode_ids=self.ids)
        response.observation.bytes.data = self._observation()
        response.infos.entries["seeds"].list.items.extend(spaces_pb2.MetaValue(int=s) for s in request.seeds)
        return RuntimeEnvReset(response)

    async def step(self, request: env_pb2.StepRequest) -> RuntimeEnvStep:
        self.requests.append("step")
        self.steps += 1
        if self.fail_on_step == self.steps:
            raise EnvRpcError("env.step", self.steps, "ZeroDivisionError: the physics exploded")
        data = request.action.bytes.data
        if len(data) != 8 * self.num_envs:
            raise EnvRpcError(
                "env.step",
                self.steps,
                f"expected {self.num_envs} actions, got {len(data) / 8:g}",
                recoverable=True,
            )
        actions = np.frombuffer(data, np.int64)
        if ((actions < 0) | (actions > 1)).any():
            raise EnvRpcError(
                "env.step", self.steps, f"actions {actions.tolist()} outside Discrete(2)", recoverable=True
            )
        self.t += 1
        done = self.t >= self.length
        response = env_pb2.StepResponse(
            rewards=[1.0] * self.num_envs,
            terminated_mask=bytes([done] * self.num_envs),
            truncated_mask=bytes(self.num_envs),
            episode_ids=self.ids,
        )
        response.observation.bytes.data = self._observation()
        if done:
            for lane, episode_id in enumerate(self.ids):
                response.completed_episodes.add(
                    episode_id=episode_id,
                    env_index=lane,
                    step_count=self.t,
                    cumulative_reward=float(self.t),
                    terminated=True,
                )
            self.ids = [""] * self.num_envs
        return RuntimeEnvStep(response)

    def drain_episodes(self) -> list[env_pb2.EpisodeMetadata]:
        self.drained += 1
        running = [
            env_pb2.EpisodeMetadata(episode_id=episode_id, env_index=lane, step_count=self.t, truncated=True)
            for lane, episode_id in enumerate(self.ids)
            if episode_id
        ]
        self.ids = [""] * self.num_envs
        return running

    def render_frames(self) -> list[np.ndarray | None]:
        frames = []
        for lane in range(self.num_envs):
            frame = np.zeros((4, 6, 3), np.uint8)
            frame[..., 0] = lane * 10 + self.t
            frames.append(frame)
        return frames


class FirstActionModel(RuntimeModel):
    """Action 1 for a lane whose observation's first element is odd, else 0; remembers binds and closes."""

    def __init__(self, fail: bool = False) -> None:
        self.bound: list[env_pb2.EnvContract] = []
        self.closed_routes: list[tuple[str, str, str]] = []
        self.predicts = 0
        self.fail = fail

    def bind(self, contract: env_pb2.EnvContract) -> None:
        self.bound.append(contract)

    async def predict(self, request: model_pb2.PredictRequest) -> RuntimeModelPrediction:
        self.predicts += 1
        if self.fail:
            raise ModelRpcError("policy", "the network produced NaN", recoverable=True)
        rows = np.frombuffer(request.observation.bytes.data, np.float32).reshape(
            len(request.context.slots), 2
        )
        actions = (rows[:, 0].astype(np.int64) % 2).astype(np.int64)
        response = model_pb2.PredictResponse(context=request.context)
        response.action.bytes.data = actions.tobytes()
        return RuntimeModelPrediction(response)

    async def close_route(self, request: model_pb2.CloseRouteRequest, timeout: float) -> None:
        self.closed_routes.append((request.context.session_id, request.context.route_id, request.reason))


def port_is_free(port: int) -> bool:
    """Whether a new server could listen on 127.0.0.1:``port`` (the old one really let go of it).

    SO_REUSEADDR as servers (grpc included) set it: closed connections in TIME_WAIT do not count.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
            probe.listen(1)
        except OSError:
            return False
    return True


def decode_png(data: bytes) -> tuple[tuple[int, int, int, int], np.ndarray]:
    """(width, height, bit depth, colour type) and HxWxC pixels of an encode_png file (CRCs checked)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, offset = {}, 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind, body = data[offset + 4 : offset + 8], data[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])
        assert crc == zlib.crc32(kind + body)
        chunks[kind] = body
        offset += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", chunks[b"IHDR"][:10])
    channels = {0: 1, 2: 3, 6: 4}[color]
    rows = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(height, 1 + width * channels)
    assert (rows[:, 0] == 0).all()
    return (width, height, depth, color), rows[:, 1:].reshape(height, width, channels)


class PlainGymEnv(gym.Env):
    """A minimal gymnasium env with CartPole's spaces that, unlike CartPole, does not itself
    assert a reset before ``step``; reward 1 per step, never done."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(4, np.float32), {}

    def step(self, action):
        return np.zeros(4, np.float32), 1.0, False, False, {}
