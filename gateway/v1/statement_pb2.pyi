from gateway.v1 import epoch_pb2 as _epoch_pb2
from gateway.v1 import value_pb2 as _value_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TableMetadata(_message.Message):
    __slots__ = ("schema_name", "table_name")
    SCHEMA_NAME_FIELD_NUMBER: _ClassVar[int]
    TABLE_NAME_FIELD_NUMBER: _ClassVar[int]
    schema_name: str
    table_name: str
    def __init__(self, schema_name: _Optional[str] = ..., table_name: _Optional[str] = ...) -> None: ...

class FieldMetadata(_message.Message):
    __slots__ = ("name", "type")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: _value_pb2.FieldType
    def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[_value_pb2.FieldType, str]] = ...) -> None: ...

class InsertRecord(_message.Message):
    __slots__ = ("key_values", "after_values")
    KEY_VALUES_FIELD_NUMBER: _ClassVar[int]
    AFTER_VALUES_FIELD_NUMBER: _ClassVar[int]
    key_values: _containers.RepeatedCompositeFieldContainer[_value_pb2.Value]
    after_values: _containers.RepeatedCompositeFieldContainer[_value_pb2.Value]
    def __init__(self, key_values: _Optional[_Iterable[_Union[_value_pb2.Value, _Mapping]]] = ..., after_values: _Optional[_Iterable[_Union[_value_pb2.Value, _Mapping]]] = ...) -> None: ...

class InsertStatement(_message.Message):
    __slots__ = ("table", "key_fields", "fields", "records")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELDS_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    table: TableMetadata
    key_fields: _containers.RepeatedCompositeFieldContainer[FieldMetadata]
    fields: _containers.RepeatedCompositeFieldContainer[FieldMetadata]
    records: _containers.RepeatedCompositeFieldContainer[InsertRecord]
    def __init__(self, table: _Optional[_Union[TableMetadata, _Mapping]] = ..., key_fields: _Optional[_Iterable[_Union[FieldMetadata, _Mapping]]] = ..., fields: _Optional[_Iterable[_Union[FieldMetadata, _Mapping]]] = ..., records: _Optional[_Iterable[_Union[InsertRecord, _Mapping]]] = ...) -> None: ...

class UpdateRecord(_message.Message):
    __slots__ = ("key_values", "before_values", "after_values")
    KEY_VALUES_FIELD_NUMBER: _ClassVar[int]
    BEFORE_VALUES_FIELD_NUMBER: _ClassVar[int]
    AFTER_VALUES_FIELD_NUMBER: _ClassVar[int]
    key_values: _containers.RepeatedCompositeFieldContainer[_value_pb2.Value]
    before_values: _containers.RepeatedCompositeFieldContainer[_value_pb2.Value]
    after_values: _containers.RepeatedCompositeFieldContainer[_value_pb2.Value]
    def __init__(self, key_values: _Optional[_Iterable[_Union[_value_pb2.Value, _Mapping]]] = ..., before_values: _Optional[_Iterable[_Union[_value_pb2.Value, _Mapping]]] = ..., after_values: _Optional[_Iterable[_Union[_value_pb2.Value, _Mapping]]] = ...) -> None: ...

class UpdateStatement(_message.Message):
    __slots__ = ("table", "key_fields", "set_fields", "records")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELDS_FIELD_NUMBER: _ClassVar[int]
    SET_FIELDS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    table: TableMetadata
    key_fields: _containers.RepeatedCompositeFieldContainer[FieldMetadata]
    set_fields: _containers.RepeatedCompositeFieldContainer[FieldMetadata]
    records: _containers.RepeatedCompositeFieldContainer[UpdateRecord]
    def __init__(self, table: _Optional[_Union[TableMetadata, _Mapping]] = ..., key_fields: _Optional[_Iterable[_Union[FieldMetadata, _Mapping]]] = ..., set_fields: _Optional[_Iterable[_Union[FieldMetadata, _Mapping]]] = ..., records: _Optional[_Iterable[_Union[UpdateRecord, _Mapping]]] = ...) -> None: ...

class DeleteRecord(_message.Message):
    __slots__ = ("key_values", "before_values")
    KEY_VALUES_FIELD_NUMBER: _ClassVar[int]
    BEFORE_VALUES_FIELD_NUMBER: _ClassVar[int]
    key_values: _containers.RepeatedCompositeFieldContainer[_value_pb2.Value]
    before_values: _containers.RepeatedCompositeFieldContainer[_value_pb2.Value]
    def __init__(self, key_values: _Optional[_Iterable[_Union[_value_pb2.Value, _Mapping]]] = ..., before_values: _Optional[_Iterable[_Union[_value_pb2.Value, _Mapping]]] = ...) -> None: ...

class DeleteStatement(_message.Message):
    __slots__ = ("table", "key_fields", "fields", "records")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELDS_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    table: TableMetadata
    key_fields: _containers.RepeatedCompositeFieldContainer[FieldMetadata]
    fields: _containers.RepeatedCompositeFieldContainer[FieldMetadata]
    records: _containers.RepeatedCompositeFieldContainer[DeleteRecord]
    def __init__(self, table: _Optional[_Union[TableMetadata, _Mapping]] = ..., key_fields: _Optional[_Iterable[_Union[FieldMetadata, _Mapping]]] = ..., fields: _Optional[_Iterable[_Union[FieldMetadata, _Mapping]]] = ..., records: _Optional[_Iterable[_Union[DeleteRecord, _Mapping]]] = ...) -> None: ...

class SessionVariable(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: _value_pb2.Value
    def __init__(self, name: _Optional[str] = ..., value: _Optional[_Union[_value_pb2.Value, _Mapping]] = ...) -> None: ...

class SqlStatement(_message.Message):
    __slots__ = ("variables", "session_id", "default_schema", "query")
    VARIABLES_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    variables: _containers.RepeatedCompositeFieldContainer[SessionVariable]
    session_id: int
    default_schema: str
    query: str
    def __init__(self, variables: _Optional[_Iterable[_Union[SessionVariable, _Mapping]]] = ..., session_id: _Optional[int] = ..., default_schema: _Optional[str] = ..., query: _Optional[str] = ...) -> None: ...

class Statement(_message.Message):
    __slots__ = ("insert", "update", "delete", "sql", "apply_status")
    INSERT_FIELD_NUMBER: _ClassVar[int]
    UPDATE_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    SQL_FIELD_NUMBER: _ClassVar[int]
    APPLY_STATUS_FIELD_NUMBER: _ClassVar[int]
    insert: InsertStatement
    update: UpdateStatement
    delete: DeleteStatement
    sql: SqlStatement
    apply_status: _epoch_pb2.ApplyStatus
    def __init__(self, insert: _Optional[_Union[InsertStatement, _Mapping]] = ..., update: _Optional[_Union[UpdateStatement, _Mapping]] = ..., delete: _Optional[_Union[DeleteStatement, _Mapping]] = ..., sql: _Optional[_Union[SqlStatement, _Mapping]] = ..., apply_status: _Optional[_Union[_epoch_pb2.ApplyStatus, _Mapping]] = ...) -> None: ...
