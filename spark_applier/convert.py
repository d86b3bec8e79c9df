"""Rows of the Spark schema back to ``gateway.core.rowops`` values, for row-at-a-time targets.

A cell (``spark_applier.schema``) becomes the Python value ``rowops.python_value`` would give
for the same ``Value``: ``bool`` for BOOLEAN, the unsigned value for UNSIGNED (stored two's
complement), ``Decimal`` for DECIMAL, ``int`` ns for TIMESTAMP, ``str``/``bytes`` otherwise,
``None`` for null. So a SQLite or Cassandra writer fed from Spark sees exactly the ``RowOp``
values the dispatcher would hand it. ``column_values`` does the same for a whole Arrow column of
cells of one type at once (the bulk SQLite writer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from gateway import Column, Gtid, OpKind, RowOp, SqlText, TableRef, Variable

__all__ = ["cell_value", "column_values", "op_of_row"]

_BOOLEAN, _UNSIGNED, _DOUBLE, _DECIMAL, _BLOB, _UUID = 1, 3, 4, 5, 7, 12
_INT_TYPES = (2, 11)


def cell_value(cell: Mapping[str, Any]) -> Any:
    """The Python value of one cell dict (``None`` when null)."""
    t = cell["type"]
    i = cell["int_v"]
    if t in _INT_TYPES:
        return i
    if t == _BOOLEAN:
        return None if i is None else bool(i)
    if t == _UNSIGNED:
        return None if i is None else i % (1 << 64)
    if t == _DOUBLE:
        return cell["double_v"]
    if t in (_BLOB, _UUID):
        b = cell["bytes_v"]
        return None if b is None else bytes(b)
    text = cell["text_v"]
    if t == _DECIMAL and text is not None:
        return Decimal(text)
    if t == 0:  # a session variable holding null
        return None
    return text


def column_values(cells: pa.Array, field_type: int) -> list[Any]:
    """``[cell_value(c) for c in cells]`` for an Arrow array of non-null cell structs that all
    have type ``field_type``, computed column-wise (one Arrow kernel, one ``to_pylist``)."""
    def slot(name: str) -> pa.Array:
        return pc.struct_field(cells, name)

    out: list[Any]
    if field_type in _INT_TYPES:
        out = slot("int_v").to_pylist()
    elif field_type == _BOOLEAN:
        out = pc.not_equal(slot("int_v"), 0).to_pylist()
    elif field_type == _UNSIGNED:  # two's complement -> the unsigned value
        out = slot("int_v").cast(pa.uint64(), safe=False).to_pylist()
    elif field_type == _DOUBLE:
        out = slot("double_v").to_pylist()
    elif field_type in (_BLOB, _UUID):
        out = slot("bytes_v").to_pylist()
    elif field_type == 0:
        out = [None] * len(cells)
    elif field_type == _DECIMAL:
        out = [None if t is None else Decimal(t) for t in slot("text_v").to_pylist()]
    else:
        out = slot("text_v").to_pylist()
    return out


def _columns(cells: Sequence[Mapping[str, Any]] | None
             ) -> tuple[tuple[Column, ...], tuple[Any, ...]]:
    cells = cells or ()
    return (tuple(Column(c["name"], c["type"]) for c in cells),
            tuple(cell_value(c) for c in cells))


def op_of_row(row: Mapping[str, Any]) -> RowOp:
    """The ``RowOp`` of a row of the source schema or of a reduced row (as a dict)."""
    kind = OpKind[row["op"]]
    key_cols, key = _columns(row.get("key"))
    cols, values = _columns(row.get("values"))
    sql = None
    if kind is OpKind.SQL:
        q = row["sql"]
        sql = SqlText(q["query"], tuple(Variable(c["name"], c["type"], cell_value(c))
                                        for c in q["variables"] or ()),
                      q["default_schema"] or "", q["session_id"] or 0)
    new_key = _columns(row.get("new_key"))[1] if kind is OpKind.MOVE else None
    return RowOp(kind, TableRef(row["schema"] or "", row["table"] or ""), key_cols, key, cols,
                 values, Gtid(row["server_id"], row["trans_id"]), row["log_index"],
                 row["epoch"], row["author"], row["commit_ts_ns"], new_key, sql,
                 row["statement"])
