from gateway.v1 import gateway_pb2 as _gateway_pb2
from gateway.v1 import value_pb2 as _value_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReadKey(_message.Message):
    __slots__ = ("table", "key")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    table: str
    key: _containers.RepeatedCompositeFieldContainer[_value_pb2.Value]
    def __init__(self, table: _Optional[str] = ..., key: _Optional[_Iterable[_Union[_value_pb2.Value, _Mapping]]] = ...) -> None: ...

class ReadBatchRequest(_message.Message):
    __slots__ = ("table", "keys", "consistency")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_FIELD_NUMBER: _ClassVar[int]
    table: str
    keys: _containers.RepeatedCompositeFieldContainer[ReadKey]
    consistency: _gateway_pb2.Consistency
    def __init__(self, table: _Optional[str] = ..., keys: _Optional[_Iterable[_Union[ReadKey, _Mapping]]] = ..., consistency: _Optional[_Union[_gateway_pb2.Consistency, str]] = ...) -> None: ...

class ReadBatchResult(_message.Message):
    __slots__ = ("found", "row")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    found: bool
    row: _gateway_pb2.Row
    def __init__(self, found: _Optional[bool] = ..., row: _Optional[_Union[_gateway_pb2.Row, _Mapping]] = ...) -> None: ...

class ReadBatchResponse(_message.Message):
    __slots__ = ("results", "applied_index")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ReadBatchResult]
    applied_index: int
    def __init__(self, results: _Optional[_Iterable[_Union[ReadBatchResult, _Mapping]]] = ..., applied_index: _Optional[int] = ...) -> None: ...
