"""rlmesh's gRPC transport: serve our envs and policies to rlmesh peers, and drive theirs.

Servers (grpc.aio, bind 127.0.0.1 by default, optional token, edition pin ``b3`` by default):

* :class:`EnvServer`: any RuntimeEnv with a ``contract`` (``GymVectorEnv``) as an EnvService.
* :class:`ModelServer`: any RuntimeModel (``TorchPolicy``) as a ModelService.

Clients, usable wherever the driver takes a RuntimeEnv / RuntimeModel:

* :class:`RemoteEnv`: ``await RemoteEnv.connect("HOST:PORT")``; :func:`fetch_contract` reads a
  server's contract from a handshake alone.
* :class:`RemoteModel`: ``await RemoteModel.connect("HOST:PORT", contract=env.contract)``.
* :func:`connect_gym_vector_env` / :func:`connect_gym_env`: an env server as a gymnasium
  ``VectorEnv`` / ``Env`` (for SB3, CleanRL-style loops, gymnasium's wrappers).

This subpackage needs ``grpcio`` (the ``grpc`` extra); the rest of ``rlmesh_gym`` does not,
so its modules are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from rlmesh_gym import _lazy

if TYPE_CHECKING:
    from rlmesh_gym.serve.endpoint import InsecureBindWarning
    from rlmesh_gym.serve.env_client import RemoteEnv, fetch_contract
    from rlmesh_gym.serve.env_server import EnvServer
    from rlmesh_gym.serve.errors import (
        AuthenticationError,
        HandshakeRejectedError,
        PeerUnavailableError,
        RemoteConnectionError,
        RemoteEnvError,
        RemoteModelError,
        SessionBusyError,
    )
    from rlmesh_gym.serve.gym_clients import connect_gym_env, connect_gym_vector_env
    from rlmesh_gym.serve.handshake import DEFAULT_EDITION_PIN, EDITION_PINS
    from rlmesh_gym.serve.model_client import RemoteModel
    from rlmesh_gym.serve.model_server import ModelServer

__all__ = [
    "DEFAULT_EDITION_PIN",
    "EDITION_PINS",
    "AuthenticationError",
    "EnvServer",
    "HandshakeRejectedError",
    "InsecureBindWarning",
    "ModelServer",
    "PeerUnavailableError",
    "RemoteConnectionError",
    "RemoteEnv",
    "RemoteEnvError",
    "RemoteModel",
    "RemoteModelError",
    "SessionBusyError",
    "connect_gym_env",
    "connect_gym_vector_env",
    "fetch_contract",
]

_HOMES = {
    "RemoteEnv": "env_client",
    "fetch_contract": "env_client",
    "connect_gym_env": "gym_clients",
    "connect_gym_vector_env": "gym_clients",
    "EnvServer": "env_server",
    "RemoteModel": "model_client",
    "ModelServer": "model_server",
    "DEFAULT_EDITION_PIN": "handshake",
    "EDITION_PINS": "handshake",
    "InsecureBindWarning": "endpoint",
    "AuthenticationError": "errors",
    "HandshakeRejectedError": "errors",
    "PeerUnavailableError": "errors",
    "RemoteConnectionError": "errors",
    "RemoteEnvError": "errors",
    "RemoteModelError": "errors",
    "SessionBusyError": "errors",
}


def _require_grpc() -> None:
    try:
        importlib.import_module("grpc")
    except ImportError as error:
        raise ImportError(
            "rlmesh_gym.serve needs grpcio; install it with: pip install 'rlmesh-gym[grpc]'"
        ) from error


__getattr__ = _lazy.lazy_exports(
    __name__, {name: f"rlmesh_gym.serve.{home}" for name, home in _HOMES.items()}, before_load=_require_grpc
)[0]


def __dir__() -> list[str]:
    return sorted(__all__)  # the API only: the module's helpers stay out of tab completion
