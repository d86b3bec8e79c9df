"""How Gateway tables map onto Cassandra, and the CQL text of every statement the applier runs.

Pure: names, types and strings in, CQL strings out. The mapping itself -- keyspace/table names,
column types by the log's type tag names, identifier quoting, value binding -- is
``gateway.cassandra_mapping``, shared with the Spark bulk apply's Cassandra target so
that both write the same tables (README.md has the table). This module adds what only the
streaming applier needs: the ``clustering`` option and the statement text.

- the primary key -> ``PRIMARY KEY ((partition...), clustering...)``: by default every key
  column is in the partition key (one row per partition); the ``clustering`` option names key
  columns that become clustering columns instead, in order;

Statements carry ``USING TIMESTAMP ?`` as their last bind marker; see ``gateway_cassandra.clock``
for the value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gateway.cassandra_mapping as shared
from gateway import (
    ApplierConfigError,
    Column,
    FieldType,
    TableRef,
)
from gateway.cassandra_mapping import TableMapping, quote

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

#: ``CQL_TYPE_BY_NAME`` keyed by tag number, for callers holding ``FieldType`` values.
CQL_TYPES: dict[int, str] = {FieldType.Value(name): cql
                             for name, cql in shared.CQL_TYPE_BY_NAME.items()}

#: The apply-status table (in the ``status_keyspace``): origin server_id -> last applied GTID.
STATUS_TABLE = "gateway_apply_status"


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
    return shared.column_type(col, table)


def create_table(mapping: TableMapping, ref: TableRef, key_columns: Sequence[Column],
                 columns: Sequence[Column]) -> str:
    """``CREATE TABLE IF NOT EXISTS`` with the key and the given columns. Raises
    ``UnsupportedOperationError`` when the clustering option names a non-key column or
    leaves no partition key column."""
    return shared.create_table_cql(
        mapping, str(ref), [(c.name, _cql_type(c, ref)) for c in (*key_columns, *columns)],
        [c.name for c in key_columns])


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
    """``value`` as the driver binds it for ``col``'s CQL type (see
    ``cassandra_mapping.cql_value``)."""
    return shared.cql_value(col.type, value, col.name)
