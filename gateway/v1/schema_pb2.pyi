from gateway.v1 import value_pb2 as _value_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SchemaChangeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SCHEMA_CHANGE_KIND_UNSPECIFIED: _ClassVar[SchemaChangeKind]
    SCHEMA_CHANGE_KIND_CREATE: _ClassVar[SchemaChangeKind]
    SCHEMA_CHANGE_KIND_ADD_COLUMN: _ClassVar[SchemaChangeKind]
    SCHEMA_CHANGE_KIND_DROP_COLUMN: _ClassVar[SchemaChangeKind]
    SCHEMA_CHANGE_KIND_RENAME_COLUMN: _ClassVar[SchemaChangeKind]
    SCHEMA_CHANGE_KIND_DROP_TABLE: _ClassVar[SchemaChangeKind]
    SCHEMA_CHANGE_KIND_CHANGE_TYPE: _ClassVar[SchemaChangeKind]
    SCHEMA_CHANGE_KIND_CHANGE_PRIMARY_KEY: _ClassVar[SchemaChangeKind]
SCHEMA_CHANGE_KIND_UNSPECIFIED: SchemaChangeKind
SCHEMA_CHANGE_KIND_CREATE: SchemaChangeKind
SCHEMA_CHANGE_KIND_ADD_COLUMN: SchemaChangeKind
SCHEMA_CHANGE_KIND_DROP_COLUMN: SchemaChangeKind
SCHEMA_CHANGE_KIND_RENAME_COLUMN: SchemaChangeKind
SCHEMA_CHANGE_KIND_DROP_TABLE: SchemaChangeKind
SCHEMA_CHANGE_KIND_CHANGE_TYPE: SchemaChangeKind
SCHEMA_CHANGE_KIND_CHANGE_PRIMARY_KEY: SchemaChangeKind

class ColumnDef(_message.Message):
    __slots__ = ("name", "type", "default_value", "not_null")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_VALUE_FIELD_NUMBER: _ClassVar[int]
    NOT_NULL_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: _value_pb2.FieldType
    default_value: _value_pb2.Value
    not_null: bool
    def __init__(self, name: _Optional[str] = ..., type: _Optional[_Union[_value_pb2.FieldType, str]] = ..., default_value: _Optional[_Union[_value_pb2.Value, _Mapping]] = ..., not_null: _Optional[bool] = ...) -> None: ...

class TableDefinition(_message.Message):
    __slots__ = ("table", "version", "columns", "primary_key")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_KEY_FIELD_NUMBER: _ClassVar[int]
    table: str
    version: int
    columns: _containers.RepeatedCompositeFieldContainer[ColumnDef]
    primary_key: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, table: _Optional[str] = ..., version: _Optional[int] = ..., columns: _Optional[_Iterable[_Union[ColumnDef, _Mapping]]] = ..., primary_key: _Optional[_Iterable[str]] = ...) -> None: ...

class SchemaEvent(_message.Message):
    __slots__ = ("table", "version", "kind", "column", "old_name", "new_name", "definition", "origin", "implicit", "parent")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    OLD_NAME_FIELD_NUMBER: _ClassVar[int]
    NEW_NAME_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    IMPLICIT_FIELD_NUMBER: _ClassVar[int]
    PARENT_FIELD_NUMBER: _ClassVar[int]
    table: str
    version: int
    kind: SchemaChangeKind
    column: ColumnDef
    old_name: str
    new_name: str
    definition: TableDefinition
    origin: str
    implicit: bool
    parent: bytes
    def __init__(self, table: _Optional[str] = ..., version: _Optional[int] = ..., kind: _Optional[_Union[SchemaChangeKind, str]] = ..., column: _Optional[_Union[ColumnDef, _Mapping]] = ..., old_name: _Optional[str] = ..., new_name: _Optional[str] = ..., definition: _Optional[_Union[TableDefinition, _Mapping]] = ..., origin: _Optional[str] = ..., implicit: _Optional[bool] = ..., parent: _Optional[bytes] = ...) -> None: ...

class TableVersion(_message.Message):
    __slots__ = ("table", "version", "dropped", "implicit")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    IMPLICIT_FIELD_NUMBER: _ClassVar[int]
    table: str
    version: int
    dropped: bool
    implicit: bool
    def __init__(self, table: _Optional[str] = ..., version: _Optional[int] = ..., dropped: _Optional[bool] = ..., implicit: _Optional[bool] = ...) -> None: ...

class SchemaChangeRequest(_message.Message):
    __slots__ = ("table", "kind", "columns", "primary_key", "column", "old_name", "new_name", "base_version")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_KEY_FIELD_NUMBER: _ClassVar[int]
    COLUMN_FIELD_NUMBER: _ClassVar[int]
    OLD_NAME_FIELD_NUMBER: _ClassVar[int]
    NEW_NAME_FIELD_NUMBER: _ClassVar[int]
    BASE_VERSION_FIELD_NUMBER: _ClassVar[int]
    table: str
    kind: SchemaChangeKind
    columns: _containers.RepeatedCompositeFieldContainer[ColumnDef]
    primary_key: _containers.RepeatedScalarFieldContainer[str]
    column: ColumnDef
    old_name: str
    new_name: str
    base_version: int
    def __init__(self, table: _Optional[str] = ..., kind: _Optional[_Union[SchemaChangeKind, str]] = ..., columns: _Optional[_Iterable[_Union[ColumnDef, _Mapping]]] = ..., primary_key: _Optional[_Iterable[str]] = ..., column: _Optional[_Union[ColumnDef, _Mapping]] = ..., old_name: _Optional[str] = ..., new_name: _Optional[str] = ..., base_version: _Optional[int] = ...) -> None: ...

class SchemaChangeResponse(_message.Message):
    __slots__ = ("definition", "version", "log_index")
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    definition: TableDefinition
    version: int
    log_index: int
    def __init__(self, definition: _Optional[_Union[TableDefinition, _Mapping]] = ..., version: _Optional[int] = ..., log_index: _Optional[int] = ...) -> None: ...

class ShowTableRequest(_message.Message):
    __slots__ = ("table",)
    TABLE_FIELD_NUMBER: _ClassVar[int]
    table: str
    def __init__(self, table: _Optional[str] = ...) -> None: ...

class ShowTableResponse(_message.Message):
    __slots__ = ("definition", "dropped")
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    definition: TableDefinition
    dropped: bool
    def __init__(self, definition: _Optional[_Union[TableDefinition, _Mapping]] = ..., dropped: _Optional[bool] = ...) -> None: ...

class SchemaHistoryRequest(_message.Message):
    __slots__ = ("table",)
    TABLE_FIELD_NUMBER: _ClassVar[int]
    table: str
    def __init__(self, table: _Optional[str] = ...) -> None: ...

class SchemaHistoryResponse(_message.Message):
    __slots__ = ("events", "lost", "lost_causes")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    LOST_CAUSES_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[SchemaEvent]
    lost: _containers.RepeatedCompositeFieldContainer[SchemaEvent]
    lost_causes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, events: _Optional[_Iterable[_Union[SchemaEvent, _Mapping]]] = ..., lost: _Optional[_Iterable[_Union[SchemaEvent, _Mapping]]] = ..., lost_causes: _Optional[_Iterable[str]] = ...) -> None: ...
