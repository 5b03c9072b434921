from rlmesh_gym.proto._generated.rlmesh.spaces.v1 import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SpaceSpec(_message.Message):
    __slots__ = ("shape", "dtype", "box", "discrete", "multi_binary", "multi_discrete", "text", "dict", "tuple")
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    BOX_FIELD_NUMBER: _ClassVar[int]
    DISCRETE_FIELD_NUMBER: _ClassVar[int]
    MULTI_BINARY_FIELD_NUMBER: _ClassVar[int]
    MULTI_DISCRETE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    DICT_FIELD_NUMBER: _ClassVar[int]
    TUPLE_FIELD_NUMBER: _ClassVar[int]
    shape: _containers.RepeatedScalarFieldContainer[int]
    dtype: _types_pb2.DType
    box: BoxSpec
    discrete: DiscreteSpec
    multi_binary: MultiBinarySpec
    multi_discrete: MultiDiscreteSpec
    text: TextSpec
    dict: DictSpec
    tuple: TupleSpec
    def __init__(self, shape: _Optional[_Iterable[int]] = ..., dtype: _Optional[_Union[_types_pb2.DType, str]] = ..., box: _Optional[_Union[BoxSpec, _Mapping]] = ..., discrete: _Optional[_Union[DiscreteSpec, _Mapping]] = ..., multi_binary: _Optional[_Union[MultiBinarySpec, _Mapping]] = ..., multi_discrete: _Optional[_Union[MultiDiscreteSpec, _Mapping]] = ..., text: _Optional[_Union[TextSpec, _Mapping]] = ..., dict: _Optional[_Union[DictSpec, _Mapping]] = ..., tuple: _Optional[_Union[TupleSpec, _Mapping]] = ...) -> None: ...

class BoxSpec(_message.Message):
    __slots__ = ("unbounded", "uniform", "elementwise", "typed_uniform", "typed_elementwise")
    UNBOUNDED_FIELD_NUMBER: _ClassVar[int]
    UNIFORM_FIELD_NUMBER: _ClassVar[int]
    ELEMENTWISE_FIELD_NUMBER: _ClassVar[int]
    TYPED_UNIFORM_FIELD_NUMBER: _ClassVar[int]
    TYPED_ELEMENTWISE_FIELD_NUMBER: _ClassVar[int]
    unbounded: bool
    uniform: UniformBounds
    elementwise: ElementwiseBounds
    typed_uniform: TypedUniformBounds
    typed_elementwise: TypedElementwiseBounds
    def __init__(self, unbounded: _Optional[bool] = ..., uniform: _Optional[_Union[UniformBounds, _Mapping]] = ..., elementwise: _Optional[_Union[ElementwiseBounds, _Mapping]] = ..., typed_uniform: _Optional[_Union[TypedUniformBounds, _Mapping]] = ..., typed_elementwise: _Optional[_Union[TypedElementwiseBounds, _Mapping]] = ...) -> None: ...

class UniformBounds(_message.Message):
    __slots__ = ("low", "high")
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    low: float
    high: float
    def __init__(self, low: _Optional[float] = ..., high: _Optional[float] = ...) -> None: ...

class ElementwiseBounds(_message.Message):
    __slots__ = ("low", "high")
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    low: _containers.RepeatedScalarFieldContainer[float]
    high: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, low: _Optional[_Iterable[float]] = ..., high: _Optional[_Iterable[float]] = ...) -> None: ...

class TypedUniformBounds(_message.Message):
    __slots__ = ("low", "high")
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    low: bytes
    high: bytes
    def __init__(self, low: _Optional[bytes] = ..., high: _Optional[bytes] = ...) -> None: ...

class TypedElementwiseBounds(_message.Message):
    __slots__ = ("low", "high")
    LOW_FIELD_NUMBER: _ClassVar[int]
    HIGH_FIELD_NUMBER: _ClassVar[int]
    low: bytes
    high: bytes
    def __init__(self, low: _Optional[bytes] = ..., high: _Optional[bytes] = ...) -> None: ...

class DiscreteSpec(_message.Message):
    __slots__ = ("n", "start")
    N_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    n: int
    start: int
    def __init__(self, n: _Optional[int] = ..., start: _Optional[int] = ...) -> None: ...

class MultiBinarySpec(_message.Message):
    __slots__ = ("size", "dims")
    SIZE_FIELD_NUMBER: _ClassVar[int]
    DIMS_FIELD_NUMBER: _ClassVar[int]
    size: int
    dims: _types_pb2.VectorInt
    def __init__(self, size: _Optional[int] = ..., dims: _Optional[_Union[_types_pb2.VectorInt, _Mapping]] = ...) -> None: ...

class MultiDiscreteSpec(_message.Message):
    __slots__ = ("flat", "shaped")
    FLAT_FIELD_NUMBER: _ClassVar[int]
    SHAPED_FIELD_NUMBER: _ClassVar[int]
    flat: _types_pb2.VectorInt
    shaped: _types_pb2.MatrixInt
    def __init__(self, flat: _Optional[_Union[_types_pb2.VectorInt, _Mapping]] = ..., shaped: _Optional[_Union[_types_pb2.MatrixInt, _Mapping]] = ...) -> None: ...

class TextSpec(_message.Message):
    __slots__ = ("min_length", "max_length", "charset")
    MIN_LENGTH_FIELD_NUMBER: _ClassVar[int]
    MAX_LENGTH_FIELD_NUMBER: _ClassVar[int]
    CHARSET_FIELD_NUMBER: _ClassVar[int]
    min_length: int
    max_length: int
    charset: str
    def __init__(self, min_length: _Optional[int] = ..., max_length: _Optional[int] = ..., charset: _Optional[str] = ...) -> None: ...

class DictSpec(_message.Message):
    __slots__ = ("keys", "spaces")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    SPACES_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedScalarFieldContainer[str]
    spaces: _containers.RepeatedCompositeFieldContainer[SpaceSpec]
    def __init__(self, keys: _Optional[_Iterable[str]] = ..., spaces: _Optional[_Iterable[_Union[SpaceSpec, _Mapping]]] = ...) -> None: ...

class TupleSpec(_message.Message):
    __slots__ = ("spaces",)
    SPACES_FIELD_NUMBER: _ClassVar[int]
    spaces: _containers.RepeatedCompositeFieldContainer[SpaceSpec]
    def __init__(self, spaces: _Optional[_Iterable[_Union[SpaceSpec, _Mapping]]] = ...) -> None: ...
