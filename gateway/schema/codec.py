"""Schema events to and from the log: ``encode_event`` gives the tagged bytes of a
``gateway.v1.SchemaEvent`` (type tag ``SCHEMA_EVENT``) that the Raft log and the channels
carry, ``decode_event`` reads them back; ``event_id`` is an event's identity (what a child's
``parent`` names). Pure: no I/O.

Errors are ``SchemaError`` (a ``ValueError``) naming the field, e.g.
``SchemaEvent.definition.columns[2].type: invalid field type 99``.
"""

from __future__ import annotations

import hashlib
from typing import cast

from gateway.core import messages
from gateway.core.rowops import CASE_OF_TYPE, value_message
from gateway.core.sql_value import SqlValue
from gateway.schema.model import KINDS, Column, SchemaError, SchemaEvent, TableDef
from gateway.v1 import schema_pb2, value_pb2

__all__ = ["column_from_proto", "column_to_proto", "decode_event", "definition_from_proto",
           "definition_to_proto", "encode_event", "event_from_proto", "event_id",
           "event_to_proto", "field_type", "type_name"]

FT = value_pb2.FieldType
_PREFIX = "FIELD_TYPE_"
#: The FieldType names a column may have (without prefix), e.g. "INTEGER".
TYPE_NAMES = tuple(FT.Name(t)[len(_PREFIX):] for t in CASE_OF_TYPE)


def field_type(name: str) -> int:
    """The ``FieldType`` number of a type name without prefix; ``SchemaError`` if none."""
    try:
        number = FT.Value(_PREFIX + name.upper())
    except ValueError:
        raise SchemaError(f"unknown column type {name!r} (one of {', '.join(TYPE_NAMES)})"
                          ) from None
    if number not in CASE_OF_TYPE:
        raise SchemaError(f"unknown column type {name!r} (one of {', '.join(TYPE_NAMES)})")
    return number


def type_name(number: int) -> str:
    """The type name without prefix of a ``FieldType`` number; ``SchemaError`` if invalid."""
    if number not in CASE_OF_TYPE:
        raise SchemaError(f"invalid field type {number}")
    return FT.Name(number)[len(_PREFIX):]


def column_to_proto(column: Column) -> schema_pb2.ColumnDef:
    ftype = field_type(column.type)
    msg = schema_pb2.ColumnDef(name=column.name, type=cast(value_pb2.FieldType, ftype),
                               not_null=not column.nullable)
    if column.default is not None:
        try:
            # a wrong Python type is caught below (the proto setter raises TypeError)
            msg.default_value.CopyFrom(value_message(ftype, cast(SqlValue, column.default)))
        except (TypeError, ValueError) as exc:
            raise SchemaError(f"column {column.name!r}: default {column.default!r} does not "
                              f"fit {column.type} ({exc})") from None
    return msg


def column_from_proto(msg: schema_pb2.ColumnDef, path: str = "column") -> Column:
    try:
        tname = type_name(msg.type)
    except SchemaError as exc:
        raise SchemaError(f"{path}.type: {exc}") from None
    default: object = None
    if msg.HasField("default_value"):
        case = msg.default_value.WhichOneof("kind")
        if case is None:
            raise SchemaError(f"{path}.default_value: value has no case set")
        if case != "null_value":
            if case != CASE_OF_TYPE[msg.type]:
                raise SchemaError(f"{path}.default_value: {case} in a {tname} column")
            default = getattr(msg.default_value, case)
    return Column(msg.name, tname, default, not msg.not_null)


def definition_to_proto(d: TableDef) -> schema_pb2.TableDefinition:
    return schema_pb2.TableDefinition(table=d.table, version=d.version,
                                      columns=[column_to_proto(c) for c in d.columns],
                                      primary_key=list(d.primary_key))


def definition_from_proto(msg: schema_pb2.TableDefinition,
                          path: str = "definition") -> TableDef:
    return TableDef(msg.table, msg.version,
                    tuple(column_from_proto(c, f"{path}.columns[{i}]")
                          for i, c in enumerate(msg.columns)),
                    tuple(msg.primary_key))


def event_to_proto(e: SchemaEvent) -> schema_pb2.SchemaEvent:
    if e.kind not in KINDS:
        raise SchemaError(f"{e.table}: unknown schema event kind {e.kind!r}")
    msg = schema_pb2.SchemaEvent(table=e.table, version=e.version,
                                 kind=cast(schema_pb2.SchemaChangeKind,
                                           KINDS.index(e.kind) + 1),
                                 old_name=e.old_name, new_name=e.new_name, origin=e.origin,
                                 implicit=e.implicit, parent=e.parent)
    if e.column is not None:
        msg.column.CopyFrom(column_to_proto(e.column))
    if e.definition is not None:
        msg.definition.CopyFrom(definition_to_proto(e.definition))
    return msg


def event_from_proto(msg: schema_pb2.SchemaEvent) -> SchemaEvent:
    if not 1 <= msg.kind <= len(KINDS):
        raise SchemaError(f"SchemaEvent.kind: invalid kind {msg.kind} for {msg.table!r}")
    return SchemaEvent(
        table=msg.table, version=msg.version, kind=KINDS[msg.kind - 1],
        column=column_from_proto(msg.column, "SchemaEvent.column")
        if msg.HasField("column") else None,
        old_name=msg.old_name, new_name=msg.new_name,
        definition=definition_from_proto(msg.definition, "SchemaEvent.definition")
        if msg.HasField("definition") else None,
        origin=msg.origin, implicit=msg.implicit, parent=msg.parent)


def encode_event(e: SchemaEvent) -> bytes:
    """The tagged bytes (``TypeTag.SCHEMA_EVENT`` + deterministic serialization) of ``e``."""
    return messages.pack(event_to_proto(e))


def decode_event(data: bytes | bytearray | memoryview) -> SchemaEvent:
    """The event of a committed log entry of tag ``SCHEMA_EVENT``; ``SchemaError`` (or a
    ``messages.MessageDecodeError``, both ``ValueError``) when the bytes are not one."""
    msg = messages.unpack(data)
    if not isinstance(msg, schema_pb2.SchemaEvent):
        raise SchemaError(f"not a schema event: type tag {data[0]}")
    return event_from_proto(msg)


def event_id(e: SchemaEvent) -> bytes:
    """The identity of ``e``: 16 bytes of SHA-256 over its encoding (which includes its
    parent's id, its origin and its version, so two events made anywhere differ)."""
    return hashlib.sha256(encode_event(e)).digest()[:16]
