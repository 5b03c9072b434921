from rlmesh_gym.proto._generated.rlmesh.core.v1 import telemetry_pb2 as _telemetry_pb2
from rlmesh_gym.proto._generated.rlmesh.env.v1 import contract_pb2 as _contract_pb2
from rlmesh_gym.proto._generated.rlmesh.spaces.v1 import value_pb2 as _value_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ModelErrorCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MODEL_ERROR_CODE_UNSPECIFIED: _ClassVar[ModelErrorCode]
    MODEL_ERROR_CODE_INVALID_REQUEST: _ClassVar[ModelErrorCode]
    MODEL_ERROR_CODE_NOT_CONFIGURED: _ClassVar[ModelErrorCode]
    MODEL_ERROR_CODE_BUSY: _ClassVar[ModelErrorCode]
    MODEL_ERROR_CODE_INTERNAL: _ClassVar[ModelErrorCode]
    MODEL_ERROR_CODE_CANCELLED: _ClassVar[ModelErrorCode]
    MODEL_ERROR_CODE_CLOSED: _ClassVar[ModelErrorCode]
MODEL_ERROR_CODE_UNSPECIFIED: ModelErrorCode
MODEL_ERROR_CODE_INVALID_REQUEST: ModelErrorCode
MODEL_ERROR_CODE_NOT_CONFIGURED: ModelErrorCode
MODEL_ERROR_CODE_BUSY: ModelErrorCode
MODEL_ERROR_CODE_INTERNAL: ModelErrorCode
MODEL_ERROR_CODE_CANCELLED: ModelErrorCode
MODEL_ERROR_CODE_CLOSED: ModelErrorCode

class PredictContext(_message.Message):
    __slots__ = ("session_id", "route_id", "request_id", "slots")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ROUTE_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    route_id: str
    request_id: str
    slots: _containers.RepeatedCompositeFieldContainer[PredictSlot]
    def __init__(self, session_id: _Optional[str] = ..., route_id: _Optional[str] = ..., request_id: _Optional[str] = ..., slots: _Optional[_Iterable[_Union[PredictSlot, _Mapping]]] = ...) -> None: ...

class PredictSlot(_message.Message):
    __slots__ = ("env_index", "episode_id", "step", "reset")
    ENV_INDEX_FIELD_NUMBER: _ClassVar[int]
    EPISODE_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    RESET_FIELD_NUMBER: _ClassVar[int]
    env_index: int
    episode_id: str
    step: int
    reset: bool
    def __init__(self, env_index: _Optional[int] = ..., episode_id: _Optional[str] = ..., step: _Optional[int] = ..., reset: _Optional[bool] = ...) -> None: ...

class ConfigureRouteRequest(_message.Message):
    __slots__ = ("context", "env_contract")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ENV_CONTRACT_FIELD_NUMBER: _ClassVar[int]
    context: PredictContext
    env_contract: _contract_pb2.EnvContract
    def __init__(self, context: _Optional[_Union[PredictContext, _Mapping]] = ..., env_contract: _Optional[_Union[_contract_pb2.EnvContract, _Mapping]] = ...) -> None: ...

class ConfigureRouteResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PredictRequest(_message.Message):
    __slots__ = ("context", "observation")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    OBSERVATION_FIELD_NUMBER: _ClassVar[int]
    context: PredictContext
    observation: _value_pb2.SpaceValue
    def __init__(self, context: _Optional[_Union[PredictContext, _Mapping]] = ..., observation: _Optional[_Union[_value_pb2.SpaceValue, _Mapping]] = ...) -> None: ...

class PredictResponse(_message.Message):
    __slots__ = ("context", "action")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    context: PredictContext
    action: _value_pb2.SpaceValue
    def __init__(self, context: _Optional[_Union[PredictContext, _Mapping]] = ..., action: _Optional[_Union[_value_pb2.SpaceValue, _Mapping]] = ...) -> None: ...

class CloseRouteRequest(_message.Message):
    __slots__ = ("context", "reason")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    context: PredictContext
    reason: str
    def __init__(self, context: _Optional[_Union[PredictContext, _Mapping]] = ..., reason: _Optional[str] = ...) -> None: ...

class CloseRouteResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CloseRequest(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class CloseResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ModelError(_message.Message):
    __slots__ = ("code", "message", "is_recoverable", "debug_info")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    IS_RECOVERABLE_FIELD_NUMBER: _ClassVar[int]
    DEBUG_INFO_FIELD_NUMBER: _ClassVar[int]
    code: ModelErrorCode
    message: str
    is_recoverable: bool
    debug_info: str
    def __init__(self, code: _Optional[_Union[ModelErrorCode, str]] = ..., message: _Optional[str] = ..., is_recoverable: _Optional[bool] = ..., debug_info: _Optional[str] = ...) -> None: ...

class JoinRequest(_message.Message):
    __slots__ = ("configure_route", "predict", "close_route", "close", "request_id")
    CONFIGURE_ROUTE_FIELD_NUMBER: _ClassVar[int]
    PREDICT_FIELD_NUMBER: _ClassVar[int]
    CLOSE_ROUTE_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    configure_route: ConfigureRouteRequest
    predict: PredictRequest
    close_route: CloseRouteRequest
    close: CloseRequest
    request_id: str
    def __init__(self, configure_route: _Optional[_Union[ConfigureRouteRequest, _Mapping]] = ..., predict: _Optional[_Union[PredictRequest, _Mapping]] = ..., close_route: _Optional[_Union[CloseRouteRequest, _Mapping]] = ..., close: _Optional[_Union[CloseRequest, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class JoinResponse(_message.Message):
    __slots__ = ("configure_route", "predict", "close_route", "close", "error", "telemetry", "request_id")
    CONFIGURE_ROUTE_FIELD_NUMBER: _ClassVar[int]
    PREDICT_FIELD_NUMBER: _ClassVar[int]
    CLOSE_ROUTE_FIELD_NUMBER: _ClassVar[int]
    CLOSE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TELEMETRY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    configure_route: ConfigureRouteResponse
    predict: PredictResponse
    close_route: CloseRouteResponse
    close: CloseResponse
    error: ModelError
    telemetry: _telemetry_pb2.OperationTelemetry
    request_id: str
    def __init__(self, configure_route: _Optional[_Union[ConfigureRouteResponse, _Mapping]] = ..., predict: _Optional[_Union[PredictResponse, _Mapping]] = ..., close_route: _Optional[_Union[CloseRouteResponse, _Mapping]] = ..., close: _Optional[_Union[CloseResponse, _Mapping]] = ..., error: _Optional[_Union[ModelError, _Mapping]] = ..., telemetry: _Optional[_Union[_telemetry_pb2.OperationTelemetry, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...
