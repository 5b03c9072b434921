"""The rlmesh handshake: protocol constants, edition pins and both sides of the check.

The rules: docs/design/wire.md#handshake.

A server evaluates a ``HandshakeRequest`` with :func:`evaluate_handshake` (the upstream rules
and error messages); a client builds its request with :func:`handshake_request` and checks
the server's answer with :func:`check_handshake_response`.

The workflow edition ``2026.06`` is *provisional*, so peers pin the exact SHA-256 of its
specification document. rlmesh 0.1.0b3 and 0.1.0-rc.1 ship different documents (rc.1 added a
section), so their pins differ and each rejects the other. :data:`EDITION_PINS` holds both;
:func:`resolve_edition_pin` turns a pin name (or a literal 64-hex SHA) into the SHA sent.

>>> resolve_edition_pin("b3")[:12], resolve_edition_pin("rc1")[:12]
('c03b0c916521', '3827ecdfb7ad')
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from rlmesh_gym import __version__
from rlmesh_gym.proto import env_pb2, model_pb2

__all__ = [
    "DEFAULT_EDITION_PIN",
    "EDITION_PINS",
    "EDITION_STATUS",
    "ENV_CAPABILITIES",
    "MODEL_CAPABILITIES",
    "PROTOCOL_GENERATION",
    "SUPPORTED_WORKFLOW_EDITIONS",
    "WORKFLOW_EDITION",
    "HandshakeVerdict",
    "check_handshake_response",
    "evaluate_handshake",
    "handshake_request",
    "release_channel",
    "resolve_edition_pin",
]

PROTOCOL_GENERATION = "rlmesh.protocol.v1"
"""The protocol generation spoken (current and minimum supported)."""

WORKFLOW_EDITION = "2026.06"
"""The one workflow edition this package implements."""

SUPPORTED_WORKFLOW_EDITIONS: tuple[str, ...] = (WORKFLOW_EDITION,)

EDITION_STATUS = "provisional"
"""The status of :data:`WORKFLOW_EDITION`; provisional editions are pinned by SHA-256."""

EDITION_PINS: dict[str, str] = {
    "b3": "c03b0c916521485492aa02507cacb7888a0752fc72860e53231296de4a27007f",
    "rc1": "3827ecdfb7ad3c756c88587101675a412083252027720e4d0f7daa588f431d1e",
}
"""SHA-256 of the ``2026.06`` edition document as shipped by rlmesh 0.1.0b3 and 0.1.0-rc.1."""

DEFAULT_EDITION_PIN = "b3"
"""rlmesh 0.1.0b3 is the published peer this package is tested against."""

ENV_CAPABILITIES: dict[str, str] = {"rlmesh.env.service.v1": "true", "rlmesh.spaces.core.v1": "true"}
MODEL_CAPABILITIES: dict[str, str] = {
    "rlmesh.model.service.v1": "true",
    "rlmesh.spaces.core.v1": "true",
    "rlmesh.model.concurrent_predict.v1": "true",
}

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")

Role = Literal["env", "model"]


def resolve_edition_pin(pin: str) -> str:
    """The edition SHA-256 for ``pin``: a name of :data:`EDITION_PINS` or a literal 64-hex SHA."""
    if pin in EDITION_PINS:
        return EDITION_PINS[pin]
    if isinstance(pin, str) and _SHA256_HEX.fullmatch(pin):
        return pin
    raise ValueError(
        f"unknown edition pin {pin!r}: expected one of {sorted(EDITION_PINS)} (rlmesh 0.1.0b3 or "
        "0.1.0-rc.1) or a 64-character lowercase hex SHA-256"
    )


def release_channel(version: str) -> str:
    """``"beta"`` for a pre-release version (``0.1.0-beta.3``, ``0.1.0-rc.1``), else ``"release"``.

    Upstream prints this next to each peer's version when pins differ.
    """
    return "beta" if "-" in version else "release"


def _pin_mismatch_message(own_version: str, own_sha: str, peer_version: str, peer_sha: str) -> str:
    return (
        f"provisional workflow edition {WORKFLOW_EDITION} checksum differs between peers: this build "
        f"{own_version} ({release_channel(own_version)}) spec {own_sha[:12]} vs peer {peer_version} "
        f"({release_channel(peer_version)}) spec {peer_sha[:12]}; run matching releases"
    )


def _editions_text(editions: tuple[str, ...] | list[str]) -> str:
    return "[" + ", ".join(editions) + "]"


@dataclass(frozen=True, slots=True)
class HandshakeVerdict:
    """The outcome of :func:`evaluate_handshake`: the edition selected, or why none could be."""

    compatible: bool
    error_message: str = ""
    selected_edition: str = ""


def evaluate_handshake(
    request: env_pb2.HandshakeRequest | model_pb2.HandshakeRequest,
    edition_sha256: str,
    server_version: str = __version__,
) -> HandshakeVerdict:
    """Decide whether a client may talk to this server, with upstream's rules and messages.

    1. The trimmed ``protocol_generation`` must be :data:`PROTOCOL_GENERATION`.
    2. The selected edition is the highest offered edition that is supported.
    3. The edition is provisional, so the offered SHA must equal ``edition_sha256`` (whatever
       status the client states).
    """
    generation = request.protocol_generation.strip()
    if generation != PROTOCOL_GENERATION:
        return HandshakeVerdict(
            False, f"protocol generation {generation} not compatible with server {PROTOCOL_GENERATION}"
        )
    offered = list(request.supported_workflow_editions)
    if not offered:
        return HandshakeVerdict(
            False,
            "client offered no workflow editions (clients from 0.1.0-beta.2 or older predate edition "
            "negotiation and are not supported); server supports "
            + _editions_text(SUPPORTED_WORKFLOW_EDITIONS),
        )
    mutual = sorted(set(offered) & set(SUPPORTED_WORKFLOW_EDITIONS))
    if not mutual:
        return HandshakeVerdict(
            False,
            f"no mutually supported workflow edition; client offered {_editions_text(offered)}, "
            f"server supports {_editions_text(SUPPORTED_WORKFLOW_EDITIONS)}",
        )
    if request.offered_edition_spec_sha256 != edition_sha256:
        return HandshakeVerdict(
            False,
            _pin_mismatch_message(
                server_version, edition_sha256, request.client_version, request.offered_edition_spec_sha256
            ),
        )
    return HandshakeVerdict(True, selected_edition=mutual[-1])


def handshake_request(
    role: Role, edition_sha256: str, client_name: str | None = None
) -> env_pb2.HandshakeRequest | model_pb2.HandshakeRequest:
    """The ``HandshakeRequest`` this package's ``role`` client sends (``"env"`` or ``"model"``)."""
    if role == "env":
        message_type, capabilities, default_name = env_pb2.HandshakeRequest, ENV_CAPABILITIES, "rlmesh-gym"
    elif role == "model":
        message_type, capabilities, default_name = (
            model_pb2.HandshakeRequest,
            MODEL_CAPABILITIES,
            "rlmesh-gym-model",
        )
    else:
        raise ValueError(f"role must be 'env' or 'model', got {role!r}")
    return message_type(
        protocol_generation=PROTOCOL_GENERATION,
        client_name=client_name or default_name,
        client_version=__version__,
        capabilities=capabilities,
        supported_workflow_editions=list(SUPPORTED_WORKFLOW_EDITIONS),
        offered_edition_spec_sha256=edition_sha256,
        offered_edition_status=EDITION_STATUS,
    )


