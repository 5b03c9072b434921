"""An env server as a Gymnasium env: :func:`connect_gym_vector_env` and :func:`connect_gym_env`.

Each connects a :class:`~rlmesh_gym.serve.RemoteEnv` to the server on the adapter's own event
loop and wraps it (:class:`~rlmesh_gym.envs.RlmeshVectorEnv`, :class:`~rlmesh_gym.envs.RlmeshEnv`),
so any rlmesh env endpoint (``rlmesh-gym serve-env``, ``rlmesh.EnvServer``) can be handed to
Stable-Baselines3, CleanRL-style loops or gymnasium's wrappers::

    from rlmesh_gym.serve import connect_gym_vector_env

    env = connect_gym_vector_env("127.0.0.1:50051")     # a gymnasium.vector.VectorEnv
    observations, infos = env.reset(seed=0)
    ...
    env.close()                                         # ends the session

``render()`` asks the server for each lane's frame (``Render``) and decodes its PNG.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlmesh_gym.envs.rlmesh_env import RlmeshEnv, RlmeshVectorEnv
from rlmesh_gym.serve.endpoint import DEFAULT_MAX_MESSAGE_BYTES
from rlmesh_gym.serve.env_client import RemoteEnv
from rlmesh_gym.serve.handshake import DEFAULT_EDITION_PIN
from rlmesh_gym.serve.png import decode_png

__all__ = ["connect_gym_env", "connect_gym_vector_env"]


class _RenderingRemoteEnv(RemoteEnv):
    """A :class:`RemoteEnv` that also gives its lanes' frames as arrays (for the adapters' ``render()``)."""

    async def render_frames(self, lanes: Sequence[int] | None = None) -> list[np.ndarray | None]:
        """One decoded frame per lane (``None`` where the server sent none); only ``lanes`` if given."""
        chosen = range(self.num_envs) if lanes is None else frozenset(lanes)
        frames: list[np.ndarray | None] = []
        for lane in range(self.num_envs):
            png = await self.render(lane) if lane in chosen else None
            frames.append(None if png is None else decode_png(png))
        return frames


def _connect(
    address: str,
    token: str | None,
    edition_pin: str,
    connect_timeout: float,
    request_timeout: float | None,
    max_message_bytes: int,
) -> Any:
    return functools.partial(
        _RenderingRemoteEnv.connect,
        address,
        token=token,
        edition_pin=edition_pin,
        connect_timeout=connect_timeout,
        request_timeout=request_timeout,
        max_message_bytes=max_message_bytes,
    )


def connect_gym_vector_env(
    address: str,
    *,
    token: str | None = None,
    edition_pin: str = DEFAULT_EDITION_PIN,
    connect_timeout: float = 10.0,
    request_timeout: float | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> RlmeshVectorEnv:
    """The env server at ``address`` (``HOST:PORT``) as a ``gymnasium.vector.VectorEnv``.

    The arguments are :meth:`RemoteEnv.connect`'s, and so are the errors (``PeerUnavailableError``,
    ``SessionBusyError``, ...). The session is open until ``close()``.
    """
    return RlmeshVectorEnv(
        _connect(address, token, edition_pin, connect_timeout, request_timeout, max_message_bytes)
    )


def connect_gym_env(
    address: str,
    *,
    token: str | None = None,
    edition_pin: str = DEFAULT_EDITION_PIN,
    connect_timeout: float = 10.0,
    request_timeout: float | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> RlmeshEnv:
    """The one-lane env server at ``address`` as a ``gymnasium.Env`` (see :func:`connect_gym_vector_env`).

    A server of several lanes is refused with a ``ValueError`` (and the session closed).
    """
    return RlmeshEnv(
        _connect(address, token, edition_pin, connect_timeout, request_timeout, max_message_bytes)
    )
