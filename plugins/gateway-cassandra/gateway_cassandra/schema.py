"""How Gateway tables map onto Cassandra, and the CQL text of every statement the applier runs.

Pure: names, types and strings in, CQL strings out.

Mapping (README.md has the table):

- schema ``s`` -> keyspace ``s`` (an empty schema -> the ``default_keyspace`` option); table
  ``t`` -> table ``t``. Cassandra keyspace and table names are ``[A-Za-z0-9_]{1,48}``; other
  names are refused with ``UnsupportedOperationError`` (the operation is dead-lettered, not
  renamed behind anyone's back) -- save one documented rename: a Gateway exceptions table
  ``t$EX`` (docs/conflicts.md) is the Cassandra table ``t__ex``. Every identifier is
  double-quoted, so case is kept (column names such as ``NDB$OP_TYPE`` or ``v$OLD`` too);
- the primary key -> ``PRIMARY KEY ((partition...), clustering...)``: by default every key
  column is in the partition key (one row per partition); the ``clustering`` option names key
  columns that become clustering columns instead, in order;
- column types from ``gateway.FieldType`` (``CQL_TYPES``): BOOLEAN boolean, INTEGER bigint,
  UNSIGNED varint (uint64 does not fit bigint), DOUBLE double, DECIMAL decimal, VARCHAR / DATE /
  TIME / DATETIME / JSON text (the log carries them as text), BLOB blob, TIMESTAMP bigint (ns
  since the epoch; CQL ``timestamp`` has ms only), UUID uuid.

Statements carry ``USING TIMESTAMP ?`` as their last bind marker; see ``gateway_cassandra.clock``
for the value.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gateway import (
    ApplierConfigError,
    Column,
    FieldType,
    TableRef,
    UnsupportedOperationError,
)

__all__ = [
    "CQL_TYPES",
    "STATUS_TABLE",
    "TableMapping",
    "add_column",
    "cql_value",
    "create_keyspace",
    "create_status_table",
    "create_table",
    "delete_row",
    "insert_row",
    "parse_clustering",
    "quote",
    "select_row",
    "status_insert",
    "update_row",
]

FT = FieldType
CQL_TYPES: dict[int, str] = {
    FT.FIELD_TYPE_BOOLEAN: "boolean",
    FT.FIELD_TYPE_INTEGER: "bigint",
    FT.FIELD_TYPE_UNSIGNED: "varint",
    FT.FIELD_TYPE_DOUBLE: "double",
    FT.FIELD_TYPE_DECIMAL: "decimal",
    FT.FIELD_TYPE_VARCHAR: "text",
    FT.FIELD_TYPE_BLOB: "blob",
    FT.FIELD_TYPE_DATE: "text",
    FT.FIELD_TYPE_TIME: "text",
    FT.FIELD_TYPE_DATETIME: "text",
    FT.FIELD_TYPE_TIMESTAMP: "bigint",
    FT.FIELD_TYPE_UUID: "uuid",
    FT.FIELD_TYPE_JSON: "text",
}

#: The apply-status table (in the ``status_keyspace``): origin server_id -> last applied GTID.
STATUS_TABLE = "gateway_apply_status"

_NAME = re.compile(r"[A-Za-z0-9_]{1,48}")


def quote(name: str) -> str:
    """``name`` as a double-quoted CQL identifier (case kept, ``"`` doubled)."""
    return '"' + name.replace('"', '""') + '"'


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
           clustering: Mapping[str, Sequence[str]]) -> TableMapping:
        """The mapping of ``ref``; ``clustering`` maps ``"schema.table"`` to column names.
        Raises ``UnsupportedOperationError`` for names Cassandra cannot hold."""
        keyspace = _checked(ref.schema or default_keyspace, "keyspace", ref)
        name = ref.name[:-3] + "__ex" if ref.name.endswith("$EX") else ref.name
        table = _checked(name, "table", ref)
        return cls(keyspace, table, tuple(clustering.get(f"{ref.schema}.{ref.name}", ())))

    @property
    def qualified(self) -> str:
        return f"{quote(self.keyspace)}.{quote(self.table)}"


def parse_clustering(text: str) -> dict[str, tuple[str, ...]]:
    """``"s.t=c1,c2;s.u=c3"`` -> ``{"s.t": ("c1", "c2"), "s.u": ("c3",)}``; raises
    ``ApplierConfigError`` for anything else."""
    out: dict[str, tuple[str, ...]] = {}
    for item in filter(None, (part.strip() for part in text.split(";"))):
        table, sep, cols = item.partition("=")
        names = tuple(c.strip() for c in cols.split(",") if c.strip())
        if not sep or "." not in table or not names:
            raise ApplierConfigError(
                f"applier 'cassandra': clustering item {item!r} is not schema.table=col1,col2")
        out[table.strip()] = names
    return out


