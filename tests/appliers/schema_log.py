"""A log that spans schema changes (issue 57), for the appliers' and the Spark tests.

``schema_log()`` is the log of one table ``s.items`` in order: CREATE (id, a, b), writes,
ADD COLUMN c INTEGER DEFAULT 0, writes under the old version (no c) and the new one, RENAME
a -> qty, writes under the old name and the new, DROP COLUMN b, writes still naming b; the
events made by ``gateway.schema.apply`` as the node makes them. ``FINAL`` is the table every
applier must end with: a row written under an older version reads as upcast (an added column
gets its default, a renamed one its new name, a dropped one is gone).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway.core import messages, records
from gateway.core.stuffing import SEPARATOR
from gateway.schema.apply import (
    apply_event,
    plan_add_column,
    plan_create,
    plan_drop_column,
    plan_rename_column,
)
from gateway.schema.codec import encode_event
from gateway.schema.model import Column, SchemaEvent, TableDef
from gateway.v1 import gtid_pb2, statement_pb2, transaction_pb2, value_pb2

FT = value_pb2.FieldType
TYPES = {"id": FT.FIELD_TYPE_INTEGER, "a": FT.FIELD_TYPE_INTEGER,
         "qty": FT.FIELD_TYPE_INTEGER, "b": FT.FIELD_TYPE_VARCHAR,
         "c": FT.FIELD_TYPE_INTEGER}
TABLE = "s.items"


def _val(v: Any) -> value_pb2.Value:
    if v is None:
        return value_pb2.Value(null_value=value_pb2.NULL_VALUE)
    if isinstance(v, str):
        return value_pb2.Value(string_value=v)
    return value_pb2.Value(int_value=v)


def _fields(names: list[str]) -> list[statement_pb2.FieldMetadata]:
    return [statement_pb2.FieldMetadata(name=n, type=TYPES[n]) for n in names]


def _meta(schema: str) -> statement_pb2.TableMetadata:
    return statement_pb2.TableMetadata(schema_name=schema, table_name="items")


def insert(*rows: dict[str, Any], schema: str = "s") -> statement_pb2.Statement:
    """INSERT rows of the same columns (``id`` the key)."""
    cols = [c for c in rows[0] if c != "id"]
    st = statement_pb2.InsertStatement(table=_meta(schema), key_fields=_fields(["id"]),
                                       fields=_fields(cols))
    for r in rows:
        st.records.add(key_values=[_val(r["id"])], after_values=[_val(r[c]) for c in cols])
    return statement_pb2.Statement(insert=st)


def update(key: int, schema: str = "s", **values: Any) -> statement_pb2.Statement:
    st = statement_pb2.UpdateStatement(table=_meta(schema), key_fields=_fields(["id"]),
                                       set_fields=_fields(list(values)))
    st.records.add(key_values=[_val(key)], after_values=[_val(v) for v in values.values()])
    return statement_pb2.Statement(update=st)


def delete(key: int, schema: str = "s") -> statement_pb2.Statement:
    st = statement_pb2.DeleteStatement(table=_meta(schema), key_fields=_fields(["id"]))
    st.records.add(key_values=[_val(key)])
    return statement_pb2.Statement(delete=st)


def txn(trans_id: int, *statements: statement_pb2.Statement) -> transaction_pb2.Transaction:
    return transaction_pb2.Transaction(
        gtid=gtid_pb2.Gtid(server_id=1, trans_id=trans_id), epoch=1, author=1,
        start_timestamp_ns=trans_id * 1000, commit_timestamp_ns=trans_id * 1000,
        statements=list(statements), segment_id=1, end_segment=True)


def events(schema: str = "s") -> list[SchemaEvent]:
    """CREATE, ADD COLUMN c, RENAME a -> qty, DROP COLUMN b, each on the one before."""
    table = f"{schema}.items"
    out: list[SchemaEvent] = []
    current: TableDef | None = None

    def step(e: SchemaEvent) -> None:
        nonlocal current
        current = apply_event(current, e)
        out.append(e)

    step(plan_create(None, table, [Column("id", "INTEGER"), Column("a", "INTEGER"),
                                   Column("b", "VARCHAR")], ["id"], origin="A"))
    step(plan_add_column(current, table, Column("c", "INTEGER", 0), origin="A"))
    step(plan_rename_column(current, table, "a", "qty", origin="A"))
    step(plan_drop_column(current, table, "b", origin="A"))
    return out


def schema_log(schema: str = "s") -> list[transaction_pb2.Transaction | SchemaEvent]:
    """The log, in order (module docstring); the table is ``<schema>.items``."""
    create, add_c, rename, drop_b = events(schema)

    def ins(*rows: dict[str, Any]) -> statement_pb2.Statement:
        return insert(*rows, schema=schema)

    def upd(key: int, **values: Any) -> statement_pb2.Statement:
        return update(key, schema, **values)

    return [
        create,
        txn(1, ins({"id": 1, "a": 10, "b": "one"}, {"id": 2, "a": 20, "b": "two"},
                   {"id": 3, "a": 30, "b": "three"})),
        txn(2, upd(2, a=21)),
        add_c,
        txn(3, ins({"id": 4, "a": 40, "b": "four"})),            # the old version: no c
        txn(4, ins({"id": 5, "a": 50, "b": "five", "c": 7})),    # the new one
        txn(5, upd(1, c=9)),
        rename,
        txn(6, ins({"id": 6, "qty": 60, "b": "six", "c": 6})),
        txn(7, ins({"id": 7, "a": 70, "b": "seven"})),           # under the old name
        txn(8, upd(2, qty=22)),
        drop_b,
        txn(9, ins({"id": 8, "qty": 80, "c": 8})),
        txn(10, ins({"id": 9, "qty": 90, "b": "nine", "c": 9})),  # still naming b
        txn(11, delete(3, schema)),
        txn(12, upd(4, qty=41)),
    ]


def write_log(path: Path, items: list[transaction_pb2.Transaction | SchemaEvent]) -> None:
    """``items`` as a standalone log file (a record stream: ``FE FD``, then one record per
    item: a transaction, or a schema event with its type tag ``SCHEMA_EVENT``)."""
    payloads = [encode_event(i) if isinstance(i, SchemaEvent) else messages.pack(i)
                for i in items]
    path.write_bytes(SEPARATOR + b"".join(records.encode_record(p) for p in payloads))


#: ``s.items`` after the whole log: columns id, qty, c.
FINAL = [
    {"id": 1, "qty": 10, "c": 9},
    {"id": 2, "qty": 22, "c": 0},
    {"id": 4, "qty": 41, "c": 0},
    {"id": 5, "qty": 50, "c": 7},
    {"id": 6, "qty": 60, "c": 6},
    {"id": 7, "qty": 70, "c": 0},
    {"id": 8, "qty": 80, "c": 8},
    {"id": 9, "qty": 90, "c": 9},
]
