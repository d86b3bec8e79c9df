"""Schema events in the SQLite applier: CREATE from a definition, ADD/DROP/RENAME COLUMN,
DROP TABLE, rows of older versions fitted to the table, and idempotent replays."""

from __future__ import annotations

import sqlite3

import pytest

from gateway.appliers.dispatcher import Dispatcher, DispatcherConfig
from gateway.appliers.source import LogFileSource, MemorySource
from gateway.appliers.sqlite import SqliteApplier
from gateway.schema.apply import plan_drop_table
from gateway.schema.model import Column, SchemaEvent
from tests.appliers.schema_log import (
    FINAL,
    TABLE,
    events,
    insert,
    schema_log,
    txn,
    write_log,
)
from tests.reducer.model import insert as plain_insert
from tests.reducer.model import txn as plain_txn


def columns(db: SqliteApplier, table: str = "items") -> dict[str, tuple[str, str | None]]:
    return {r[1]: (r[2], r[4]) for r in db._conn().execute(f"PRAGMA table_info({table})")}


def run(db: SqliteApplier, items: list, state, **kw) -> None:
    kw.setdefault("save_interval", 0.0)
    Dispatcher(db, MemorySource(items), state, config=DispatcherConfig(**kw)).run()


@pytest.mark.parametrize("threads", [1, 4])
def test_a_log_spanning_create_add_rename_and_drop_ends_with_the_upcast_table(tmp_path,
                                                                                threads):
    db = SqliteApplier(tmp_path / "out.db")
    run(db, schema_log(), tmp_path / "state", threads=threads)
    assert db.rows("items") == FINAL
    assert columns(db) == {"id": ("INTEGER", None), "qty": ("INTEGER", None),
                           "c": ("INTEGER", "0")}
    assert db._conn().execute("SELECT version FROM _gateway_schema WHERE name = 'items'"
                              ).fetchone() == (4,)


def test_create_makes_the_table_from_its_definition_before_any_row(tmp_path):
    db = SqliteApplier(tmp_path / "out.db")
    db.apply_schema(events()[0])
    assert columns(db) == {"id": ("INTEGER", None), "a": ("INTEGER", None),
                           "b": ("TEXT", None)}
    pk = [r[1] for r in db._conn().execute("PRAGMA table_info(items)") if r[5]]
    assert pk == ["id"] and db.rows("items") == []


def test_every_change_replayed_after_a_crash_is_a_no_op(tmp_path):
    db = SqliteApplier(tmp_path / "out.db")
    log = schema_log()
    run(db, log, tmp_path / "state")
    # a crash after the changes were committed but before the position was saved: the
    # whole log comes again, from a position file that knows nothing
    run(db, log, tmp_path / "other-state")
    assert db.rows("items") == FINAL
    for e in events():  # and each event handed over again, alone, changes nothing
        db.apply_schema(e)
    assert db.rows("items") == FINAL
    assert set(columns(db)) == {"id", "qty", "c"}


def test_a_replayed_add_of_a_column_the_rows_made_already_is_a_no_op(tmp_path):
    # a table made by its rows (no CREATE event), widened by a row naming c; then the ADD
    db = SqliteApplier(tmp_path / "out.db")
    run(db, [txn(1, insert({"id": 1, "a": 1, "b": "x"})),
             txn(2, insert({"id": 2, "a": 2, "b": "y", "c": 5}))], tmp_path / "s1")
    add_c = events()[1]
    db.apply_schema(add_c)
    db.apply_schema(add_c)
    assert db.rows("items") == [{"id": 1, "a": 1, "b": "x", "c": None},
                                {"id": 2, "a": 2, "b": "y", "c": 5}]


def test_a_change_of_a_table_never_seen_creates_it_from_the_definition(tmp_path):
    # an applier started after the CREATE (a backfill, a target rebuilt): the first event it
    # sees carries the whole definition
    db = SqliteApplier(tmp_path / "out.db")
    db.apply_schema(events()[2])  # the rename, version 3
    assert set(columns(db)) == {"id", "qty", "b", "c"}
    assert columns(db)["c"] == ("INTEGER", "0")


def test_drop_table_removes_the_table_and_its_bookkeeping_and_replays_cleanly(tmp_path):
    db = SqliteApplier(tmp_path / "out.db")
    log = schema_log()
    from gateway.schema.apply import apply_event

    current = None
    for e in events():
        current = apply_event(current, e)
    drop = plan_drop_table(current, TABLE)
    run(db, [*log, drop], tmp_path / "state")
    assert db._conn().execute("SELECT name FROM sqlite_master WHERE name = 'items'"
                              ).fetchone() is None
    assert db._conn().execute("SELECT * FROM _gateway_schema").fetchall() == []
    assert db._conn().execute("SELECT * FROM _gateway_tables").fetchall() == []
    db.apply_schema(drop)  # a replay
    run(db, [*log, drop], tmp_path / "again")  # the whole log replayed ends the same
    assert db._conn().execute("SELECT name FROM sqlite_master WHERE name = 'items'"
                              ).fetchone() is None


