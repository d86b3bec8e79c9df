"""The embedded SQLite applier: tables from metadata, idempotent row operations, SQL with
bound session variables executed once, GTIDs committed with the data."""

from __future__ import annotations

import sqlite3

import pytest

from gateway.appliers.contract import (
    ApplierConfigError,
    ApplyError,
    TransientApplyError,
    UnsupportedOperationError,
)
from gateway.appliers.dispatcher import Dispatcher, DispatcherConfig
from gateway.appliers.source import MemorySource
from gateway.appliers.sqlite import SQLITE_FACTORY, SqliteApplier
from gateway.core.reducer import reduce_transaction
from gateway.core.rowops import Gtid, statement_ops
from gateway.v1 import statement_pb2
from tests.appliers.test_dispatcher import sequential, workload
from tests.reducer.model import delete, insert, sql, txn, update


@pytest.fixture
def db(tmp_path):
    applier = SqliteApplier(tmp_path / "out.db")
    yield applier
    applier.close()


def test_tables_are_created_from_metadata_and_rows_upserted(db):
    db.apply(reduce_transaction(txn(1, insert("t", [{"id": 1, "a": 5, "b": "x"}]))))
    assert db.rows("t") == [{"id": 1, "a": 5, "b": "x"}]
    cols = {r[1]: (r[2], r[5]) for r in db._conn().execute("PRAGMA table_info(t)")}
    assert cols == {"id": ("INTEGER", 1), "a": ("INTEGER", 0), "b": ("TEXT", 0)}


def test_row_operations_are_idempotent(db):
    ops = statement_ops(txn(1, insert("t", [{"id": 1, "a": 1}]), update("t", ["a"], [(1, [2])]),
                            insert("t", [{"id": 2, "a": 9}]), delete("t", [2])))
    db.apply(ops)
    db.apply(ops)
    assert db.rows("t") == [{"id": 1, "a": 2}]


def test_a_new_column_widens_the_table(db):
    db.apply(statement_ops(txn(1, insert("t", [{"id": 1, "a": 1}]))))
    db.apply(statement_ops(txn(2, update("t", ["c"], [(1, ["new"])]))))
    assert db.rows("t") == [{"id": 1, "a": 1, "c": "new"}]


def test_a_key_change_moves_the_row(db):
    db.apply(statement_ops(txn(1, insert("t", [{"id": 1, "a": 1, "b": "x"}]))))
    (move,) = reduce_transaction(txn(2, update("t", ["id", "a"], [(1, [3, 7])])))
    db.apply([move])
    assert db.rows("t") == [{"id": 3, "a": 7, "b": "x"}]


def test_sql_binds_session_variables_as_parameters_and_runs_once(db):
    db.apply(statement_ops(txn(1, sql("CREATE TABLE whatever (nick TEXT, name TEXT)"))))
    evil = "x'); DROP TABLE whatever; --"
    ops = statement_ops(txn(2, sql("INSERT INTO whatever VALUES (@nick, @name)",
                                   nick="mkindahl", name=evil)))
    db.apply(ops)
    db.apply(ops)  # replayed after a crash: recorded, so skipped
    assert db.rows("whatever") == [{"nick": "mkindahl", "name": evil}]


def test_gtids_are_committed_with_the_data_or_not_at_all(db):
    db.apply(statement_ops(txn(1, insert("t", [{"id": 1, "a": 1}]))))
    bad = statement_ops(txn(2, insert("t", [{"id": 2, "a": 2}]),
                            sql("INSERT INTO nope VALUES (1)")))
    with pytest.raises(ApplyError, match="no such table: nope"):
        db.apply(bad)
    assert db.rows("t") == [{"id": 1, "a": 1}]
    assert Gtid(1, 2) not in db.applied_gtids() and Gtid(1, 1) in db.applied_gtids()


def test_a_table_name_used_by_two_schemas_is_refused(db):
    db.apply(statement_ops(txn(1, insert("t", [{"id": 1}]))))
    other = statement_ops(txn(2, insert("t", [{"id": 1}])))
    other = [op.__class__(**{**{f: getattr(op, f) for f in op.__slots__},
                             "table": op.table._replace(schema="other")}) for op in other]
    with pytest.raises(UnsupportedOperationError, match="collides"):
        db.apply(other)


def test_a_locked_database_is_a_transient_error(tmp_path):
    applier = SqliteApplier(tmp_path / "x.db", busy_timeout_ms=10)
    blocker = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    with pytest.raises(TransientApplyError, match="locked"):
        applier.apply(statement_ops(txn(1, insert("t", [{"id": 1}]))))
    blocker.execute("ROLLBACK")
    applier.close()


def test_the_dispatcher_over_sqlite_reaches_the_sequential_state(tmp_path):
    txns = workload(21, n=80, with_sql=False)
    applier = SqliteApplier(tmp_path / "out.db")
    Dispatcher(applier, MemorySource(txns), tmp_path, config=DispatcherConfig(threads=4)).run()
    expected = {k[1][0]: {"a": v.get("a"), "b": v.get("b")}
                for k, v in sequential(txns)[0].items()}
    assert {r["id"]: {"a": r["a"], "b": r["b"]} for r in applier.rows("t")} == expected
    assert list(applier.applied_gtids().ranges())[-1][2] == 80
    applier.close()


def test_factory_options_are_checked():
    with pytest.raises(ApplierConfigError, match="'path' is required"):
        SQLITE_FACTORY.build({})
    with pytest.raises(ApplierConfigError, match="synchronous"):
        SQLITE_FACTORY.build({"path": "x.db", "synchronous": "sometimes"})
    with pytest.raises(ApplierConfigError, match="unknown option 'colour'"):
        SQLITE_FACTORY.build({"path": "x.db", "colour": "red"})


def test_apply_status_lands_in_its_own_table(db):
    st = statement_pb2.Statement()
    st.apply_status.server_id, st.apply_status.epoch, st.apply_status.applied_by = 2, 7, 1
    db.apply(statement_ops(txn(1, st)))
    assert db.rows("apply_status") == [{"server_id": 2, "epoch": 7, "applied_by": 1}]
