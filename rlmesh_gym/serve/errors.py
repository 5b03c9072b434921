"""Errors of connecting to an rlmesh peer.

Failures while connecting raise a :class:`RemoteConnectionError` subclass that names the
address and what to do. Failures of a request on an established session are the runtime's
own :class:`~rlmesh_gym.runtime.errors.EnvRpcError` / ``ModelRpcError`` (transport failures,
timeouts) or their subclasses :class:`RemoteEnvError` / :class:`RemoteModelError` (the peer
answered with an in-band error), so the driver treats a remote peer like an in-process one.
"""

from __future__ import annotations

from rlmesh_gym.runtime.errors import EnvRpcError, ModelRpcError

__all__ = [
    "AuthenticationError",
    "HandshakeRejectedError",
    "PeerUnavailableError",
    "RemoteConnectionError",
    "RemoteEnvError",
    "RemoteModelError",
    "SessionBusyError",
]


class RemoteConnectionError(ConnectionError):
    """Could not establish a session with the rlmesh peer at ``address``."""

    def __init__(self, address: str, message: str) -> None:
        self.address = address
        self.message = message
        super().__init__(f"{address}: {message}")


class PeerUnavailableError(RemoteConnectionError):
    """Nothing answered at the address within the connect timeout."""


class AuthenticationError(RemoteConnectionError):
    """The peer refused our token (gRPC UNAUTHENTICATED)."""


class HandshakeRejectedError(RemoteConnectionError):
    """One side found the other incompatible: protocol generation, workflow edition or edition pin."""


class SessionBusyError(RemoteConnectionError):
    """The env server already has a connected client; rlmesh env servers take one at a time."""


class RemoteEnvError(EnvRpcError):
    """The env server answered a request with an in-band ``EnvError``.

    ``code`` is the ``EnvErrorCode`` value and ``code_name`` its name (``"INVALID_ACTION"``, ...);
    ``recoverable`` is the server's ``is_recoverable``.
    """

    def __init__(
        self, operation: str, step: int, code: int, code_name: str, message: str, recoverable: bool
    ) -> None:
        self.code = code
        self.code_name = code_name
        self.server_message = message
        super().__init__(operation, step, f"env server error {code_name}: {message}", recoverable=recoverable)


class RemoteModelError(ModelRpcError):
    """The model server answered a request with an in-band ``ModelError`` (``code``, ``code_name``)."""

    def __init__(self, component_id: str, code: int, code_name: str, message: str, recoverable: bool) -> None:
        self.code = code
        self.code_name = code_name
        self.server_message = message
        super().__init__(component_id, f"model server error {code_name}: {message}", recoverable=recoverable)
