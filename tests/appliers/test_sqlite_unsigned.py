"""UNSIGNED values above 2**63 - 1 in the SQLite applier (issue 52, item 5): kept exactly --
as an 8-byte big-endian BLOB, the same mapping for keys and values -- where they used to
become a rounded REAL (a value) or a dead letter (a key)."""

from __future__ import annotations

import sqlite3

import pytest

from gateway.appliers.sqlite import ColumnOps, SqliteApplier, unsigned_blob, unsigned_value
from gateway.core.rowops import Column, Gtid, OpKind, RowOp, TableRef
from gateway.v1 import value_pb2

_U = value_pb2.FIELD_TYPE_UNSIGNED
_KEY = (Column("u", _U),)
_VAL = (Column("v", _U),)
_T = TableRef("s", "big")
HUGE = [2**63, 2**63 + 5, 2**64 - 2, 2**64 - 1]


def _op(kind: OpKind, key: int, value: int | None = None, trans: int = 1) -> RowOp:
    cols = () if kind is OpKind.DELETE else _VAL
    vals = () if kind is OpKind.DELETE else (value,)
    return RowOp(kind, _T, _KEY, (key,), cols, vals, Gtid(1, trans), statement=1)


@pytest.fixture
def db(tmp_path):
    applier = SqliteApplier(tmp_path / "out.db")
    yield applier
    applier.close()


def _stored(db: SqliteApplier) -> dict[int, int | None]:
    return {unsigned_value(r["u"]): None if r["v"] is None else unsigned_value(r["v"])
            for r in db.rows("big")}


def test_unsigned_values_above_2_63_are_stored_exactly(db):
    db.apply([_op(OpKind.INSERT, k, v) for k, v in enumerate([*HUGE, 3, 2**63 - 1])])
    assert _stored(db) == dict(enumerate([*HUGE, 3, 2**63 - 1]))
    raw = {r["u"]: r["v"] for r in db.rows("big")}
    assert raw[0] == unsigned_blob(2**63) and raw[4] == 3  # small ones stay INTEGERs


@pytest.mark.parametrize("key", HUGE)
def test_an_unsigned_key_above_2_63_is_inserted_updated_and_deleted(db, key):
    db.apply([_op(OpKind.INSERT, key, 1)])
    db.apply([_op(OpKind.UPDATE, key, 2**64 - 1, trans=2)])
    assert _stored(db) == {key: 2**64 - 1}
    db.apply([_op(OpKind.INSERT, 7, 7, trans=3)])
    db.apply([_op(OpKind.DELETE, key, trans=4)])
    assert _stored(db) == {7: 7}


def test_stored_unsigned_values_sort_by_value(db):
    values = [0, 5, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 1]
    db.apply([_op(OpKind.INSERT, v, v) for v in reversed(values)])
    conn = sqlite3.connect(db.path)
    try:
        keys = [unsigned_value(r[0]) for r in conn.execute("SELECT u FROM big ORDER BY u")]
    finally:
        conn.close()
    assert keys == values


@pytest.mark.parametrize("keys", [HUGE, [*range(40), 2**63 + 7]], ids=["huge", "many-rows"])
def test_the_column_path_stores_them_as_the_row_path_does(tmp_path, keys):
    """``many-rows``: statements of many rows (bound in C when the accelerator is built: it
    declines the batch for the value above 2**63 - 1, which the sqlite3 module's path
    converts)."""
    rows, bulk = SqliteApplier(tmp_path / "rows.db"), SqliteApplier(tmp_path / "bulk.db")
    try:
        rows.apply([_op(OpKind.INSERT, k, k) for k in keys])
        bulk.apply_columns([ColumnOps(_T, OpKind.INSERT, _KEY, _VAL, [keys], [keys])],
                           [(1, 1)])
        assert rows.rows("big") == bulk.rows("big")
        assert _stored(bulk) == {k: k for k in keys}
    finally:
        rows.close()
        bulk.close()


@pytest.mark.parametrize("values", [
    [1, 2, 2**63 - 1],            # all small: the column is bound as it is
    [1, 2**63, 3],                # one above 2**63 - 1 among small ones
    [None, 5, 2**64 - 1],         # a NULL beside them
    [True, 2**63],                # not plain ints
    [],
])
def test_a_bulk_unsigned_column_binds_as_its_values_one_by_one(values):
    from gateway.appliers.sqlite import _db_column, _db_value
    assert list(_db_column(values, _U)) == [_db_value(v) for v in values]
