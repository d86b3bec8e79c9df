from gateway.v1 import gtid_pb2 as _gtid_pb2
from gateway.v1 import statement_pb2 as _statement_pb2
from gateway.v1 import transaction_pb2 as _transaction_pb2
from gateway.v1 import value_pb2 as _value_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RowOperation(_message.Message):
    __slots__ = ("kind", "table", "key_fields", "key_values", "fields", "values", "new_key_values", "sql", "gtid", "log_index", "epoch", "author", "commit_timestamp_ns", "statement", "backfill_index")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        KIND_UNSPECIFIED: _ClassVar[RowOperation.Kind]
        INSERT: _ClassVar[RowOperation.Kind]
        UPDATE: _ClassVar[RowOperation.Kind]
        DELETE: _ClassVar[RowOperation.Kind]
        UPSERT: _ClassVar[RowOperation.Kind]
        SQL: _ClassVar[RowOperation.Kind]
        MOVE: _ClassVar[RowOperation.Kind]
    KIND_UNSPECIFIED: RowOperation.Kind
    INSERT: RowOperation.Kind
    UPDATE: RowOperation.Kind
    DELETE: RowOperation.Kind
    UPSERT: RowOperation.Kind
    SQL: RowOperation.Kind
    MOVE: RowOperation.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELDS_FIELD_NUMBER: _ClassVar[int]
    KEY_VALUES_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    NEW_KEY_VALUES_FIELD_NUMBER: _ClassVar[int]
    SQL_FIELD_NUMBER: _ClassVar[int]
    GTID_FIELD_NUMBER: _ClassVar[int]
    LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    COMMIT_TIMESTAMP_NS_FIELD_NUMBER: _ClassVar[int]
    STATEMENT_FIELD_NUMBER: _ClassVar[int]
    BACKFILL_INDEX_FIELD_NUMBER: _ClassVar[int]
    kind: RowOperation.Kind
    table: _statement_pb2.TableMetadata
    key_fields: _containers.RepeatedCompositeFieldContainer[_statement_pb2.FieldMetadata]
    key_values: _containers.RepeatedCompositeFieldContainer[_value_pb2.Value]
    fields: _containers.RepeatedCompositeFieldContainer[_statement_pb2.FieldMetadata]
    values: _containers.RepeatedCompositeFieldContainer[_value_pb2.Value]
    new_key_values: _containers.RepeatedCompositeFieldContainer[_value_pb2.Value]
    sql: _statement_pb2.SqlStatement
    gtid: _gtid_pb2.Gtid
    log_index: int
    epoch: int
    author: int
    commit_timestamp_ns: int
    statement: int
    backfill_index: int
    def __init__(self, kind: _Optional[_Union[RowOperation.Kind, str]] = ..., table: _Optional[_Union[_statement_pb2.TableMetadata, _Mapping]] = ..., key_fields: _Optional[_Iterable[_Union[_statement_pb2.FieldMetadata, _Mapping]]] = ..., key_values: _Optional[_Iterable[_Union[_value_pb2.Value, _Mapping]]] = ..., fields: _Optional[_Iterable[_Union[_statement_pb2.FieldMetadata, _Mapping]]] = ..., values: _Optional[_Iterable[_Union[_value_pb2.Value, _Mapping]]] = ..., new_key_values: _Optional[_Iterable[_Union[_value_pb2.Value, _Mapping]]] = ..., sql: _Optional[_Union[_statement_pb2.SqlStatement, _Mapping]] = ..., gtid: _Optional[_Union[_gtid_pb2.Gtid, _Mapping]] = ..., log_index: _Optional[int] = ..., epoch: _Optional[int] = ..., author: _Optional[int] = ..., commit_timestamp_ns: _Optional[int] = ..., statement: _Optional[int] = ..., backfill_index: _Optional[int] = ...) -> None: ...

class TransIdRange(_message.Message):
    __slots__ = ("first", "last")
    FIRST_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    first: int
    last: int
    def __init__(self, first: _Optional[int] = ..., last: _Optional[int] = ...) -> None: ...

