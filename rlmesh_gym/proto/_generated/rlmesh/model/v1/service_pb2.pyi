from rlmesh_gym.proto._generated.rlmesh.model.v1 import interaction_pb2 as _interaction_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class HandshakeRequest(_message.Message):
    __slots__ = ("protocol_generation", "client_name", "client_version", "capabilities", "supported_workflow_editions", "offered_edition_spec_sha256", "offered_edition_status")
    class CapabilitiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROTOCOL_GENERATION_FIELD_NUMBER: _ClassVar[int]
    CLIENT_NAME_FIELD_NUMBER: _ClassVar[int]
    CLIENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    SUPPORTED_WORKFLOW_EDITIONS_FIELD_NUMBER: _ClassVar[int]
    OFFERED_EDITION_SPEC_SHA256_FIELD_NUMBER: _ClassVar[int]
    OFFERED_EDITION_STATUS_FIELD_NUMBER: _ClassVar[int]
    protocol_generation: str
    client_name: str
    client_version: str
    capabilities: _containers.ScalarMap[str, str]
    supported_workflow_editions: _containers.RepeatedScalarFieldContainer[str]
    offered_edition_spec_sha256: str
    offered_edition_status: str
    def __init__(self, protocol_generation: _Optional[str] = ..., client_name: _Optional[str] = ..., client_version: _Optional[str] = ..., capabilities: _Optional[_Mapping[str, str]] = ..., supported_workflow_editions: _Optional[_Iterable[str]] = ..., offered_edition_spec_sha256: _Optional[str] = ..., offered_edition_status: _Optional[str] = ...) -> None: ...

class HandshakeResponse(_message.Message):
    __slots__ = ("compatible", "server_protocol_generation", "min_supported_protocol_generation", "error_message", "capabilities", "supported_workflow_editions", "selected_workflow_edition", "server_version", "selected_edition_spec_sha256", "selected_edition_status")
    class CapabilitiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    COMPATIBLE_FIELD_NUMBER: _ClassVar[int]
    SERVER_PROTOCOL_GENERATION_FIELD_NUMBER: _ClassVar[int]
    MIN_SUPPORTED_PROTOCOL_GENERATION_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    SUPPORTED_WORKFLOW_EDITIONS_FIELD_NUMBER: _ClassVar[int]
    SELECTED_WORKFLOW_EDITION_FIELD_NUMBER: _ClassVar[int]
    SERVER_VERSION_FIELD_NUMBER: _ClassVar[int]
    SELECTED_EDITION_SPEC_SHA256_FIELD_NUMBER: _ClassVar[int]
    SELECTED_EDITION_STATUS_FIELD_NUMBER: _ClassVar[int]
    compatible: bool
    server_protocol_generation: str
    min_supported_protocol_generation: str
    error_message: str
    capabilities: _containers.ScalarMap[str, str]
    supported_workflow_editions: _containers.RepeatedScalarFieldContainer[str]
    selected_workflow_edition: str
    server_version: str
    selected_edition_spec_sha256: str
    selected_edition_status: str
    def __init__(self, compatible: _Optional[bool] = ..., server_protocol_generation: _Optional[str] = ..., min_supported_protocol_generation: _Optional[str] = ..., error_message: _Optional[str] = ..., capabilities: _Optional[_Mapping[str, str]] = ..., supported_workflow_editions: _Optional[_Iterable[str]] = ..., selected_workflow_edition: _Optional[str] = ..., server_version: _Optional[str] = ..., selected_edition_spec_sha256: _Optional[str] = ..., selected_edition_status: _Optional[str] = ...) -> None: ...

class ShutdownRequest(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class ShutdownResponse(_message.Message):
    __slots__ = ("accepted", "message")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    message: str
    def __init__(self, accepted: _Optional[bool] = ..., message: _Optional[str] = ...) -> None: ...
