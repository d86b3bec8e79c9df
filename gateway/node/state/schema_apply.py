"""Table definitions as replicated state: applying a ``SCHEMA_EVENT`` entry (docs/schema.md).

Store keys (all in the ``m`` namespace, written in the batch of the entry that makes them):

- ``m sd:<schema.table>``: the table's current definition (a ``gateway.v1.TableDefinition``;
  one without columns is a dropped table, kept for its version);
- ``m sh:<schema.table>:<version u64 BE>``: its history, one event per version (the log index
  that applied it, u64 BE, then the event's tagged bytes).

The first-seen shape (``s<schema.table>``, what ``validation`` checks writes against) follows
every event, so a declared table's writes are checked against its definition, on the leader
before anything is acknowledged and again by every replica at apply. A table first written
without ``CREATE TABLE`` gets an implicit version 1 (``implicit_event``) recorded by the same
batch as its first row.

Applying an event is deterministic: the event must follow the table's current version and
its change must apply to the current definition (``gateway.schema.apply.apply_event``), or
the entry is refused (``x<index>`` with ``refused: table: reason``; nothing applied), which
is what the leader reports as FAILED_PRECONDITION. An applied change rewrites the table's
stored rows into the new shape in the same batch (an added column gets its default in every
row, a dropped column leaves them, a renamed one is renamed; ``DROP TABLE`` deletes them),
like MySQL's copying ALTER: every reader of the store -- reads, scans, seeds, fingerprints,
conflict detection -- sees one shape.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import cast

from google.protobuf.message import DecodeError

from gateway.core.lsm.format import prefix_end
from gateway.core.rowops import value_message
from gateway.core.sql_value import SqlValue
from gateway.node.base.validation import TableSchema
from gateway.node.state import keys
from gateway.node.state.store_ops import Ops, meta_op
from gateway.schema.apply import apply_event
from gateway.schema.codec import (
    decode_event,
    definition_from_proto,
    definition_to_proto,
    encode_event,
    event_from_proto,
    event_id,
    field_type,
    type_name,
)
from gateway.schema.model import Column, SchemaError, SchemaEvent, TableDef
from gateway.v1 import gateway_pb2, schema_pb2, value_pb2

__all__ = ["HistoryItem", "SchemaApplied", "TableState", "apply_schema_entry", "definition_of",
           "events_by_index",
           "implicit_event", "install_histories", "load_definitions", "read_history",
           "rewrite_rows", "schema_from_row",
           "schema_history_of", "table_schema_of"]

_U64 = struct.Struct(">Q")
_DEF = "sd:"
_HIST = "sh:"


@dataclass(frozen=True)
class TableState:
    """A table's definition (None when dropped), version and newest event's id (``head``:
    the parent of its next change); ``implicit``: its newest event is a first write's shape."""

    definition: TableDef | None
    version: int
    head: bytes
    implicit: bool = False


@dataclass(frozen=True)
class HistoryItem:
    """One applied event of a table's history and the log index that applied it."""

    index: int
    event: SchemaEvent


@dataclass(frozen=True)
class SchemaApplied:
    """What applying one ``SCHEMA_EVENT`` entry gives: the new table states and first-seen
    shapes (both new mappings; None when the entry changed nothing), or the refusal
    (``refused``: the reason naming the table) when it was refused."""

    tables: dict[str, TableState] | None = None
    schemas: dict[str, TableSchema] | None = None
    refused: str = ""
    table: str = ""


def definition_key(table: str) -> bytes:
    return keys.meta_key(_DEF + table)


def history_prefix(table: str) -> bytes:
    return keys.meta_key(f"{_HIST}{table}:")


def table_schema_of(d: TableDef) -> TableSchema:
    """The first-seen shape ``validation`` checks writes against, of definition ``d``."""
    types = {c.name: field_type(c.type) for c in d.columns}
    return TableSchema(tuple((k, types[k]) for k in d.primary_key), types,
                       frozenset(c.name for c in d.columns
                                 if not c.nullable and c.name not in d.primary_key))


def schema_from_row(row: gateway_pb2.Row) -> TableSchema:
    """The first-seen shape stored as ``row`` (``txn_apply.schema_to_row``)."""
    key_fields = tuple((f.name, f.type) for f in row.key_fields)
    cols = dict(key_fields)
    cols.update((f.name, f.type) for f in row.fields)
    return TableSchema(key_fields, cols)