def check_handshake_response(
    response: env_pb2.HandshakeResponse | model_pb2.HandshakeResponse, edition_sha256: str
) -> str | None:
    """Why a client must not use this server, or ``None`` when the answer is acceptable.

    The server must be compatible, speak :data:`PROTOCOL_GENERATION`, select
    :data:`WORKFLOW_EDITION` with exactly our pin, and (env servers) send a contract with both
    spaces. These are the checks the rlmesh 0.1.0b3 clients make.
    """
    if not response.compatible:
        return f"server refused the handshake: {response.error_message or '(no reason given)'}"
    generation = response.server_protocol_generation.strip()
    if generation != PROTOCOL_GENERATION:
        return f"server protocol generation {generation} not compatible with client {PROTOCOL_GENERATION}"
    if response.selected_workflow_edition not in SUPPORTED_WORKFLOW_EDITIONS:
        return (
            f"server selected workflow edition {response.selected_workflow_edition!r}, but this client "
            f"supports {_editions_text(SUPPORTED_WORKFLOW_EDITIONS)}"
        )
    if response.selected_edition_spec_sha256 != edition_sha256:
        return _pin_mismatch_message(
            __version__, edition_sha256, response.server_version, response.selected_edition_spec_sha256
        )
    if isinstance(response, env_pb2.HandshakeResponse):
        if not response.HasField("env_contract"):
            return "no env_contract in response"
        contract = response.env_contract
        missing = [name for name in ("observation_space", "action_space") if not contract.HasField(name)]
        if missing:
            return f"env_contract has no {' and no '.join(missing)}"
    return None
