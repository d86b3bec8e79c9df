from gateway.v1 import gtid_pb2 as _gtid_pb2
from gateway.v1 import statement_pb2 as _statement_pb2
from gateway.v1 import value_pb2 as _value_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Rollback(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class Transaction(_message.Message):
    __slots__ = ("gtid", "epoch", "author", "start_timestamp_ns", "commit_timestamp_ns", "statements", "segment_id", "end_segment", "rollback", "idempotency_key", "conditions")
    GTID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    START_TIMESTAMP_NS_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TIMESTAMP_NS_FIELD_NUMBER: _ClassVar[int]
    STATEMENTS_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_ID_FIELD_NUMBER: _ClassVar[int]
    END_SEGMENT_FIELD_NUMBER: _ClassVar[int]
    ROLLBACK_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    gtid: _gtid_pb2.Gtid
    epoch: int
    author: int
    start_timestamp_ns: int
    commit_timestamp_ns: int
    statements: _containers.RepeatedCompositeFieldContainer[_statement_pb2.Statement]
    segment_id: int
    end_segment: bool
    rollback: Rollback
    idempotency_key: str
    conditions: _containers.RepeatedCompositeFieldContainer[Condition]
    def __init__(self, gtid: _Optional[_Union[_gtid_pb2.Gtid, _Mapping]] = ..., epoch: _Optional[int] = ..., author: _Optional[int] = ..., start_timestamp_ns: _Optional[int] = ..., commit_timestamp_ns: _Optional[int] = ..., statements: _Optional[_Iterable[_Union[_statement_pb2.Statement, _Mapping]]] = ..., segment_id: _Optional[int] = ..., end_segment: _Optional[bool] = ..., rollback: _Optional[_Union[Rollback, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., conditions: _Optional[_Iterable[_Union[Condition, _Mapping]]] = ...) -> None: ...

class Condition(_message.Message):
    __slots__ = ("table", "key", "absent", "gtid", "values")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    ABSENT_FIELD_NUMBER: _ClassVar[int]
    GTID_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    table: str
    key: _containers.RepeatedCompositeFieldContainer[_value_pb2.Value]
    absent: bool
    gtid: _gtid_pb2.Gtid
    values: RowValues
    def __init__(self, table: _Optional[str] = ..., key: _Optional[_Iterable[_Union[_value_pb2.Value, _Mapping]]] = ..., absent: _Optional[bool] = ..., gtid: _Optional[_Union[_gtid_pb2.Gtid, _Mapping]] = ..., values: _Optional[_Union[RowValues, _Mapping]] = ...) -> None: ...

class RowValues(_message.Message):
    __slots__ = ("fields", "values")
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    fields: _containers.RepeatedScalarFieldContainer[str]
    values: _containers.RepeatedCompositeFieldContainer[_value_pb2.Value]
    def __init__(self, fields: _Optional[_Iterable[str]] = ..., values: _Optional[_Iterable[_Union[_value_pb2.Value, _Mapping]]] = ...) -> None: ...