def definition_of(name: str, schema: TableSchema, version: int = 1) -> TableDef:
    """The definition a first-seen shape implies (an undeclared table's): its key columns
    first (not nullable), then the others in the order first written, all nullable without
    a default."""
    key_names = {n for n, _ in schema.key_fields}
    cols = [Column(n, type_name(t), None, False) for n, t in schema.key_fields]
    cols += [Column(n, type_name(t)) for n, t in schema.columns.items() if n not in key_names]
    return TableDef(name, version, tuple(cols), tuple(n for n, _ in schema.key_fields))


def implicit_event(name: str, schema: TableSchema, origin: str, last_version: int = 0,
                   parent: bytes = b"") -> SchemaEvent:
    """The implicit ``create`` of a table first written without a definition (``parent``:
    the table's ``drop_table`` when it had been defined before)."""
    d = definition_of(name, schema, last_version + 1)
    return SchemaEvent(name, d.version, "create", definition=d, origin=origin, implicit=True,
                       parent=parent)


def load_definitions(scan_prefix: Callable[[bytes], Iterable[tuple[bytes, bytes]]],
                     schemas: Mapping[str, TableSchema]) -> dict[str, TableState]:
    """The tables' states as stored; a table with a first-seen shape but no stored definition
    (a store older than definitions) gets its implicit version 1 in memory, alike on every
    replica (they hold the same shapes)."""
    prefix = keys.meta_key(_DEF)
    out: dict[str, TableState] = {}
    for k, v in scan_prefix(prefix):
        name = k[len(prefix):].decode()
        msg = schema_pb2.TableDefinition.FromString(v)
        d = definition_from_proto(msg) if msg.columns else None
        head, implicit = b"", False
        for _hk, hv in scan_prefix(history_prefix(name)):  # the newest is the last
            e = decode_event(hv[8:])
            head, implicit = event_id(e), e.implicit
        out[name] = TableState(d, msg.version, head, implicit)
    for name, schema in schemas.items():
        if name not in out:
            e = implicit_event(name, schema, "")
            out[name] = TableState(e.definition, 1, b"", True)
    return out


def read_history(scan_prefix: Callable[[bytes], Iterable[tuple[bytes, bytes]]], table: str
                 ) -> list[HistoryItem]:
    """The applied events of ``table``, oldest first."""
    return [HistoryItem(_U64.unpack(v[:8])[0], decode_event(v[8:]))
            for _k, v in scan_prefix(history_prefix(table))]


def events_by_index(scan_prefix: Callable[[bytes], Iterable[tuple[bytes, bytes]]],
                    tables: Iterable[str]) -> dict[int, list[tuple[SchemaEvent, int]]]:
    """The applied events of ``tables`` by the log index that applied them, each with epoch 0
    (the entry's own): what the change feed sends before an entry's records."""
    out: dict[int, list[tuple[SchemaEvent, int]]] = {}
    for name in tables:
        for h in read_history(scan_prefix, name):
            out.setdefault(h.index, []).append((h.event, 0))
    return out


def schema_history_of(scan_prefix: Callable[[bytes], Iterable[tuple[bytes, bytes]]]
                      ) -> list[schema_pb2.SchemaEvent]:
    """Every table's applied events, per table oldest first (what a seed carries)."""
    return [schema_pb2.SchemaEvent.FromString(v[9:])  # log index (8), then the type tag
            for _k, v in scan_prefix(keys.meta_key(_HIST))]


def install_histories(events: Iterable[schema_pb2.SchemaEvent], index: int, ops: Ops,
                      scan_keys: Callable[[bytes, bytes], Iterator[bytes]]
                      ) -> dict[str, TableState]:
    """Install a seed's schema histories (``schema_history_of`` of the source) at log
    ``index``: each table's history here is replaced by the source's and its definition is
    the source's newest. Returns the tables' new states; an event that does not decode is
    skipped (the table then keeps the state its events before it give)."""
    by_table: dict[str, list[SchemaEvent]] = {}
    for msg in events:
        try:
            e = event_from_proto(msg)
        except (SchemaError, ValueError):
            continue
        by_table.setdefault(e.table, []).append(e)
    out: dict[str, TableState] = {}
    for table, evs in by_table.items():
        prefix = history_prefix(table)
        for k in scan_keys(prefix, prefix_end(prefix) or b""):
            ops.append(meta_op(k, None))
        after: TableDef | None = None
        for e in evs:
            after = e.definition
            record_event(e, after, index, ops)
        last = evs[-1]
        out[table] = TableState(after, last.version, event_id(last), last.implicit)
    return out