class OriginGtids(_message.Message):
    __slots__ = ("server_id", "ranges")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    RANGES_FIELD_NUMBER: _ClassVar[int]
    server_id: int
    ranges: _containers.RepeatedCompositeFieldContainer[TransIdRange]
    def __init__(self, server_id: _Optional[int] = ..., ranges: _Optional[_Iterable[_Union[TransIdRange, _Mapping]]] = ...) -> None: ...

class ApplierPosition(_message.Message):
    __slots__ = ("applier", "log_index", "applied", "saved_at_ns", "backfill")
    APPLIER_FIELD_NUMBER: _ClassVar[int]
    LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    SAVED_AT_NS_FIELD_NUMBER: _ClassVar[int]
    BACKFILL_FIELD_NUMBER: _ClassVar[int]
    applier: str
    log_index: int
    applied: _containers.RepeatedCompositeFieldContainer[OriginGtids]
    saved_at_ns: int
    backfill: ApplierBackfill
    def __init__(self, applier: _Optional[str] = ..., log_index: _Optional[int] = ..., applied: _Optional[_Iterable[_Union[OriginGtids, _Mapping]]] = ..., saved_at_ns: _Optional[int] = ..., backfill: _Optional[_Union[ApplierBackfill, _Mapping]] = ...) -> None: ...

class ApplierBackfill(_message.Message):
    __slots__ = ("snapshot_index", "last_key", "rows", "done", "replay_until", "resumes", "tables")
    SNAPSHOT_INDEX_FIELD_NUMBER: _ClassVar[int]
    LAST_KEY_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    REPLAY_UNTIL_FIELD_NUMBER: _ClassVar[int]
    RESUMES_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    snapshot_index: int
    last_key: bytes
    rows: int
    done: bool
    replay_until: int
    resumes: int
    tables: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, snapshot_index: _Optional[int] = ..., last_key: _Optional[bytes] = ..., rows: _Optional[int] = ..., done: _Optional[bool] = ..., replay_until: _Optional[int] = ..., resumes: _Optional[int] = ..., tables: _Optional[_Iterable[bytes]] = ...) -> None: ...

class DeadLetter(_message.Message):
    __slots__ = ("id", "applier", "operation", "transaction", "attempts", "error_type", "error", "failed_at_ns", "log_index")
    ID_FIELD_NUMBER: _ClassVar[int]
    APPLIER_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FAILED_AT_NS_FIELD_NUMBER: _ClassVar[int]
    LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    id: int
    applier: str
    operation: RowOperation
    transaction: _transaction_pb2.Transaction
    attempts: int
    error_type: str
    error: str
    failed_at_ns: int
    log_index: int
    def __init__(self, id: _Optional[int] = ..., applier: _Optional[str] = ..., operation: _Optional[_Union[RowOperation, _Mapping]] = ..., transaction: _Optional[_Union[_transaction_pb2.Transaction, _Mapping]] = ..., attempts: _Optional[int] = ..., error_type: _Optional[str] = ..., error: _Optional[str] = ..., failed_at_ns: _Optional[int] = ..., log_index: _Optional[int] = ...) -> None: ...

class DeadLetterResolution(_message.Message):
    __slots__ = ("id", "action", "resolved_at_ns", "note")
    class Action(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        ACTION_UNSPECIFIED: _ClassVar[DeadLetterResolution.Action]
        REPLAYED: _ClassVar[DeadLetterResolution.Action]
        DISCARDED: _ClassVar[DeadLetterResolution.Action]
    ACTION_UNSPECIFIED: DeadLetterResolution.Action
    REPLAYED: DeadLetterResolution.Action
    DISCARDED: DeadLetterResolution.Action
    ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_AT_NS_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    id: int
    action: DeadLetterResolution.Action
    resolved_at_ns: int
    note: str
    def __init__(self, id: _Optional[int] = ..., action: _Optional[_Union[DeadLetterResolution.Action, str]] = ..., resolved_at_ns: _Optional[int] = ..., note: _Optional[str] = ...) -> None: ...
