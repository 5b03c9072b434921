from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OperationMetric(_message.Message):
    __slots__ = ("name", "labels", "duration_ns", "byte_count", "number")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    DURATION_NS_FIELD_NUMBER: _ClassVar[int]
    BYTE_COUNT_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    name: str
    labels: _containers.ScalarMap[str, str]
    duration_ns: int
    byte_count: int
    number: float
    def __init__(self, name: _Optional[str] = ..., labels: _Optional[_Mapping[str, str]] = ..., duration_ns: _Optional[int] = ..., byte_count: _Optional[int] = ..., number: _Optional[float] = ...) -> None: ...

class OperationTelemetry(_message.Message):
    __slots__ = ("operation", "component_id", "metrics")
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    COMPONENT_ID_FIELD_NUMBER: _ClassVar[int]
    METRICS_FIELD_NUMBER: _ClassVar[int]
    operation: str
    component_id: str
    metrics: _containers.RepeatedCompositeFieldContainer[OperationMetric]
    def __init__(self, operation: _Optional[str] = ..., component_id: _Optional[str] = ..., metrics: _Optional[_Iterable[_Union[OperationMetric, _Mapping]]] = ...) -> None: ...