def test_a_log_without_schema_events_still_creates_and_widens_tables_from_rows(tmp_path):
    db = SqliteApplier(tmp_path / "out.db")
    run(db, [plain_txn(1, plain_insert("t", [{"id": 1, "a": 1}])),
             plain_txn(2, plain_insert("t", [{"id": 2, "a": 2, "b": "x"}]))], tmp_path / "s")
    assert db.rows("t") == [{"id": 1, "a": 1, "b": None}, {"id": 2, "a": 2, "b": "x"}]
    assert db._conn().execute("SELECT * FROM _gateway_schema").fetchall() == []


def test_a_schema_event_of_a_table_of_another_schema_is_not_supported(tmp_path):
    from gateway.appliers.contract import UnsupportedOperationError

    db = SqliteApplier(tmp_path / "out.db")
    run(db, [plain_txn(1, plain_insert("items", [{"id": 1, "a": 1}]))], tmp_path / "s")
    other = SchemaEvent("other.items", 1, "create", definition=events()[0].definition)
    with pytest.raises(UnsupportedOperationError, match="collides"):
        db.apply_schema(other)


def test_drop_column_needs_sqlite_3_35_and_older_ones_report_it(tmp_path, monkeypatch):
    from gateway.appliers import sqlite_schema
    from gateway.appliers.contract import UnsupportedOperationError

    assert sqlite3.sqlite_version_info >= (3, 35, 0)  # this machine's: drops for real
    db = SqliteApplier(tmp_path / "out.db")
    create, add_c, rename, drop_b = events()
    for e in (create, add_c, rename):
        db.apply_schema(e)
    monkeypatch.setattr(sqlite_schema, "DROP_COLUMN_VERSION", (99, 0, 0))
    with pytest.raises(UnsupportedOperationError, match=r"cannot drop a column .* 'b'"):
        db.apply_schema(drop_b)
    assert "b" in columns(db)


def test_schema_events_in_a_log_file_reach_the_applier_in_order(tmp_path):
    write_log(tmp_path / "log.bin", schema_log())
    db = SqliteApplier(tmp_path / "out.db")
    Dispatcher(db, LogFileSource(tmp_path / "log.bin"), tmp_path / "state",
               config=DispatcherConfig(save_interval=0.0)).run()
    assert db.rows("items") == FINAL


def test_the_default_column_value_reads_back_for_old_rows_and_is_typed(tmp_path):
    db = SqliteApplier(tmp_path / "out.db")
    create = events()[0]
    db.apply_schema(create)
    run(db, [create, txn(1, insert({"id": 1, "a": 1, "b": "x"}))], tmp_path / "s")
    add = SchemaEvent(TABLE, 2, "add_column", column=Column("note", "VARCHAR", "it's"),
                      definition=create.definition)
    db.apply_schema(add)
    assert db.rows("items") == [{"id": 1, "a": 1, "b": "x", "note": "it's"}]


def test_the_winner_of_concurrent_adds_replaces_the_losing_column_applied_here(tmp_path):
    """Two clusters added ``d`` on the same version with different types; this cluster's
    applier applied its own (the loser), then the node switched to the winner and handed it
    over at the same version (docs/schema.md, "Across clusters"): the table takes the
    winner's column, every row reading its default, as the node's rows do."""
    from gateway.schema.apply import apply_event, plan_add_column

    db = SqliteApplier(tmp_path / "out.db")
    create = events()[0]
    base = apply_event(None, create)
    mine = plan_add_column(base, TABLE, Column("d", "VARCHAR", "x"), origin="2")
    winner = plan_add_column(base, TABLE, Column("d", "INTEGER", 1), origin="1")
    db.apply_schema(create)
    run(db, [txn(1, insert({"id": 1, "a": 1, "b": "p"}))], tmp_path / "s1")
    db.apply_schema(mine)
    assert db.rows("items")[0]["d"] == "x"
    db.apply_schema(winner)
    assert columns(db)["d"] == ("INTEGER", "1")
    assert db.rows("items") == [{"id": 1, "a": 1, "b": "p", "d": 1}]
    db.apply_schema(winner)  # replayed: nothing more
    assert db.rows("items") == [{"id": 1, "a": 1, "b": "p", "d": 1}]
