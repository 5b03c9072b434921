from rlmesh_gym.proto._generated.rlmesh.common.v1 import payload_pb2 as _payload_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SpaceValue(_message.Message):
    __slots__ = ("bytes",)
    BYTES_FIELD_NUMBER: _ClassVar[int]
    bytes: _payload_pb2.MessageBytes
    def __init__(self, bytes: _Optional[_Union[_payload_pb2.MessageBytes, _Mapping]] = ...) -> None: ...

class SpaceValueNode(_message.Message):
    __slots__ = ("tensor", "discrete", "multi", "text", "tuple", "dict")
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    DISCRETE_FIELD_NUMBER: _ClassVar[int]
    MULTI_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TUPLE_FIELD_NUMBER: _ClassVar[int]
    DICT_FIELD_NUMBER: _ClassVar[int]
    tensor: bytes
    discrete: int
    multi: bytes
    text: str
    tuple: ValueList
    dict: ValueMap
    def __init__(self, tensor: _Optional[bytes] = ..., discrete: _Optional[int] = ..., multi: _Optional[bytes] = ..., text: _Optional[str] = ..., tuple: _Optional[_Union[ValueList, _Mapping]] = ..., dict: _Optional[_Union[ValueMap, _Mapping]] = ...) -> None: ...

class ValueList(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[SpaceValueNode]
    def __init__(self, items: _Optional[_Iterable[_Union[SpaceValueNode, _Mapping]]] = ...) -> None: ...

class ValueMap(_message.Message):
    __slots__ = ("entries",)
    class EntriesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: SpaceValueNode
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[SpaceValueNode, _Mapping]] = ...) -> None: ...
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.MessageMap[str, SpaceValueNode]
    def __init__(self, entries: _Optional[_Mapping[str, SpaceValueNode]] = ...) -> None: ...
