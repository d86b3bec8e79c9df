"""The SQLite applier's C binder (``gateway.appliers._sqlite_bind``) leaves the database the
``sqlite3`` module's path leaves -- the same rows, values and storage classes --, declines
(doing nothing) what it does not bind as that module does, and raises what that module
raises for SQLite's errors."""

from __future__ import annotations

import math
import os
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.appliers import sqlite as sqlite_applier
from gateway.appliers.sqlite import ColumnOps, SqliteApplier
from gateway.core.rowops import Column, OpKind, TableRef
from gateway.v1 import value_pb2

if os.environ.get("GATEWAY_REQUIRE_ACCEL") == "1":  # CI: the extension must be built
    from gateway.appliers import _sqlite_bind as bind
else:
    bind = pytest.importorskip("gateway.appliers._sqlite_bind")
if sqlite_applier._BIND is None:  # GATEWAY_PURE_PYTHON=1
    pytest.skip("the C binder is switched off (GATEWAY_PURE_PYTHON)", allow_module_level=True)

FT = value_pb2.FieldType
_T = TableRef("s", "t")
_KEY = (Column("k", FT.FIELD_TYPE_INTEGER),)
#: a column of each affinity the applier declares, and one holding anything
_COLS = (Column("i", FT.FIELD_TYPE_INTEGER), Column("r", FT.FIELD_TYPE_DOUBLE),
         Column("s", FT.FIELD_TYPE_VARCHAR), Column("b", FT.FIELD_TYPE_BLOB),
         Column("x", FT.FIELD_TYPE_JSON))
_ANY = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False), st.just(-0.0), st.just(math.inf),
    st.text(max_size=8), st.just(""), st.binary(max_size=8), st.just(b""))


def _dump(path: Path) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        cols = ", ".join(f'"{c}", typeof("{c}")' for c in ("k", *(c.name for c in _COLS)))
        return list(conn.execute(f'SELECT {cols} FROM "t" ORDER BY "k"'))
    finally:
        conn.close()


class _Counted:
    """``_BIND`` with the answers of its calls kept."""

    def __init__(self, real: object) -> None:
        self.real = real
        self.answers: list[bool] = []

    def run(self, *args: object) -> bool:
        got = self.real.run(*args)  # type: ignore[attr-defined]
        self.answers.append(got)
        return got


def _apply(path: Path, batches: list[ColumnOps]) -> None:
    db = SqliteApplier(path)
    try:
        db.apply_columns(batches, [(1, n + 1) for n in range(sum(map(len, batches)))])
    finally:
        db.close()


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(*(_ANY for _ in _COLS)), min_size=16, max_size=300),
       delete=st.integers(0, 40))
def test_the_c_binder_leaves_the_database_the_sqlite3_module_leaves(tmp_path_factory, rows,
                                                                       delete):
    tmp = tmp_path_factory.mktemp("bind")
    keys = list(range(len(rows)))
    values = [list(col) for col in zip(*rows, strict=True)]
    batches = [ColumnOps(_T, OpKind.INSERT, _KEY, _COLS, [keys], values)]
    if delete >= 16:  # a DELETE of many rows after them
        batches.append(ColumnOps(_T, OpKind.DELETE, _KEY, (), [keys[:delete]], []))
    counted = _Counted(sqlite_applier._BIND)
    real = sqlite_applier._BIND
    try:
        sqlite_applier._BIND = counted  # type: ignore[assignment]
        _apply(tmp / "c.db", batches)
        sqlite_applier._BIND = None
        _apply(tmp / "py.db", batches)
    finally:
        sqlite_applier._BIND = real
    assert counted.answers and all(counted.answers)  # the C path applied every batch
    assert _dump(tmp / "c.db") == _dump(tmp / "py.db")