def create_keyspace(keyspace: str, replication_factor: int) -> str:
    return (f"CREATE KEYSPACE IF NOT EXISTS {quote(keyspace)} WITH replication = "
            f"{{'class': 'SimpleStrategy', 'replication_factor': {replication_factor}}}")


def _cql_type(col: Column, table: TableRef) -> str:
    try:
        return CQL_TYPES[col.type]
    except KeyError:
        raise UnsupportedOperationError(
            f"table {table}: column {col.name!r} has field type {col.type}, which has no "
            f"Cassandra type") from None


def create_table(mapping: TableMapping, ref: TableRef, key_columns: Sequence[Column],
                 columns: Sequence[Column]) -> str:
    """``CREATE TABLE IF NOT EXISTS`` with the key and the given columns. Raises
    ``UnsupportedOperationError`` when the clustering option names a non-key column or
    leaves no partition key column."""
    key_names = [c.name for c in key_columns]
    unknown = [c for c in mapping.clustering if c not in key_names]
    if unknown:
        raise UnsupportedOperationError(
            f"table {ref}: clustering column {unknown[0]!r} is not a key column")
    partition = [n for n in key_names if n not in mapping.clustering]
    if not partition:
        raise UnsupportedOperationError(
            f"table {ref}: every key column is a clustering column; none is left for the "
            f"partition key")
    defs = [f"{quote(c.name)} {_cql_type(c, ref)}" for c in (*key_columns, *columns)]
    pk = "(" + ", ".join(quote(n) for n in partition) + ")"
    if mapping.clustering:
        pk += ", " + ", ".join(quote(n) for n in mapping.clustering)
    return (f"CREATE TABLE IF NOT EXISTS {mapping.qualified} ({', '.join(defs)}, "
            f"PRIMARY KEY ({pk}))")


def add_column(mapping: TableMapping, ref: TableRef, col: Column) -> str:
    return f"ALTER TABLE {mapping.qualified} ADD {quote(col.name)} {_cql_type(col, ref)}"


def _where(names: Sequence[str]) -> str:
    return " AND ".join(f"{quote(n)} = ?" for n in names)


def insert_row(mapping: TableMapping, names: Sequence[str]) -> str:
    """``INSERT`` of ``names`` (key columns first) ``USING TIMESTAMP ?``."""
    return (f"INSERT INTO {mapping.qualified} ({', '.join(quote(n) for n in names)}) "
            f"VALUES ({', '.join('?' for _ in names)}) USING TIMESTAMP ?")


def update_row(mapping: TableMapping, key_names: Sequence[str], names: Sequence[str]) -> str:
    """``UPDATE ... USING TIMESTAMP ? SET`` the non-key ``names`` ``WHERE`` the key; binds
    the timestamp first, then the values, then the key."""
    sets = ", ".join(f"{quote(n)} = ?" for n in names)
    return (f"UPDATE {mapping.qualified} USING TIMESTAMP ? SET {sets} "
            f"WHERE {_where(key_names)}")


def delete_row(mapping: TableMapping, key_names: Sequence[str]) -> str:
    """``DELETE`` (a row tombstone) ``USING TIMESTAMP ?`` (bound first), then the key."""
    return f"DELETE FROM {mapping.qualified} USING TIMESTAMP ? WHERE {_where(key_names)}"


def select_row(mapping: TableMapping, key_names: Sequence[str]) -> str:
    return f"SELECT * FROM {mapping.qualified} WHERE {_where(key_names)}"


def create_status_table(keyspace: str) -> str:
    return (f"CREATE TABLE IF NOT EXISTS {quote(keyspace)}.{quote(STATUS_TABLE)} ("
            f"server_id bigint PRIMARY KEY, trans_id bigint, log_index bigint, "
            f"statement int, epoch bigint, commit_ts_ns bigint)")


def status_insert(keyspace: str) -> str:
    return (f"INSERT INTO {quote(keyspace)}.{quote(STATUS_TABLE)} (server_id, trans_id, "
            f"log_index, statement, epoch, commit_ts_ns) VALUES (?, ?, ?, ?, ?, ?) "
            f"USING TIMESTAMP ?")


def cql_value(col: Column, value: Any) -> Any:
    """``value`` as the driver binds it for ``col``'s CQL type (UUID bytes -> ``uuid.UUID``;
    everything else as it is). Raises ``UnsupportedOperationError`` for a UUID that is not
    16 bytes."""
    if value is None or col.type != FT.FIELD_TYPE_UUID:
        return value
    try:
        return uuid.UUID(bytes=bytes(value))
    except ValueError:
        raise UnsupportedOperationError(
            f"column {col.name!r}: UUID value of {len(value)} bytes (expected 16)") from None
