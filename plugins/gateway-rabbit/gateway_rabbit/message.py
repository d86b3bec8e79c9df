"""The RabbitMQ message of one row operation: routing key, body, headers and message id.

Pure: a ``RowOp`` in, an ``OutgoingMessage`` out, and the inverse for consumers. Nothing here
touches the network.

Routing key: ``schema.table.op`` -- the operation's schema and table names and its kind in lower
case (``insert``, ``update``, ``delete``, ``upsert``, ``move``, ``sql``). A SQL operation has no
table: its key is ``<default_schema>._.sql`` (``_`` for an empty schema too). Topic routing
splits keys at dots, so a dot, ``*`` or ``#`` inside a name is percent-encoded (``%2E``, ``%2A``,
``%23``) and ``%`` itself as ``%25``.

Body, by format:

- ``frame`` (default): the transport frame of docs/formats/transport-frame.md -- length, type
  tag 115 (``TypeTag.ROW_OPERATION``), the deterministic serialization of the
  ``gateway.v1.RowOperation`` (``gateway.core.rowops.op_to_proto``) and a CRC-32. Content type
  ``application/x-gateway-frame``; ``decode_body`` turns it back into the ``RowOp``.
- ``json``: one UTF-8 JSON object (``op_json``), content type ``application/json``.

Schema (issue 57): a row message's headers carry ``x-gateway-schema-version``, the version of
its table's definition when the row was applied (1 for a table without a schema change: a
table first written without ``CREATE TABLE`` has the implicit version 1); a SQL operation has
no table and no such header. A schema event is a message of its own (``encode_schema``):
routing key ``schema.table.schema`` (so ``shop.orders.*`` receives a table's rows and its
changes, ``*.*.schema`` every change), body the transport frame of the log's
``gateway.v1.SchemaEvent`` (type tag 5, ``TypeTag.SCHEMA_EVENT``) or, in ``json`` format, the
object of ``schema_json``; headers ``x-gateway-schema-version`` (the version after the
change), ``x-gateway-schema-change`` (``create``, ``add_column``, ``drop_column``,
``rename_column``, ``drop_table``) and ``x-gateway-schema-origin``; message id
``schema-<schema.table>-<version>-<digest>``. ``decode_schema_body`` reads one back.

Message id: ``<server_id>-<trans_id>-<statement>-<digest>``, where ``digest`` is 16 hex digits
of BLAKE2b over the serialized ``RowOperation`` (table, key, kind, values, GTID, log index). It
depends only on the operation, so a re-published operation (a retry, a replay after a restart)
carries the id it had the first time, and consumers de-duplicate on it; two different
operations never share one.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gateway import (
    Column,
    FieldType,
    Gtid,
    OpKind,
    RowOp,
    RowOperation,
    SchemaColumn,
    SchemaEvent,
    SqlText,
    TableDef,
    TableRef,
    TypeTag,
    Variable,
    decode_frame,
    decode_schema_event,
    encode_frame,
    encode_schema_event,
    op_from_proto,
    op_to_proto,
)

__all__ = [
    "CONTENT_TYPES",
    "FORMATS",
    "MessageFormatError",
    "OutgoingMessage",
    "decode_body",
    "decode_schema_body",
    "encode",
    "encode_schema",
    "message_id",
    "op_from_json",
    "op_json",
    "routing_key",
    "schema_json",
    "schema_routing_key",
]

FT = FieldType
FORMATS = ("frame", "json")
CONTENT_TYPES = {"frame": "application/x-gateway-frame", "json": "application/json"}
_MAX_LONG = 2**63 - 1
_ESCAPES = str.maketrans({"%": "%25", ".": "%2E", "*": "%2A", "#": "%23"})


class MessageFormatError(ValueError):
    """A message body is not a row operation in the named format; ``str()`` is one line."""


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """What the publisher sends for one operation."""

    routing_key: str
    body: bytes
    message_id: str
    headers: dict[str, int | str]
    content_type: str
    commit_ts_ns: int
    message_type: str = "gateway.v1.RowOperation"  # the AMQP ``type`` property


def _word(name: str) -> str:
    return name.translate(_ESCAPES) if name else "_"


def routing_key(op: RowOp) -> str:
    """``schema.table.op`` for ``op``; see the module docstring."""
    if op.kind is OpKind.SQL:
        schema = op.sql.default_schema if op.sql is not None else ""
        return f"{_word(schema)}._.sql"
    return f"{_word(op.table.schema)}.{_word(op.table.name)}.{op.kind.name.lower()}"


def _serialized(op: RowOp) -> bytes:
    return op_to_proto(op).SerializeToString(deterministic=True)


def message_id(op: RowOp, serialized: bytes | None = None) -> str:
    """The de-duplication id of ``op`` (``serialized`` may pass its ``RowOperation`` bytes)."""
    data = _serialized(op) if serialized is None else serialized
    digest = hashlib.blake2b(data, digest_size=8).hexdigest()
    return f"{op.gtid.server_id}-{op.gtid.trans_id}-{op.statement}-{digest}"


def _header_int(value: int) -> int | str:
    return value if value <= _MAX_LONG else str(value)  # AMQP tables hold signed 64-bit ints


def headers(op: RowOp) -> dict[str, int | str]:
    """The AMQP headers: GTID (as ``"server_id:trans_id"`` and as numbers), epoch, author,
    commit timestamp (ns), log index and statement number; for a row of a new applier's
    backfill from the store (``op.backfill``: an UPSERT of the stored row, not a change) also
    ``x-gateway-backfill: "true"`` and ``x-gateway-snapshot-index``, the log index of the
    store snapshot it was read from (the row's own ``x-gateway-log-index`` is that of its
    last change)."""
    out = _headers(op)
    if op.backfill:
        out["x-gateway-backfill"] = "true"
        out["x-gateway-snapshot-index"] = _header_int(op.backfill)
    return out


def _headers(op: RowOp) -> dict[str, int | str]:
    return {
        "x-gateway-gtid": f"{op.gtid.server_id}:{op.gtid.trans_id}",
        "x-gateway-server-id": _header_int(op.gtid.server_id),
        "x-gateway-trans-id": _header_int(op.gtid.trans_id),
        "x-gateway-epoch": _header_int(op.epoch),
        "x-gateway-author": _header_int(op.author),
        "x-gateway-commit-ts-ns": _header_int(op.commit_ts_ns),
        "x-gateway-log-index": _header_int(op.log_index),
        "x-gateway-statement": _header_int(op.statement),
    }


def encode(op: RowOp, fmt: str = "frame", schema_version: int | None = None
           ) -> OutgoingMessage:
    """The message for ``op`` in format ``fmt`` (``frame`` or ``json``); ``ValueError`` for
    another format. ``schema_version``: the header ``x-gateway-schema-version`` (left out
    when None)."""
    if fmt not in CONTENT_TYPES:
        raise ValueError(f"unknown message format {fmt!r} (expected frame or json)")
    serialized = _serialized(op)
    if fmt == "frame":
        body = encode_frame(TypeTag.ROW_OPERATION, serialized)
    else:
        body = json.dumps(op_json(op), separators=(",", ":"), sort_keys=True).encode()
    head = headers(op)
    if schema_version is not None:
        head["x-gateway-schema-version"] = _header_int(schema_version)
    return OutgoingMessage(routing_key(op), body, message_id(op, serialized), head,
                           CONTENT_TYPES[fmt], op.commit_ts_ns)


# --- schema events --------------------------------------------------------------------------


def _split(table: str) -> tuple[str, str]:
    schema, dot, name = table.partition(".")
    return (schema, name) if dot else ("", table)


def schema_routing_key(event: SchemaEvent) -> str:
    """``schema.table.schema`` for a change of table ``schema.table``."""
    schema, name = _split(event.table)
    return f"{_word(schema)}.{_word(name)}.schema"


def _schema_column(c: SchemaColumn) -> dict[str, Any]:
    return {"name": c.name, "type": c.type, "default": _json_value(c.default),
            "nullable": c.nullable}


def schema_json(event: SchemaEvent) -> dict[str, Any]:
    """The JSON object of a schema event: ``kind`` ``"SCHEMA"``, ``change`` (the event's
    kind), ``schema``, ``table``, ``version``, ``column`` (``{name, type, default,
    nullable}`` or null), ``old_name``, ``new_name``, ``definition`` (``{columns,
    primary_key}`` after the change, null after ``drop_table``), ``origin``, ``implicit``."""
    schema, name = _split(event.table)
    d = event.definition
    return {
        "kind": "SCHEMA", "change": event.kind, "schema": schema, "table": name,
        "version": event.version,
        "column": _schema_column(event.column) if event.column is not None else None,
        "old_name": event.old_name, "new_name": event.new_name,
        "definition": None if d is None else {
            "columns": [_schema_column(c) for c in d.columns],
            "primary_key": list(d.primary_key)},
        "origin": event.origin, "implicit": event.implicit,
    }


def encode_schema(event: SchemaEvent, fmt: str = "frame", now_ns: int = 0
                  ) -> OutgoingMessage:
    """The message of a schema event (module docstring); ``now_ns`` its AMQP timestamp."""
    if fmt not in CONTENT_TYPES:
        raise ValueError(f"unknown message format {fmt!r} (expected frame or json)")
    serialized = encode_schema_event(event)[1:]  # after its type tag
    if fmt == "frame":
        body = encode_frame(TypeTag.SCHEMA_EVENT, serialized)
    else:
        body = json.dumps(schema_json(event), separators=(",", ":"), sort_keys=True).encode()
    digest = hashlib.blake2b(serialized, digest_size=8).hexdigest()
    head: dict[str, int | str] = {
        "x-gateway-schema-version": _header_int(event.version),
        "x-gateway-schema-change": event.kind,
        "x-gateway-schema-origin": event.origin,
    }
    return OutgoingMessage(schema_routing_key(event), body,
                           f"schema-{event.table}-{event.version}-{digest}", head,
                           CONTENT_TYPES[fmt], now_ns, "gateway.v1.SchemaEvent")


def _column_of(obj: dict[str, Any]) -> SchemaColumn:
    return SchemaColumn(obj["name"], obj["type"], obj["default"], obj["nullable"])


def decode_schema_body(body: bytes, content_type: str | None = None) -> SchemaEvent:
    """The ``SchemaEvent`` of a schema message's body (either format, as ``decode_body``).
    Raises ``MessageFormatError``. A JSON body's BLOB default comes back as its base64
    text: read the frame format where that matters."""
    if content_type == CONTENT_TYPES["json"] or (content_type is None and body[:1] == b"{"):
        try:
            obj = json.loads(body)
            table = f"{obj['schema']}.{obj['table']}" if obj["schema"] else obj["table"]
            d = obj["definition"]
            return SchemaEvent(
                table, obj["version"], obj["change"],
                column=_column_of(obj["column"]) if obj["column"] is not None else None,
                old_name=obj["old_name"], new_name=obj["new_name"],
                definition=None if d is None else TableDef(
                    table, obj["version"], tuple(_column_of(c) for c in d["columns"]),
                    tuple(d["primary_key"])),
                origin=obj["origin"], implicit=obj["implicit"])
        except (KeyError, TypeError, ValueError) as exc:
            raise MessageFormatError(f"JSON body is not a schema event: {exc!r}") from None
    try:
        tag, message, end = decode_frame(body)
    except ValueError as exc:
        raise MessageFormatError(f"frame body: {exc}") from None
    if end != len(body) or tag != TypeTag.SCHEMA_EVENT:
        raise MessageFormatError(f"frame body: type tag {tag}, expected "
                                 f"{int(TypeTag.SCHEMA_EVENT)} (SchemaEvent)")
    try:
        return decode_schema_event(bytes((tag,)) + bytes(message))
    except Exception as exc:  # DecodeError or a SchemaError naming the field
        raise MessageFormatError(f"frame body: {exc}") from None


# --- JSON form ------------------------------------------------------------------------------


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Decimal):
        return str(value)
    return value


def _from_json(field_type: int, value: Any) -> Any:
    if value is None:
        return None
    if field_type in (FT.FIELD_TYPE_BLOB, FT.FIELD_TYPE_UUID):
        return base64.b64decode(value)
    if field_type == FT.FIELD_TYPE_DECIMAL:
        return Decimal(value)
    return value


def _columns(cols: tuple[Column, ...], values: tuple[Any, ...]) -> list[dict[str, Any]]:
    return [{"name": c.name, "type": FT.Name(c.type).removeprefix("FIELD_TYPE_"),
             "value": _json_value(v)} for c, v in zip(cols, values, strict=True)]


def op_json(op: RowOp) -> dict[str, Any]:
    """The JSON object of ``op``: ``kind``, ``schema``, ``table``, ``key`` and ``columns``
    (lists of ``{name, type, value}``; BLOB and UUID values base64, DECIMAL as a string),
    ``new_key`` (MOVE) or ``sql`` (SQL) or null, and the metadata ``gtid`` (``[server_id,
    trans_id]``), ``log_index``, ``epoch``, ``author``, ``commit_ts_ns``, ``statement`` --
    and ``backfill`` (the snapshot index of a backfill row) for a backfill row only."""
    sql = None
    if op.sql is not None:
        sql = {"query": op.sql.query, "default_schema": op.sql.default_schema,
               "session_id": op.sql.session_id,
               "variables": [{"name": v.name, "type": FT.Name(v.type).removeprefix("FIELD_TYPE_"),
                              "value": _json_value(v.value)} for v in op.sql.variables]}
    obj = {
        "kind": op.kind.name, "schema": op.table.schema, "table": op.table.name,
        "key": _columns(op.key_columns, op.key), "columns": _columns(op.columns, op.values),
        "new_key": (_columns(op.key_columns, op.new_key) if op.new_key is not None else None),
        "sql": sql, "gtid": [op.gtid.server_id, op.gtid.trans_id], "log_index": op.log_index,
        "epoch": op.epoch, "author": op.author, "commit_ts_ns": op.commit_ts_ns,
        "statement": op.statement,
    }
    if op.backfill:
        obj["backfill"] = op.backfill
    return obj


def _parse_columns(items: list[dict[str, Any]]) -> tuple[tuple[Column, ...], tuple[Any, ...]]:
    cols = tuple(Column(i["name"], FT.Value("FIELD_TYPE_" + i["type"])) for i in items)
    return cols, tuple(_from_json(c.type, i["value"]) for c, i in zip(cols, items, strict=True))


def op_from_json(obj: dict[str, Any]) -> RowOp:
    """Inverse of ``op_json``; raises ``MessageFormatError`` for an object it did not make."""
    try:
        key_cols, key = _parse_columns(obj["key"])
        cols, values = _parse_columns(obj["columns"])
        new_key = _parse_columns(obj["new_key"])[1] if obj["new_key"] is not None else None
        sql = None
        if obj["sql"] is not None:
            s = obj["sql"]
            variables = tuple(
                Variable(v["name"], FT.Value("FIELD_TYPE_" + v["type"]),
                         _from_json(FT.Value("FIELD_TYPE_" + v["type"]), v["value"]))
                for v in s["variables"])
            sql = SqlText(s["query"], variables, s["default_schema"], s["session_id"])
        return RowOp(OpKind[obj["kind"]], TableRef(obj["schema"], obj["table"]), key_cols, key,
                     cols, values, Gtid(*obj["gtid"]), obj["log_index"], obj["epoch"],
                     obj["author"], obj["commit_ts_ns"], new_key, sql, obj["statement"],
                     obj.get("backfill", 0))
    except (KeyError, TypeError, ValueError) as exc:
        raise MessageFormatError(f"JSON body is not a row operation: {exc!r}") from None


def decode_body(body: bytes, content_type: str | None = None) -> RowOp:
    """The ``RowOp`` of a message body in either format (chosen by ``content_type``, or by the
    first byte when it is absent: ``{`` is JSON). Raises ``MessageFormatError``."""
    if content_type == CONTENT_TYPES["json"] or (content_type is None and body[:1] == b"{"):
        try:
            obj = json.loads(body)
        except ValueError as exc:
            raise MessageFormatError(f"JSON body does not parse: {exc}") from None
        return op_from_json(obj)
    try:
        tag, message, end = decode_frame(body)
    except ValueError as exc:
        raise MessageFormatError(f"frame body: {exc}") from None
    if end != len(body):
        raise MessageFormatError(f"frame body: {len(body) - end} bytes after the frame")
    if tag != TypeTag.ROW_OPERATION:
        raise MessageFormatError(f"frame body: type tag {tag}, expected "
                                 f"{int(TypeTag.ROW_OPERATION)} (RowOperation)")
    try:
        return op_from_proto(RowOperation.FromString(message))
    except Exception as exc:  # DecodeError or MalformedTransactionError
        raise MessageFormatError(f"frame body: {exc}") from None