def test_a_batch_larger_than_a_chunk_of_the_binder_leaves_the_same_database(tmp_path,
                                                                             monkeypatch):
    n = 30_007  # chunks of 65,536 values (10,880 rows of six), then statements of 16 and 1
    keys = list(range(n))
    values = [[k if k % 3 else None for k in keys], [k / 7 for k in keys],
              [f"v{k % 50}" for k in keys], [bytes([k % 256]) for k in keys],
              [str(k) if k % 2 else k for k in keys]]
    batches = [ColumnOps(_T, OpKind.INSERT, _KEY, _COLS, [keys], values)]
    _apply(tmp_path / "c.db", batches)
    monkeypatch.setattr(sqlite_applier, "_BIND", None)
    _apply(tmp_path / "py.db", batches)
    got = _dump(tmp_path / "c.db")
    assert len(got) == n and got == _dump(tmp_path / "py.db")


def _table(tmp_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(tmp_path / "raw.db", isolation_level=None)
    conn.execute('CREATE TABLE "t" ("k" INTEGER PRIMARY KEY NOT NULL, "v" TEXT NOT NULL)')
    return conn


def _plan(rows: int) -> list[tuple[str, int, int]]:
    return [('INSERT OR REPLACE INTO "t" ("k", "v") VALUES ' + ", ".join(["(?, ?)"] * 16),
             16, rows // 16)]


@pytest.mark.parametrize("bad", ["\ud800", 2**63, 1.5j, Path("x"), bytearray(b"x")],
                         ids=["surrogate", "int-too-large", "complex", "object", "bytearray"])
def test_a_value_the_binder_does_not_bind_as_sqlite3_does_is_declined_untouched(tmp_path, bad):
    conn = _table(tmp_path)
    conn.execute("BEGIN IMMEDIATE")
    keys = list(range(32))
    vals: list[object] = ["a"] * 32
    vals[20] = bad
    assert bind.run(conn, str(tmp_path / "raw.db"), _plan(32), [keys, vals], 32) is False
    assert conn.execute('SELECT count(*) FROM "t"').fetchone() == (0,)
    conn.execute("ROLLBACK")


def test_a_connection_outside_a_transaction_or_on_another_file_is_declined(tmp_path):
    conn = _table(tmp_path)
    cols = [list(range(16)), ["a"] * 16]
    assert bind.run(conn, str(tmp_path / "raw.db"), _plan(16), cols, 16) is False  # autocommit
    conn.execute("BEGIN IMMEDIATE")
    other = tmp_path / "other.db"
    sqlite3.connect(other).close()
    assert bind.run(conn, str(other), _plan(16), cols, 16) is False
    assert bind.run(object(), str(tmp_path / "raw.db"), _plan(16), cols, 16) is False
    assert bind.run(conn, str(tmp_path / "raw.db"), _plan(32), cols, 16) is False  # 32 != 16
    assert conn.execute('SELECT count(*) FROM "t"').fetchone() == (0,)
    assert bind.run(conn, str(tmp_path / "raw.db"), _plan(16), cols, 16) is True
    conn.execute("COMMIT")
    assert conn.execute('SELECT count(*) FROM "t"').fetchone() == (16,)


def test_sqlite_errors_raise_what_the_sqlite3_module_raises(tmp_path):
    conn = _table(tmp_path)
    keys = list(range(16))
    vals: list[object] = ["a"] * 16
    vals[7] = None  # NOT NULL constraint failed
    conn.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.Error) as py_err:
        conn.executemany('INSERT OR REPLACE INTO "t" ("k", "v") VALUES (?, ?)',
                         list(zip(keys, vals, strict=True)))
    with pytest.raises(sqlite3.Error) as c_err:
        bind.run(conn, str(tmp_path / "raw.db"), _plan(16), [keys, vals], 16)
    conn.execute("ROLLBACK")
    assert type(c_err.value) is type(py_err.value) is sqlite3.IntegrityError
    assert str(c_err.value) == str(py_err.value)
    assert c_err.value.sqlite_errorcode == py_err.value.sqlite_errorcode \
        == sqlite3.SQLITE_CONSTRAINT_NOTNULL
