"""The embedded SQLite applier: tables from metadata, idempotent row operations, SQL with
bound session variables executed once, GTIDs committed with the data."""

from __future__ import annotations

import itertools
import random
import sqlite3
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.appliers import sqlite as sqlite_applier
from gateway.appliers.contract import (
    ApplierConfigError,
    ApplyError,
    TransientApplyError,
    UnsupportedOperationError,
)
from gateway.appliers.dispatcher import Dispatcher, DispatcherConfig
from gateway.appliers.source import MemorySource
from gateway.appliers.sqlite import SQLITE_FACTORY, ColumnOps, SqliteApplier
from gateway.core.reducer import reduce_transaction
from gateway.core.rowops import Column, Gtid, OpKind, RowOp, SqlText, TableRef, statement_ops
from gateway.v1 import statement_pb2, value_pb2
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
    for bad in ("3000", "256", "131072", "big"):
        with pytest.raises(ApplierConfigError, match=f"page_size must be .* not '{bad}'"):
            SQLITE_FACTORY.build({"path": "x.db", "page_size": bad})


def _page_size(path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()


@pytest.mark.parametrize("options,expected", [({}, 8192), ({"page_size": "16384"}, 16384),
                                              ({"page_size": "4096"}, 4096)])
def test_a_new_database_gets_the_configured_page_size(tmp_path, options, expected):
    path = tmp_path / "new.db"
    applier = SQLITE_FACTORY.build({"path": str(path), **options})
    applier.apply(reduce_transaction(txn(1, insert("t", [{"id": 1, "a": 5, "b": "x"}]))))
    applier.close()
    assert _page_size(path) == expected
    assert SqliteApplier(path).rows("t") == [{"id": 1, "a": 5, "b": "x"}]


def test_an_existing_database_keeps_its_page_size_and_rows(tmp_path):
    path = tmp_path / "old.db"
    old = SqliteApplier(path, page_size=4096)
    old.apply(reduce_transaction(txn(1, insert("t", [{"id": 1, "a": 5, "b": "x"}]))))
    old.close()
    reopened = SqliteApplier(path, page_size=16384)
    assert not reopened.created
    reopened.apply(reduce_transaction(txn(2, insert("t", [{"id": 2, "a": 6, "b": "y"}]))))
    reopened.close()
    assert _page_size(path) == 4096
    assert [r["id"] for r in SqliteApplier(path).rows("t")] == [1, 2]


def test_apply_status_lands_in_its_own_table(db):
    st = statement_pb2.Statement()
    st.apply_status.server_id, st.apply_status.epoch, st.apply_status.applied_by = 2, 7, 1
    db.apply(statement_ops(txn(1, st)))
    assert db.rows("apply_status") == [{"server_id": 2, "epoch": 7, "applied_by": 1}]


# -- apply_columns: the bulk entry point --------------------------------------------------------

_T = value_pb2.FieldType
_TYPED = {"n": _T.FIELD_TYPE_INTEGER, "u": _T.FIELD_TYPE_UNSIGNED, "d": _T.FIELD_TYPE_DECIMAL,
          "f": _T.FIELD_TYPE_DOUBLE, "b": _T.FIELD_TYPE_BOOLEAN, "x": _T.FIELD_TYPE_BLOB,
          "s": _T.FIELD_TYPE_VARCHAR, "ts": _T.FIELD_TYPE_TIMESTAMP}
_SAMPLES = {"n": [0, -7, 2**62], "u": [3, 2**63 - 1, 2**63 + 5, 2**64 - 1],
            "d": [Decimal("1.50"), Decimal("-0.0000001"), Decimal("1E+3")],
            "f": [0.5, -2.25, 1e300], "b": [True, False], "x": [b"\x00\xff", b""],
            "s": ["a", "é", ""], "ts": [0, 2**62]}
_KEYS = {"t": (Column("id", _T.FIELD_TYPE_INTEGER),),
         "k2": (Column("k", _T.FIELD_TYPE_VARCHAR), Column("id", _T.FIELD_TYPE_INTEGER))}


def _random_unit(rng: random.Random, n: int, trans_id: int) -> list[RowOp]:
    """Reduced operations on distinct rows of two tables: random kinds, column subsets
    (including columns no earlier unit named), types and nulls."""
    ops, seen = [], set()
    while len(ops) < n:
        table = rng.choice(list(_KEYS))
        key = ((rng.randint(1, 40),) if table == "t"
               else (rng.choice("pq"), rng.randint(1, 20)))
        if (table, key) in seen:
            continue
        seen.add((table, key))
        kind = rng.choice([OpKind.INSERT, OpKind.UPSERT, OpKind.UPDATE, OpKind.DELETE])
        names = [] if kind is OpKind.DELETE else rng.sample(sorted(_TYPED),
                                                            rng.randint(0, len(_TYPED)))
        values = tuple(None if rng.random() < 0.15 else rng.choice(_SAMPLES[c]) for c in names)
        ops.append(RowOp(kind, TableRef("s", table), _KEYS[table], key,
                         tuple(Column(c, _TYPED[c]) for c in names), values,
                         Gtid(1, trans_id + rng.randint(0, 3)), statement=1))
    return ops


def _columnar(ops: list[RowOp]) -> list[ColumnOps]:
    """``ops`` grouped by table, kind and columns, as the Spark target groups them."""
    groups: dict[tuple, list[RowOp]] = {}
    for op in ops:
        groups.setdefault((op.table, op.kind, op.key_columns, op.columns), []).append(op)
    return [ColumnOps(table, kind, keys, cols,
                      [[op.key[i] for op in members] for i in range(len(keys))],
                      [[op.values[j] for op in members] for j in range(len(cols))])
            for (table, kind, keys, cols), members in groups.items()]


def _dump(path) -> dict[str, list[tuple]]:
    conn = sqlite3.connect(path)
    try:
        names = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return {n: sorted(conn.execute(f'SELECT * FROM "{n}"'), key=repr) for n in names}
    finally:
        conn.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_apply_columns_leaves_the_same_database_as_apply(tmp_path, seed):
    rng = random.Random(seed)
    units = [_random_unit(rng, rng.randint(1, 60), 10 * u) for u in range(6)]
    per_op = SqliteApplier(tmp_path / "ops.db")
    bulk = SqliteApplier(tmp_path / "bulk.db")
    try:
        for ops in units:
            per_op.apply(ops)
            written = bulk.apply_columns(_columnar(ops), [tuple(op.gtid) for op in ops])
            assert written == len(ops)
        assert _dump(tmp_path / "bulk.db") == _dump(tmp_path / "ops.db")
    finally:
        per_op.close()
        bulk.close()


def test_apply_columns_takes_row_ops_in_the_same_transaction_and_commits_all_or_nothing(db):
    key = (Column("id", _T.FIELD_TYPE_INTEGER),)
    a = Column("a", _T.FIELD_TYPE_INTEGER)
    batch = ColumnOps(TableRef("s", "t"), OpKind.INSERT, key, (a,), [[1, 2]], [[10, 20]])
    bad = RowOp(OpKind.SQL, TableRef("", ""), (), (), gtid=Gtid(1, 3), statement=1,
                sql=SqlText("INSERT INTO nope VALUES (1)", (), "", 0))
    with pytest.raises(ApplyError, match="no such table: nope"):
        db.apply_columns([batch], [(1, 1), (1, 2)], [bad])
    assert list(db.applied_gtids().ranges()) == []
    with pytest.raises(sqlite3.OperationalError):
        db.rows("t")  # not even the table survived the rollback
    delete_2 = RowOp(OpKind.DELETE, TableRef("s", "t"), key, (2,), gtid=Gtid(1, 3))
    assert db.apply_columns([batch], [(1, 1), (1, 2), (1, 1)], [delete_2]) == 3
    assert db.rows("t") == [{"id": 1, "a": 10}]
    assert list(db.applied_gtids().ranges()) == [(1, 1, 3)]  # the row op's GTID too


def test_apply_columns_refuses_barriers_and_a_second_schema(db):
    key = (Column("id", _T.FIELD_TYPE_INTEGER),)
    with pytest.raises(UnsupportedOperationError, match="MOVE"):
        db.apply_columns([ColumnOps(TableRef("s", "t"), OpKind.MOVE, key, (), [[1]], [])], [])
    db.apply_columns([ColumnOps(TableRef("s", "t"), OpKind.INSERT, key, (), [[1]], [])],
                     [(1, 1)])
    with pytest.raises(UnsupportedOperationError, match="collides"):
        db.apply_columns([ColumnOps(TableRef("other", "t"), OpKind.DELETE, key, (), [[1]], [])],
                         [(1, 2)])


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_apply_of_runs_of_like_operations_equals_applying_them_one_by_one(tmp_path, seed):
    """``apply`` runs consecutive operations of one kind, table and columns as one
    ``executemany``: in order, so repeated rows (unreduced operations) end as applied one at
    a time, with every type's conversion."""
    rng = random.Random(seed)
    ops: list[RowOp] = []
    while len(ops) < 300:
        table = rng.choice(list(_KEYS))
        kind = rng.choice([OpKind.INSERT, OpKind.UPSERT, OpKind.UPDATE, OpKind.DELETE])
        names = [] if kind is OpKind.DELETE else rng.sample(sorted(_TYPED),
                                                            rng.randint(1, len(_TYPED)))
        for _ in range(rng.randint(1, 12)):
            key = ((rng.randint(1, 15),) if table == "t"
                   else (rng.choice("pq"), rng.randint(1, 8)))
            values = tuple(None if rng.random() < 0.15 else rng.choice(_SAMPLES[c])
                           for c in names)
            ops.append(RowOp(kind, TableRef("s", table), _KEYS[table], key,
                             tuple(Column(c, _TYPED[c]) for c in names), values,
                             Gtid(1, len(ops) // 50 + 1), statement=1))
    whole = SqliteApplier(tmp_path / "whole.db")
    single = SqliteApplier(tmp_path / "single.db")
    try:
        for start in range(0, len(ops), 100):
            whole.apply(ops[start:start + 100])
        for op in ops:
            single.apply([op])
        assert _dump(tmp_path / "whole.db") == _dump(tmp_path / "single.db")
    finally:
        whole.close()
        single.close()


def _long_run(rng: random.Random, kind: OpKind, table: str, length: int,
              first_trans: int) -> list[RowOp]:
    """``length`` operations of ``kind`` on ``table`` with the same columns, keys drawn from
    few enough rows that many repeat within the run, typed values and nulls."""
    names = [] if kind is OpKind.DELETE else sorted(_TYPED)
    ops = []
    for i in range(length):
        key = ((rng.randint(1, length // 3 + 1),) if table == "t"
               else (rng.choice("pq"), rng.randint(1, length // 6 + 1)))
        values = tuple(None if rng.random() < 0.15 else rng.choice(_SAMPLES[c]) for c in names)
        ops.append(RowOp(kind, TableRef("s", table), _KEYS[table], key,
                         tuple(Column(c, _TYPED[c]) for c in names), values,
                         Gtid(1, first_trans + i), statement=1))
    return ops


@pytest.fixture
def multi(monkeypatch) -> list[tuple[OpKind, int, int]]:
    """``(kind, rows, parameters)`` of every statement of many rows the applier builds."""
    made: list[tuple[OpKind, int, int]] = []
    real = sqlite_applier._multi_statement

    def spy(kind, table, key_columns, columns, rows):
        width = len(key_columns) + (0 if kind is OpKind.DELETE else len(columns))
        made.append((kind, rows, rows * width))
        return real(kind, table, key_columns, columns, rows)

    monkeypatch.setattr(sqlite_applier, "_multi_statement", spy)
    return made


@pytest.mark.parametrize("length", [15, 16, 17, 128, 129, 300, 500])
@pytest.mark.parametrize("table", ["t", "k2"])
def test_long_runs_go_as_statements_of_many_rows_with_the_effect_of_one_by_one(tmp_path, multi,
                                                                              length, table):
    """A run of INSERT/UPSERT/DELETE operations is applied by statements of many rows each:
    rows of the same key replace each other in the run's order, every type converted as a
    one-row statement converts it; an UPDATE run stays row by row."""
    rng = random.Random(length)
    kinds = [OpKind.INSERT, OpKind.UPSERT, OpKind.UPDATE, OpKind.DELETE, OpKind.INSERT]
    runs = [_long_run(rng, kind, table, length, 1 + 1000 * n) for n, kind in enumerate(kinds)]
    whole = SqliteApplier(tmp_path / "whole.db")
    single = SqliteApplier(tmp_path / "single.db")
    try:
        for run in runs:
            whole.apply(run)
            for op in run:
                single.apply([op])
        assert _dump(tmp_path / "whole.db") == _dump(tmp_path / "single.db")
        expected = {OpKind.INSERT, OpKind.UPSERT, OpKind.DELETE} if length >= 16 else set()
        assert {kind for kind, _, _ in multi} == expected
    finally:
        whole.close()
        single.close()


@pytest.mark.parametrize("limit", [10, 40, 999])
def test_the_rows_per_statement_stay_within_sqlites_parameter_limit(tmp_path, multi, limit):
    rng = random.Random(limit)
    inserts = _long_run(rng, OpKind.INSERT, "k2", 300, 1)  # 2 key + 8 value columns a row
    deletes = _long_run(rng, OpKind.DELETE, "k2", 150, 1000)
    whole = SqliteApplier(tmp_path / "whole.db")
    single = SqliteApplier(tmp_path / "single.db")
    try:
        whole._conn().setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, limit)
        whole.apply(inserts)
        whole.apply(deletes)
        for op in inserts + deletes:
            single.apply([op])
        assert _dump(tmp_path / "whole.db") == _dump(tmp_path / "single.db")
        assert all(params <= limit for _, _, params in multi)
        assert bool(multi) is (limit >= 40)  # 16 rows of 2 key columns fit in 40
    finally:
        whole.close()
        single.close()


@pytest.mark.parametrize("length", [16, 200, 431])
def test_long_column_batches_leave_the_same_database_as_apply(tmp_path, multi, length):
    """``apply_columns`` of distinct rows, inserted then partly deleted, by statements of
    many rows."""
    rng = random.Random(length)
    ops = []
    for table in ("t", "k2"):
        keys = ([(i,) for i in range(length)] if table == "t"
                else [(rng.choice("pqr"), i) for i in range(length)])
        cols = tuple(Column(c, _TYPED[c]) for c in sorted(_TYPED))
        for n, key in enumerate(keys):
            ops.append(RowOp(OpKind.INSERT, TableRef("s", table), _KEYS[table], key, cols,
                             tuple(rng.choice(_SAMPLES[c.name] + [None]) for c in cols),
                             Gtid(1, n + 1), statement=1))
    deletes = [RowOp(OpKind.DELETE, op.table, op.key_columns, op.key, gtid=Gtid(2, n + 1))
               for n, op in enumerate(ops) if rng.random() < 0.5]
    per_op = SqliteApplier(tmp_path / "ops.db")
    bulk = SqliteApplier(tmp_path / "bulk.db")
    try:
        for unit in (ops, deletes):
            per_op.apply(unit)
            assert bulk.apply_columns(_columnar(unit), [tuple(op.gtid) for op in unit]) == len(unit)
        assert _dump(tmp_path / "bulk.db") == _dump(tmp_path / "ops.db")
        long_deletes = max(sum(op.table.name == t for op in deletes) for t in ("t", "k2"))
        expected = {OpKind.INSERT} | ({OpKind.DELETE} if long_deletes >= 16 else set())
        assert {kind for kind, _, _ in multi} == expected
    finally:
        per_op.close()
        bulk.close()


_RUN = st.builds(lambda s, first, n: [(s, t) for t in range(first, first + n)],
                 st.integers(1, 3), st.integers(1, 60), st.integers(1, 25))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.lists(st.tuples(st.integers(1, 3), st.integers(1, 60)),
                                   max_size=25), _RUN), max_size=6))
def test_applied_gtids_are_kept_as_ranges_whatever_the_order_of_the_batches(tmp_path_factory,
                                                                           batches):
    """Batches of GTIDs in any order, with repeats and several origins, or one origin's run of
    consecutive trans ids (the usual batch, taken as one range at once), leave the set of all
    of them, stored as disjoint, never adjacent ranges -- a few rows, not one per GTID."""
    applier = SqliteApplier(tmp_path_factory.mktemp("ranges") / "out.db")
    try:
        for batch in batches:
            applier.apply_columns([], [Gtid(*g) for g in batch])
        want = {g for batch in batches for g in batch}
        assert {(s, t) for s, first, last in applier.applied_gtids().ranges()
                for t in range(first, last + 1)} == want
        stored = applier._conn().execute(
            "SELECT server_id, first, last FROM _gateway_applied_ranges "
            "ORDER BY server_id, first").fetchall()
        for (sa, _, ea), (sb, fb, _) in itertools.pairwise(stored):
            assert sa < sb or fb > ea + 1
        for origin in (1, 2, 3):
            assert applier.last_applied_trans_id(origin) == max(
                (t for s, t in want if s == origin), default=0)
    finally:
        applier.close()


def test_a_log_of_one_row_transactions_is_one_stored_range(tmp_path):
    applier = SqliteApplier(tmp_path / "out.db")
    try:
        for first in range(1, 1001, 100):
            applier.apply_columns([], [Gtid(7, t) for t in range(first, first + 100)])
        assert applier._conn().execute(
            "SELECT server_id, first, last FROM _gateway_applied_ranges").fetchall() \
            == [(7, 1, 1000)]
    finally:
        applier.close()


def test_a_database_with_a_row_per_gtid_is_converted_to_ranges_when_opened(tmp_path):
    """A target written before ranges (``_gateway_applied``: one row per GTID) keeps every
    GTID it recorded: moved into ranges at open, the old table dropped."""
    path = tmp_path / "old.db"
    old = {(1, t) for t in (*range(1, 50), *range(60, 70))} | {(2, 5)}
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE _gateway_applied (server_id INTEGER NOT NULL, "
                     "trans_id INTEGER NOT NULL, PRIMARY KEY (server_id, trans_id)) "
                     "WITHOUT ROWID")
        conn.executemany("INSERT INTO _gateway_applied VALUES (?, ?)", sorted(old))
    applier = SqliteApplier(path)
    try:
        assert list(applier.applied_gtids().ranges()) == [(1, 1, 49), (1, 60, 69), (2, 5, 5)]
        assert applier.last_applied_trans_id(1) == 69
        assert applier._conn().execute("SELECT name FROM sqlite_master WHERE name = "
                                       "'_gateway_applied'").fetchone() is None
    finally:
        applier.close()


@pytest.mark.parametrize(("query", "refused"), [
    ("ATTACH DATABASE '{dir}/planted.db' AS p", "ATTACH"),
    ("INSERT INTO _gateway_applied_ranges VALUES (7, 1, 99)", "_gateway_applied_ranges"),
    ("PRAGMA user_version = 5", "PRAGMA"),
    ("INSERT INTO whatever VALUES (random(), 'x')", "random()"),
    ("INSERT INTO whatever VALUES (datetime('now'), 'x')", "datetime()"),
    ("INSERT INTO whatever VALUES (CURRENT_TIMESTAMP, 'x')", "current_timestamp()"),
    ("COMMIT", "transaction control"),
    ("CREATE TRIGGER tr AFTER INSERT ON whatever BEGIN DELETE FROM whatever; END",
     "triggers"),
    ("DELETE FROM \"t$EX\"", "t$EX"),
    ("DROP TABLE kept", "written by row statements"),
    ("ALTER TABLE kept ADD COLUMN c", "written by row statements"),
])
def test_sql_statements_run_under_the_authorizer(db, tmp_path, query, refused):
    db.apply(statement_ops(txn(1, sql("CREATE TABLE whatever (nick TEXT, name TEXT)"),
                               insert("t$EX", [{"id": 1}]), insert("kept", [{"id": 2}]))))
    before = db.applied_gtids()
    with pytest.raises(UnsupportedOperationError, match="refused") as ei:
        db.apply(statement_ops(txn(2, sql(query.format(dir=tmp_path)))))
    assert refused in str(ei.value)
    assert not (tmp_path / "planted.db").exists()
    assert db.applied_gtids() == before
    assert db.rows("whatever") == [] and db.rows("t$EX") == [{"id": 1}]
    assert db.rows("kept") == [{"id": 2}]
    # the applier's own statements still run (the authorizer is off again)
    db.apply(statement_ops(txn(3, insert("t", [{"id": 1, "a": 1}]))))
    assert db.rows("t") == [{"id": 1, "a": 1}]
