from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NullValue(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NULL_VALUE: _ClassVar[NullValue]

class FieldType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FIELD_TYPE_UNSPECIFIED: _ClassVar[FieldType]
    FIELD_TYPE_BOOLEAN: _ClassVar[FieldType]
    FIELD_TYPE_INTEGER: _ClassVar[FieldType]
    FIELD_TYPE_UNSIGNED: _ClassVar[FieldType]
    FIELD_TYPE_DOUBLE: _ClassVar[FieldType]
    FIELD_TYPE_DECIMAL: _ClassVar[FieldType]
    FIELD_TYPE_VARCHAR: _ClassVar[FieldType]
    FIELD_TYPE_BLOB: _ClassVar[FieldType]
    FIELD_TYPE_DATE: _ClassVar[FieldType]
    FIELD_TYPE_TIME: _ClassVar[FieldType]
    FIELD_TYPE_DATETIME: _ClassVar[FieldType]
    FIELD_TYPE_TIMESTAMP: _ClassVar[FieldType]
    FIELD_TYPE_UUID: _ClassVar[FieldType]
    FIELD_TYPE_JSON: _ClassVar[FieldType]
NULL_VALUE: NullValue
FIELD_TYPE_UNSPECIFIED: FieldType
FIELD_TYPE_BOOLEAN: FieldType
FIELD_TYPE_INTEGER: FieldType
FIELD_TYPE_UNSIGNED: FieldType
FIELD_TYPE_DOUBLE: FieldType
FIELD_TYPE_DECIMAL: FieldType
FIELD_TYPE_VARCHAR: FieldType
FIELD_TYPE_BLOB: FieldType
FIELD_TYPE_DATE: FieldType
FIELD_TYPE_TIME: FieldType
FIELD_TYPE_DATETIME: FieldType
FIELD_TYPE_TIMESTAMP: FieldType
FIELD_TYPE_UUID: FieldType
FIELD_TYPE_JSON: FieldType

class Value(_message.Message):
    __slots__ = ("null_value", "bool_value", "int_value", "uint_value", "double_value", "decimal_value", "string_value", "bytes_value", "timestamp_ns")
    NULL_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT_VALUE_FIELD_NUMBER: _ClassVar[int]
    UINT_VALUE_FIELD_NUMBER: _ClassVar[int]
    DOUBLE_VALUE_FIELD_NUMBER: _ClassVar[int]
    DECIMAL_VALUE_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    BYTES_VALUE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_NS_FIELD_NUMBER: _ClassVar[int]
    null_value: NullValue
    bool_value: bool
    int_value: int
    uint_value: int
    double_value: float
    decimal_value: str
    string_value: str
    bytes_value: bytes
    timestamp_ns: int
    def __init__(self, null_value: _Optional[_Union[NullValue, str]] = ..., bool_value: _Optional[bool] = ..., int_value: _Optional[int] = ..., uint_value: _Optional[int] = ..., double_value: _Optional[float] = ..., decimal_value: _Optional[str] = ..., string_value: _Optional[str] = ..., bytes_value: _Optional[bytes] = ..., timestamp_ns: _Optional[int] = ...) -> None: ...