def record_event(e: SchemaEvent, after: TableDef | None, index: int, ops: Ops) -> None:
    """Write the definition and history keys of applied event ``e``."""
    d = definition_to_proto(after) if after is not None else \
        schema_pb2.TableDefinition(table=e.table, version=e.version)
    ops.append(meta_op(definition_key(e.table), d.SerializeToString()))
    ops.append(meta_op(history_prefix(e.table) + _U64.pack(e.version),
                       _U64.pack(index) + encode_event(e)))


def apply_schema_entry(tables: Mapping[str, TableState], schemas: Mapping[str, TableSchema],
                       data: bytes, index: int, ops: Ops,
                       scan: Callable[[bytes, bytes | None], Iterator[tuple[bytes, bytes]]],
                       shape_row: Callable[[str, TableSchema], bytes]) -> SchemaApplied:
    """Apply the ``SCHEMA_EVENT`` entry ``data`` at log ``index`` (see the module docstring),
    appending its store operations to ``ops``; ``scan(lo, hi)`` reads the store's rows as
    they stand before this entry (the caller wrote the batch so far); ``shape_row`` is the
    stored form of a first-seen shape (``txn_apply.schema_to_row``)."""
    try:
        e = decode_event(data)
    except (SchemaError, DecodeError, ValueError) as exc:
        return SchemaApplied(refused=f"not a schema event: {exc}", table="event")
    have = tables.get(e.table)
    current = have.definition if have is not None else None
    last = have.version if have is not None else 0
    # A stored shape without a state cannot happen (load_definitions covers every shape);
    # a table whose shape exists is never undefined.
    try:
        after = apply_event(current, e, last)
    except SchemaError as exc:
        return SchemaApplied(refused=str(exc), table=e.table)
    if have is not None and e.parent != have.head:
        return SchemaApplied(refused=f"{e.table}: the change was made on another version "
                                     f"(concurrent change): the table is at version {last}",
                             table=e.table)
    rewrite_rows(e, after, ops, scan)
    record_event(e, after, index, ops)
    new_tables = dict(tables)
    new_tables[e.table] = TableState(after, e.version, event_id(e), e.implicit)
    new_schemas = dict(schemas)
    if after is None:
        new_schemas.pop(e.table, None)
        ops.append(meta_op(keys.schema_key(e.table), None))
    else:
        shape = table_schema_of(after)
        new_schemas[e.table] = shape
        ops.append(meta_op(keys.schema_key(e.table), shape_row(e.table, shape)))
    return SchemaApplied(new_tables, new_schemas)


def rewrite_rows(e: SchemaEvent, after: TableDef | None, ops: Ops,
                  scan: Callable[[bytes, bytes | None], Iterator[tuple[bytes, bytes]]]
                  ) -> None:
    """The store operations that put the table's rows into the shape after ``e``."""
    if e.kind == "create":
        return
    schema_name, _, table_name = e.table.partition(".")
    prefix = keys.table_prefix(schema_name, table_name)
    for k, v in scan(prefix, prefix_end(prefix)):
        row = gateway_pb2.Row.FromString(v)
        meta = (row.epoch, row.author, row.commit_timestamp_ns)
        if e.kind == "drop_table" or after is None:
            ops.append((k, None, *meta))
            continue
        if e.kind == "add_column" and e.column is not None:
            if any(f.name == e.column.name for f in row.fields):
                continue
            ftype = field_type(e.column.type)
            row.fields.add(name=e.column.name, type=cast(value_pb2.FieldType, ftype))
            # the default was checked against the type when the change was planned
            row.values.append(value_message(ftype, cast(SqlValue, e.column.default)))
        elif e.kind == "drop_column" and e.column is not None:
            at = [i for i, f in enumerate(row.fields) if f.name == e.column.name]
            if not at:
                continue
            del row.fields[at[0]]
            del row.values[at[0]]
        elif e.kind == "rename_column":
            for f in (*row.key_fields, *row.fields):
                if f.name == e.old_name:
                    f.name = e.new_name
        ops.append((k, row.SerializeToString(), *meta))
