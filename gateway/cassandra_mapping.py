"""One Cassandra mapping for every path that writes the log's tables to Cassandra.

Both the streaming ``gateway-cassandra`` plugin and the Spark bulk apply's Cassandra target
(``spark_applier.cassandra``) write through this module, so a Spark backfill followed by
streaming (or the reverse, or both at once) addresses the same tables and orders every write
on the same clock: they converge on the log's final state, and a stale write from either path
never wins. It lives in ``gateway`` (pure: no driver import) because both can import it: the
plugin depends on ``gateway`` only, and the Spark applier must not need the plugin's
distribution (nor the plugin the Spark applier).

**Names.** Schema ``s`` -> keyspace ``s`` (tables without a schema go to a default keyspace);
table ``t`` -> table ``t``; a ``t$EX`` exceptions table -> ``t__ex``. Names must be
``[A-Za-z0-9_]{1,48}`` (Cassandra's rule): others raise ``UnsupportedOperationError``, never
renamed. Identifiers are double-quoted, so case is kept.

**Types**, by the ``FieldType`` tag's *name* (``CQL_TYPE_BY_NAME``): BOOLEAN boolean, INTEGER
bigint, UNSIGNED varint (uint64 does not fit bigint), DOUBLE double, DECIMAL decimal, VARCHAR /
DATE / TIME / DATETIME / JSON text (the log carries them as text), BLOB blob, TIMESTAMP bigint
(ns; CQL timestamp has ms), UUID uuid. A tag without a CQL type is an error, never text.

**The clock.** Cassandra keeps, per cell, the write with the highest timestamp (a tombstone wins
a tie). Every write carries ``USING TIMESTAMP`` = ``write_timestamp(...)`` of the change it
applies, deletes included::

    sequence  = (log_index * 2**16 + min(statement, 2**16 - 1)) * 2**8 + min(sub, 2**8 - 1)
    timestamp = sequence * 2 + phase

- ``log_index`` is the commit point of the change's transaction (its last segment's index),
  so a later transaction always wins; ``statement`` is the 1-based statement number within the
  transaction, continued across segments; both come from the log position, so both paths
  compute the same value for the same change;
- ``sub`` counts earlier writes to the same row from the same ``(log_index, statement)``:
  only a statement that writes a row twice, as key-shifting updates (MOVEs) do (``id = id + 1``
  moves 3->4 then 2->3). Both paths apply MOVEs one by one in log order and count with
  ``RowClock``; a row change that is not a MOVE takes the count of the statement's earlier
  changes of the row (0 in any log a SQL statement produces);
- ``phase`` is 0 for the row tombstone that clears a row before an UPSERT writes exactly its
  columns, 1 for every other write.

**Schema events** (issue 57, docs/schema.md): ``create_table_cql`` is the one ``CREATE TABLE``
of a table (from the operations' columns or from a definition) and ``schema_change_cql`` the
CQL of one ``SchemaEvent``: CREATE from the definition (a table that exists gets the columns
it lacks), ``ALTER TABLE ADD``, ``ALTER TABLE DROP``, ``ALTER TABLE RENAME`` of a primary-key
column, ``DROP TABLE``. What CQL cannot do is said in one line each: a column default (CQL
has none: rows written before the change read null, not the default) is a ``note`` of a
change otherwise made; a rename of a regular column (CQL renames only primary-key columns)
raises ``UnsupportedOperationError`` and changes nothing.

``log_index`` may reach ``MAX_LOG_INDEX`` (2**38 - 1, 2.7e11 entries) before the timestamp
leaves the signed 64-bit range; 65,535 statements per transaction and 255 writes of a row per
statement are ordered exactly (beyond, they share the last value). The values are far below
wall-clock microseconds: the tables belong to the gateway, and a client writing them with
``now()`` timestamps would always win.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway.appliers.contract import UnsupportedOperationError
from gateway.core.rowops import Column, RowOp, TableRef
from gateway.schema.model import Column as SchemaColumn
from gateway.schema.model import SchemaEvent
from gateway.v1.value_pb2 import FieldType

__all__ = [
    "CQL_TYPE_BY_NAME",
    "DROPPED_COLUMNS_CQL",
    "MAX_LOG_INDEX",
    "PHASE_BITS",
    "STATEMENT_BITS",
    "SUB_BITS",
    "RowClock",
    "SchemaCql",
    "TableMapping",
    "column_type",
    "cql_type",
    "cql_value",
    "create_table_cql",
    "legacy_spark_table",
    "quote",
    "schema_change_cql",
    "write_timestamp",
]

#: The CQL type of each log type tag, keyed by the tag's name (``FieldType.Name``).
CQL_TYPE_BY_NAME: dict[str, str] = {
    "FIELD_TYPE_BOOLEAN": "boolean",
    "FIELD_TYPE_INTEGER": "bigint",
    "FIELD_TYPE_UNSIGNED": "varint",
    "FIELD_TYPE_DOUBLE": "double",
    "FIELD_TYPE_DECIMAL": "decimal",
    "FIELD_TYPE_VARCHAR": "text",
    "FIELD_TYPE_BLOB": "blob",
    "FIELD_TYPE_DATE": "text",
    "FIELD_TYPE_TIME": "text",
    "FIELD_TYPE_DATETIME": "text",
    "FIELD_TYPE_TIMESTAMP": "bigint",
    "FIELD_TYPE_UUID": "uuid",
    "FIELD_TYPE_JSON": "text",
}

STATEMENT_BITS = 16
SUB_BITS = 8
PHASE_BITS = 1
MAX_LOG_INDEX = (2**63 - 1) >> (STATEMENT_BITS + SUB_BITS + PHASE_BITS)
"""The largest log index the timestamp formula can encode (2**38 - 1)."""

_NAME = re.compile(r"[A-Za-z0-9_]{1,48}")


def quote(name: str) -> str:
    """``name`` as a double-quoted CQL identifier (case kept, ``"`` doubled)."""
    return '"' + name.replace('"', '""') + '"'


def cql_type(field_type: int, where: str = "") -> str:
    """The CQL type of log type tag ``field_type``, looked up by the tag's name. Raises
    ``UnsupportedOperationError`` (naming ``where``, e.g. the table and column) for a tag with
    no CQL type (UNSPECIFIED, or a number this build does not know)."""
    try:
        name = FieldType.Name(field_type)
    except ValueError:
        name = f"unknown tag {field_type}"
    try:
        return CQL_TYPE_BY_NAME[name]
    except KeyError:
        raise UnsupportedOperationError(
            f"{where + ': ' if where else ''}field type {name} has no Cassandra type") from None


def cql_value(field_type: int, value: Any, name: str = "") -> Any:
    """``value`` as the driver binds it for ``field_type``'s CQL type (UUID bytes ->
    ``uuid.UUID``; everything else as it is). Raises ``UnsupportedOperationError`` for a UUID
    that is not 16 bytes."""
    if value is None or field_type != FieldType.FIELD_TYPE_UUID or isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(bytes=bytes(value))
    except ValueError:
        raise UnsupportedOperationError(
            f"column {name!r}: UUID value of {len(value)} bytes (expected 16)") from None


def _checked(name: str, what: str, table: TableRef) -> str:
    if not _NAME.fullmatch(name):
        raise UnsupportedOperationError(
            f"table {table}: {what} name {name!r} is not a Cassandra name ([A-Za-z0-9_], at "
            f"most 48 characters)")
    return name


@dataclass(frozen=True, slots=True)
class TableMapping:
    """Where one Gateway table lives: ``keyspace``, ``table`` (unquoted) and which key
    columns are clustering columns."""

    keyspace: str
    table: str
    clustering: tuple[str, ...] = ()

    @classmethod
    def of(cls, ref: TableRef, default_keyspace: str,
           clustering: Mapping[str, Sequence[str]] | None = None) -> TableMapping:
        """The mapping of ``ref``; ``clustering`` maps ``"schema.table"`` to column names.
        Raises ``UnsupportedOperationError`` for names Cassandra cannot hold."""
        keyspace = _checked(ref.schema or default_keyspace, "keyspace", ref)
        name = ref.name[:-3] + "__ex" if ref.name.endswith("$EX") else ref.name
        table = _checked(name, "table", ref)
        return cls(keyspace, table, tuple((clustering or {}).get(f"{ref.schema}.{ref.name}", ())))

    @property
    def qualified(self) -> str:
        return f"{quote(self.keyspace)}.{quote(self.table)}"


def legacy_spark_table(keyspace: str, ref: TableRef) -> tuple[str, str] | None:
    """Where the Spark target before the shared mapping wrote ``ref``: ``(keyspace,
    "<schema>_<table>")``, or None when the old name equals the new one (no schema). Used to
    refuse, with one line, a keyspace holding data of the old mapping (see docs/spark.md)."""
    return (keyspace, f"{ref.schema}_{ref.name}") if ref.schema else None


def write_timestamp(log_index: int, statement: int, sub: int = 0, phase: int = 1) -> int:
    """The write timestamp of the formula in the module docstring. Raises ``ValueError`` for a
    log index outside ``0..MAX_LOG_INDEX`` or a phase other than 0 or 1."""
    if not 0 <= log_index <= MAX_LOG_INDEX:
        raise ValueError(f"log index {log_index} is outside 0..{MAX_LOG_INDEX}")
    if phase not in (0, 1):
        raise ValueError(f"phase must be 0 or 1, not {phase}")
    statement = min(max(statement, 0), (1 << STATEMENT_BITS) - 1)
    sub = min(max(sub, 0), (1 << SUB_BITS) - 1)
    sequence = (((log_index << STATEMENT_BITS) | statement) << SUB_BITS) | sub
    return (sequence << PHASE_BITS) | phase


class RowClock:
    """Hands out ``sub`` for each write to a row (see the module docstring); thread-safe.

    Remembers the last ``(log_index, statement)`` written per row for the ``capacity`` most
    recently written rows. Handing the same operation over again (a retry of the batch) returns
    the ``sub`` it had, so a retry does not move its own writes past later ones.
    """

    def __init__(self, capacity: int = 100_000) -> None:
        self.capacity = capacity
        self._rows: OrderedDict[Hashable, tuple[int, int, int, RowOp]] = OrderedDict()
        self._lock = threading.Lock()

    def sub(self, row: Hashable, op: RowOp) -> int:
        """The ``sub`` of ``op``'s write to ``row`` (a row other than ``op.row_id`` for the
        target of a MOVE)."""
        with self._lock:
            last = self._rows.get(row)
            sub = 0
            if last is not None and (last[0], last[1]) == (op.log_index, op.statement):
                sub = last[2] if last[3] == op else last[2] + 1
            self._rows[row] = (op.log_index, op.statement, sub, op)
            self._rows.move_to_end(row)
            if len(self._rows) > self.capacity:
                self._rows.popitem(last=False)
            return sub


def column_type(col: Column, table: TableRef) -> str:
    """``cql_type`` of ``col`` of ``table``, naming both in the error."""
    return cql_type(col.type, f"table {table}: column {col.name!r}")


def _schema_type(col: SchemaColumn, table: str) -> str:
    """The CQL type of a definition's column (its type is a ``FieldType`` name without
    prefix, ``"INTEGER"``)."""
    where = f"table {table}: column {col.name!r}"
    try:
        tag = FieldType.Value("FIELD_TYPE_" + col.type)
    except ValueError:
        raise UnsupportedOperationError(f"{where}: field type {col.type} has no Cassandra "
                                        f"type") from None
    return cql_type(tag, where)


def create_table_cql(mapping: TableMapping, table: str, columns: Sequence[tuple[str, str]],
                     key: Sequence[str]) -> str:
    """``CREATE TABLE IF NOT EXISTS`` of ``columns`` (``(name, CQL type)``, key columns among
    them) with primary key ``key``: every key column in the partition key but those the
    mapping's ``clustering`` names, which are clustering columns in that order. Raises
    ``UnsupportedOperationError`` when ``clustering`` names a non-key column or leaves no
    partition key column."""
    unknown = [c for c in mapping.clustering if c not in key]
    if unknown:
        raise UnsupportedOperationError(
            f"table {table}: clustering column {unknown[0]!r} is not a key column")
    partition = [n for n in key if n not in mapping.clustering]
    if not partition:
        raise UnsupportedOperationError(
            f"table {table}: every key column is a clustering column; none is left for the "
            f"partition key")
    defs = [f"{quote(n)} {t}" for n, t in columns]
    pk = "(" + ", ".join(quote(n) for n in partition) + ")"
    if mapping.clustering:
        pk += ", " + ", ".join(quote(n) for n in mapping.clustering)
    return (f"CREATE TABLE IF NOT EXISTS {mapping.qualified} ({', '.join(defs)}, "
            f"PRIMARY KEY ({pk}))")


#: The columns Cassandra records as dropped from a table (parameters: keyspace, table). A
#: dropped column that is not a column again is left out of the rows of older versions that
#: still name it, rather than added back (the plugin's and the Spark target's rule).
DROPPED_COLUMNS_CQL = ("SELECT column_name FROM system_schema.dropped_columns "
                       "WHERE keyspace_name = %s AND table_name = %s")


@dataclass(frozen=True, slots=True)
class SchemaCql:
    """The CQL of one schema event: ``statements`` to run in order, and ``notes``, one line
    each, on what CQL made differently (a default it cannot hold)."""

    statements: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _type_notes(mapping: TableMapping, table: str, columns: Sequence[SchemaColumn],
                existing_types: Mapping[str, str] | None) -> tuple[str, ...]:
    """One note per column of ``columns`` that ``mapping``'s table already holds with another
    CQL type (``existing_types``: column -> the type Cassandra reports): the losing side of
    concurrent definitions on two clusters made it, and CQL cannot change a column's type."""
    if not existing_types:
        return ()
    notes = []
    for c in columns:
        have = existing_types.get(c.name)
        want = _schema_type(c, table)
        if have is not None and have != want:
            notes.append(
                f"table {table}: column {c.name!r} is {have} in {mapping.keyspace}."
                f"{mapping.table} but {want} in this definition (a concurrent change on "
                f"another cluster made it first and lost): CQL cannot change a column's "
                f"type, so it stays {have} and the rows whose {c.name!r} is not {have} are "
                f"refused (dead letters); drop the table in Cassandra and apply again from "
                f"the start to take the new type")
    return tuple(notes)


def _default_note(table: str, col: SchemaColumn) -> str:
    return (f"table {table}: column {col.name!r} has default {col.default!r} but CQL has no "
            f"column defaults: rows written before it read null")


def schema_change_cql(mapping: TableMapping, event: SchemaEvent,
                      existing: frozenset[str] | None, key: Sequence[str] = (),
                      existing_types: Mapping[str, str] | None = None) -> SchemaCql:
    """The CQL making ``event`` in ``mapping``'s table, which has the columns ``existing``
    (None: no such table) and primary-key columns ``key``; idempotent: what is made already
    is left out. ``existing_types`` (column -> CQL type, as Cassandra reports it): a column
    the event defines that exists with another type gets a note saying so (``_type_notes``).
    Raises ``UnsupportedOperationError`` for what CQL cannot do at all (a rename of a
    regular column) or a type without a CQL type."""
    t = event.table
    kind = event.kind
    if kind == "drop_table":
        return SchemaCql((f"DROP TABLE IF EXISTS {mapping.qualified}",))
    d = event.definition
    if existing is None or kind == "create":
        if d is None:
            raise UnsupportedOperationError(f"{kind} of table {t} without its definition")
        keys = set(d.primary_key)
        notes = tuple(_default_note(t, c) for c in d.columns
                      if c.default is not None and c.name not in keys)
        if existing is None:
            cols = [(c.name, _schema_type(c, t)) for c in d.columns]
            return SchemaCql((create_table_cql(mapping, t, cols, d.primary_key),), notes)
        notes += _type_notes(mapping, t, d.columns, existing_types)
        return SchemaCql(tuple(
            f"ALTER TABLE {mapping.qualified} ADD {quote(c.name)} {_schema_type(c, t)}"
            for c in d.columns if c.name not in existing), notes)
    col = event.column
    if kind == "add_column" and col is not None:
        if col.name in existing:
            return SchemaCql((), _type_notes(mapping, t, (col,), existing_types))
        notes = (_default_note(t, col),) if col.default is not None else ()
        return SchemaCql((f"ALTER TABLE {mapping.qualified} ADD {quote(col.name)} "
                          f"{_schema_type(col, t)}",), notes)
    if kind == "drop_column" and col is not None:
        if col.name not in existing:
            return SchemaCql()
        return SchemaCql((f"ALTER TABLE {mapping.qualified} DROP {quote(col.name)}",))
    if kind == "rename_column":
        old, new = event.old_name, event.new_name
        if old not in existing:
            return SchemaCql()  # renamed already
        if old not in key:
            raise UnsupportedOperationError(
                f"table {t}: CQL renames only primary-key columns: column {old!r} keeps its "
                f"name in {mapping.keyspace}.{mapping.table}, and rows naming {new!r} get a "
                f"new column")
        return SchemaCql((f"ALTER TABLE {mapping.qualified} RENAME {quote(old)} TO "
                          f"{quote(new)}",))
    raise UnsupportedOperationError(f"unknown schema change {kind!r} of table {t}")
