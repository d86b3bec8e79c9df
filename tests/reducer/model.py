"""Test helpers: build transactions tersely and apply operations to a reference store model.

The model is the specification the reducer is checked against: a store is a dict from
``(table, key)`` to ``{column: value}``; operations have the semantics stated in
``gateway.core.rowops``; a SQL operation appends a snapshot of the whole store to the trace, so
two runs that agree on the trace applied the same state at every barrier.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from gateway.core.rowops import OpKind, RowOp, TableRef
from gateway.v1 import gtid_pb2, statement_pb2, transaction_pb2, value_pb2

FT = value_pb2.FieldType
Store = dict[tuple[TableRef, tuple[Any, ...]], dict[str, Any]]

COLUMN_TYPES = {"id": FT.FIELD_TYPE_INTEGER, "a": FT.FIELD_TYPE_INTEGER,
                "b": FT.FIELD_TYPE_VARCHAR}


def val(v: Any) -> value_pb2.Value:
    if v is None:
        return value_pb2.Value(null_value=value_pb2.NULL_VALUE)
    if isinstance(v, str):
        return value_pb2.Value(string_value=v)
    return value_pb2.Value(int_value=v)


def _fields(names: Sequence[str]) -> list[statement_pb2.FieldMetadata]:
    return [statement_pb2.FieldMetadata(name=n, type=COLUMN_TYPES.get(n, FT.FIELD_TYPE_VARCHAR))
            for n in names]


def insert(table: str, rows: Iterable[dict[str, Any]]) -> statement_pb2.Statement:
    """INSERT rows ``{"id": k, col: v, ...}`` into ``s.table`` (key column ``id``)."""
    rows = list(rows)
    cols = [c for c in rows[0] if c != "id"]
    st = statement_pb2.InsertStatement(
        table=statement_pb2.TableMetadata(schema_name="s", table_name=table),
        key_fields=_fields(["id"]), fields=_fields(cols))
    for r in rows:
        st.records.add(key_values=[val(r["id"])], after_values=[val(r[c]) for c in cols])
    return statement_pb2.Statement(insert=st)


def update(table: str, cols: Sequence[str], rows: Iterable[tuple[Any, Sequence[Any]]]
           ) -> statement_pb2.Statement:
    """UPDATE ``s.table`` SET cols (which may include ``id``) for ``(key, values)`` rows."""
    st = statement_pb2.UpdateStatement(
        table=statement_pb2.TableMetadata(schema_name="s", table_name=table),
        key_fields=_fields(["id"]), set_fields=_fields(cols))
    for key, values in rows:
        st.records.add(key_values=[val(key)], after_values=[val(v) for v in values])
    return statement_pb2.Statement(update=st)


def delete(table: str, keys: Iterable[Any]) -> statement_pb2.Statement:
    st = statement_pb2.DeleteStatement(
        table=statement_pb2.TableMetadata(schema_name="s", table_name=table),
        key_fields=_fields(["id"]))
    for key in keys:
        st.records.add(key_values=[val(key)])
    return statement_pb2.Statement(delete=st)


def sql(query: str, **variables: Any) -> statement_pb2.Statement:
    st = statement_pb2.SqlStatement(query=query)
    for name, v in variables.items():
        st.variables.add(name=name, value=val(v))
    return statement_pb2.Statement(sql=st)


def txn(trans_id: int, *statements: statement_pb2.Statement, server_id: int = 1,
        segment_id: int = 1, end_segment: bool = True, rollback: bool = False,
        commit_ts_ns: int = 1_000, epoch: int = 1, author: int | None = None
        ) -> transaction_pb2.Transaction:
    t = transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=server_id, trans_id=trans_id), epoch=epoch,
        author=server_id if author is None else author, start_timestamp_ns=commit_ts_ns,
        commit_timestamp_ns=commit_ts_ns, statements=list(statements), segment_id=segment_id,
        end_segment=end_segment)
    if rollback:
        t.rollback.reason = "test"
    return t


def apply_op(store: Store, op: RowOp, trace: list[Store] | None = None) -> None:
    """Apply one operation to the reference model (the semantics of gateway.core.rowops)."""
    rid = op.row_id
    if op.kind is OpKind.SQL:
        if trace is not None:
            trace.append({k: dict(v) for k, v in store.items()})
        return
    new = dict(zip((c.name for c in op.columns), op.values, strict=True))
    if op.kind in (OpKind.INSERT, OpKind.UPSERT):
        store[rid] = new
    elif op.kind is OpKind.UPDATE:
        if rid in store:
            store[rid].update(new)
    elif op.kind is OpKind.DELETE:
        store.pop(rid, None)
    elif op.kind is OpKind.MOVE:
        if rid in store:
            row = store.pop(rid)
            row.update(new)
            assert op.new_key is not None
            store[(op.table, op.new_key)] = row
    else:  # pragma: no cover
        raise AssertionError(op.kind)


def apply_all(store: Store, ops: Iterable[RowOp]) -> tuple[Store, list[Store]]:
    """Apply ``ops`` in order to a copy of ``store``; return it and the SQL-barrier trace."""
    out = {k: dict(v) for k, v in store.items()}
    trace: list[Store] = []
    for op in ops:
        apply_op(out, op, trace)
    return out, trace
