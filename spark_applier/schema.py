"""The row schema of the ``gateway_wal`` data source, and typed views of its value cells.

One row per row operation of the log (the unreduced "original statements" of
``gateway.core.rowops.statement_ops``), plus marker rows for segmented transactions.

Why values are a list of *cells* and not typed columns or JSON: one log holds many tables with
different columns, so a single DataFrame cannot carry each table's columns as typed Spark
columns without a schema registry the log does not have. JSON would lose exactness (64-bit
unsigned values, decimals as floats, bytes as base64) and costs a parse per use. A cell is a
``struct<name, type, int_v, double_v, text_v, bytes_v>`` that keeps the declared
``gateway.v1.FieldType`` and the exact value in the one physical slot the type uses, so nothing
is lost, Arrow builds it column by column, and ``typed_value`` turns it into a typed Spark
column where the target has one schema per table (Parquet, Delta, Cassandra):

==============================  ===============  ===========================================
FieldType                       slot             typed Spark column
==============================  ===============  ===========================================
BOOLEAN                         int_v (0/1)      boolean
INTEGER, TIMESTAMP (ns)         int_v            bigint
UNSIGNED                        int_v (two's     decimal(20,0) (exact up to 2**64 - 1)
                                complement)
DOUBLE                          double_v         double
DECIMAL                         text_v           string (canonical text; exact)
VARCHAR, DATE, TIME, DATETIME,  text_v           string
JSON
BLOB, UUID                      bytes_v          binary
==============================  ===============  ===========================================

A null value has every slot null. Marker rows (``op`` = ``SEGMENT``) describe one segment of a
multi-segment transaction: its ``segment_id``, ``end_segment``, ``rollback`` and the number of
statements it holds (``segment_statements``); they carry no table or key. Single-segment
transactions need no marker, and a single-segment rollback yields no rows at all.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = [
    "ARROW_SCHEMA",
    "CELL",
    "MARKER_OP",
    "OPS",
    "SCHEMA_DDL",
    "quoted",
    "spark_type_of",
    "typed_value",
]

#: ``op`` of a marker row describing one segment of a multi-segment transaction.
MARKER_OP = "SEGMENT"
#: Every ``op`` value (``gateway.core.rowops.OpKind`` names plus the marker).
OPS = ("INSERT", "UPDATE", "DELETE", "UPSERT", "SQL", "MOVE", MARKER_OP)

CELL = pa.struct([
    pa.field("name", pa.string()),
    pa.field("type", pa.int32()),
    pa.field("int_v", pa.int64()),
    pa.field("double_v", pa.float64()),
    pa.field("text_v", pa.string()),
    pa.field("bytes_v", pa.binary()),
])
_CELLS = pa.list_(CELL)
_SQL = pa.struct([
    pa.field("query", pa.string()),
    pa.field("default_schema", pa.string()),
    pa.field("session_id", pa.int64()),
    pa.field("variables", _CELLS),
])

#: Arrow schema of the batches the reader yields (column order = ``SCHEMA_DDL``).
ARROW_SCHEMA = pa.schema([
    pa.field("log_index", pa.int64()),       # WAL entry index; record ordinal in a log file
    pa.field("term", pa.int64()),            # Raft term (0 in a standalone log file)
    pa.field("segment", pa.int64()),         # WAL segment (its first index); 0 for a log file
    pa.field("position", pa.int64()),        # byte position of the record in its file
    pa.field("server_id", pa.int64()),       # GTID origin cluster
    pa.field("trans_id", pa.int64()),        # GTID transaction id
    pa.field("epoch", pa.int64()),
    pa.field("author", pa.int64()),
    pa.field("commit_ts_ns", pa.int64()),
    pa.field("segment_id", pa.int32()),      # 1-based segment of the transaction
    pa.field("end_segment", pa.bool_()),
    pa.field("rollback", pa.bool_()),
    pa.field("segment_statements", pa.int32()),  # statements in this segment
    pa.field("statement", pa.int32()),       # 1-based statement number within the segment
    pa.field("op_no", pa.int32()),           # 0-based operation number within the segment
    pa.field("op", pa.string()),             # one of OPS
    pa.field("schema", pa.string()),
    pa.field("table", pa.string()),
    pa.field("key", _CELLS),                 # aligned with the key columns
    pa.field("values", _CELLS),              # non-key columns the operation sets
    pa.field("new_key", _CELLS),             # MOVE only
    pa.field("sql", _SQL),                   # SQL only
])

_CELL_DDL = "array<struct<name: string, type: int, int_v: bigint, double_v: double, " \
            "text_v: string, bytes_v: binary>>"
#: The same schema as a Spark DDL string (what ``DataSource.schema`` returns).
SCHEMA_DDL = ", ".join([
    "log_index bigint", "term bigint", "segment bigint", "position bigint",
    "server_id bigint", "trans_id bigint", "epoch bigint", "author bigint",
    "commit_ts_ns bigint", "segment_id int", "end_segment boolean", "rollback boolean",
    "segment_statements int", "statement int", "op_no int", "op string", "schema string",
    "table string", f"key {_CELL_DDL}", f"values {_CELL_DDL}", f"new_key {_CELL_DDL}",
    f"sql struct<query: string, default_schema: string, session_id: bigint, "
    f"variables: {_CELL_DDL}>",
])

# FieldType numbers (gateway.v1.value_pb2.FieldType), spelled out to keep this module light.
_BOOLEAN, _INTEGER, _UNSIGNED, _DOUBLE, _DECIMAL = 1, 2, 3, 4, 5
_BLOB, _TIMESTAMP, _UUID = 7, 11, 12
_SPARK_TYPES = {
    _BOOLEAN: "boolean", _INTEGER: "bigint", _UNSIGNED: "decimal(20,0)", _DOUBLE: "double",
    _TIMESTAMP: "bigint", _BLOB: "binary", _UUID: "binary",
}


def quoted(name: str) -> str:
    """``name`` as a Spark SQL identifier (backquoted, a backquote doubled)."""
    return "`" + name.replace("`", "``") + "`"


def spark_type_of(field_type: int) -> str:
    """The Spark SQL type of a column of ``field_type`` in typed targets (see the table)."""
    return _SPARK_TYPES.get(field_type, "string")


def typed_value(cell_sql: str, field_type: int) -> str:
    """A Spark SQL expression turning the cell expression ``cell_sql`` into the typed value
    of a ``field_type`` column (null for a null cell)."""
    if field_type == _BOOLEAN:
        return f"({cell_sql}.int_v <> 0)"
    if field_type in (_INTEGER, _TIMESTAMP):
        return f"{cell_sql}.int_v"
    if field_type == _UNSIGNED:
        return (f"CAST(CAST({cell_sql}.int_v AS DECIMAL(20,0)) + CASE WHEN {cell_sql}.int_v < 0 "
                f"THEN CAST(18446744073709551616 AS DECIMAL(20,0)) ELSE 0 END AS DECIMAL(20,0))")
    if field_type == _DOUBLE:
        return f"{cell_sql}.double_v"
    if field_type in (_BLOB, _UUID):
        return f"{cell_sql}.bytes_v"
    return f"{cell_sql}.text_v"
