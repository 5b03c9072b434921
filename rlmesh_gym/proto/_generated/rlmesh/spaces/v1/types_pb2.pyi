from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    D_TYPE_UNSPECIFIED: _ClassVar[DType]
    D_TYPE_BOOL: _ClassVar[DType]
    D_TYPE_UINT8: _ClassVar[DType]
    D_TYPE_INT32: _ClassVar[DType]
    D_TYPE_INT64: _ClassVar[DType]
    D_TYPE_FLOAT16: _ClassVar[DType]
    D_TYPE_FLOAT32: _ClassVar[DType]
    D_TYPE_FLOAT64: _ClassVar[DType]
    D_TYPE_INT8: _ClassVar[DType]
    D_TYPE_INT16: _ClassVar[DType]
    D_TYPE_UINT16: _ClassVar[DType]
    D_TYPE_UINT32: _ClassVar[DType]
    D_TYPE_UINT64: _ClassVar[DType]
    D_TYPE_BFLOAT16: _ClassVar[DType]

class SpaceType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SPACE_TYPE_UNSPECIFIED: _ClassVar[SpaceType]
    SPACE_TYPE_BOX: _ClassVar[SpaceType]
    SPACE_TYPE_DISCRETE: _ClassVar[SpaceType]
    SPACE_TYPE_MULTI_BINARY: _ClassVar[SpaceType]
    SPACE_TYPE_MULTI_DISCRETE: _ClassVar[SpaceType]
    SPACE_TYPE_TEXT: _ClassVar[SpaceType]
    SPACE_TYPE_DICT: _ClassVar[SpaceType]
    SPACE_TYPE_TUPLE: _ClassVar[SpaceType]
D_TYPE_UNSPECIFIED: DType
D_TYPE_BOOL: DType
D_TYPE_UINT8: DType
D_TYPE_INT32: DType
D_TYPE_INT64: DType
D_TYPE_FLOAT16: DType
D_TYPE_FLOAT32: DType
D_TYPE_FLOAT64: DType
D_TYPE_INT8: DType
D_TYPE_INT16: DType
D_TYPE_UINT16: DType
D_TYPE_UINT32: DType
D_TYPE_UINT64: DType
D_TYPE_BFLOAT16: DType
SPACE_TYPE_UNSPECIFIED: SpaceType
SPACE_TYPE_BOX: SpaceType
SPACE_TYPE_DISCRETE: SpaceType
SPACE_TYPE_MULTI_BINARY: SpaceType
SPACE_TYPE_MULTI_DISCRETE: SpaceType
SPACE_TYPE_TEXT: SpaceType
SPACE_TYPE_DICT: SpaceType
SPACE_TYPE_TUPLE: SpaceType

class VectorInt(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, data: _Optional[_Iterable[int]] = ...) -> None: ...

class MatrixInt(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: _containers.RepeatedCompositeFieldContainer[VectorInt]
    def __init__(self, data: _Optional[_Iterable[_Union[VectorInt, _Mapping]]] = ...) -> None: ...
