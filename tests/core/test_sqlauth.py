"""The SQL authorizer's verdicts (``gateway.core.sqlauth``): what the leader refuses before
acknowledging a SQL statement, and -- as much -- what it must not refuse."""

from __future__ import annotations

import sqlite3

import pytest

from gateway.core.sqlauth import NONDETERMINISTIC, SqlAuthorizer, sql_problem

ROW_TABLES = {"items": ["id", "name", "qty"]}


@pytest.mark.parametrize("query", [
    "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)",
    "INSERT INTO notes (id, body) VALUES (1, @body)",
    "INSERT INTO notes VALUES (2, 'a;b -- not a comment')",
    "INSERT INTO notes VALUES (3, 'x'); -- a trailing comment",
    "UPDATE items SET qty = qty + 1 WHERE id = 3",
    "DELETE FROM items WHERE qty < 0",
    "INSERT INTO archive (id, name) SELECT id, name FROM items WHERE qty = 0",
    "CREATE INDEX by_name ON items (name)",
    "CREATE VIEW cheap AS SELECT * FROM items WHERE qty < 3",
    "SELECT count(*) FROM items",
    "INSERT INTO notes VALUES (4, upper(@body) || abs(-3) || length('x') || coalesce(NULL, 1))",
    "DROP TABLE notes",
    "ALTER TABLE notes ADD COLUMN extra TEXT",
    "/* leading comment */ INSERT INTO notes VALUES (5, 'y')",
])
def test_ordinary_statements_are_accepted(query):
    assert sql_problem(query, ["body"], ROW_TABLES) is None


@pytest.mark.parametrize(("query", "reason"), [
    ("ATTACH DATABASE '/tmp/x.db' AS x", "ATTACH"),
    ("DETACH DATABASE x", "DETACH"),
    ("PRAGMA journal_mode = DELETE", "PRAGMA"),
    ("BEGIN", "transaction control"),
    ("ROLLBACK", "transaction control"),
    ("SAVEPOINT s", "SAVEPOINT"),
    ("ANALYZE", "not allowed"),
    ("VACUUM", "VACUUM"),
    ("CREATE TEMP TABLE t (a)", "temporary objects"),
    ("CREATE TRIGGER t AFTER INSERT ON items BEGIN DELETE FROM items; END", "triggers"),
    ("SELECT * FROM sqlite_master", "sqlite_master"),
    ("SELECT * FROM _gateway_applied_sql", "_gateway_applied_sql"),
    ("INSERT INTO _gateway_applied_ranges VALUES (1, 1, 1)", "_gateway_applied_ranges"),
    ("UPDATE \"items$EX\" SET x = 1", "items$EX"),
    ("INSERT INTO apply_status VALUES (1, 2, 3)", "apply_status"),
    ("DROP TABLE items", "written by row statements"),
    ("ALTER TABLE items RENAME TO gone", "written by row statements"),
    ("INSERT INTO notes VALUES (random())", "random()"),
    ("INSERT INTO notes VALUES (hex(randomblob(4)))", "randomblob()"),
    ("INSERT INTO notes VALUES (strftime('%s', 'now'))", "strftime()"),
    ("INSERT INTO notes VALUES (julianday('now'))", "julianday()"),
    ("INSERT INTO notes VALUES (CURRENT_DATE)", "current_date()"),
    ("INSERT INTO notes VALUES (changes())", "changes()"),
    ("INSERT INTO notes VALUES (sqlite_version())", "sqlite_version()"),
    ("SELECT 1; SELECT 2", "more than one SQL statement"),
    ("INSRT INTO notes VALUES (1)", "not valid SQL"),
    ("INSERT INTO other.notes VALUES (1)", "schema-qualified"),
    ("INSERT INTO main.\"items$EX\" VALUES (1)", "items$EX"),
    ("INSERT INTO notes VALUES (@missing)", "missing"),
])
def test_what_every_replica_would_refuse_is_refused(query, reason):
    got = sql_problem(query, ["body"], ROW_TABLES)
    assert got is not None and reason in got, got


def test_the_authorizer_is_what_the_sqlite_applier_runs_under(tmp_path):
    """The same callback on a real database: a denied action raises, nothing is written,
    and every function of the refused list is refused by name."""
    conn = sqlite3.connect(tmp_path / "db", isolation_level=None)
    conn.execute("CREATE TABLE t (a)")
    auth = SqlAuthorizer()
    conn.set_authorizer(auth)
    for name in sorted(NONDETERMINISTIC):
        calls = [name.upper()] if name.startswith("current_") else \
            [f"{name}({args})" for args in ("", "1", "1, 2", "a")]
        missing = True
        for call in calls:  # one of them has the function's arity
            auth.reset()
            with pytest.raises(sqlite3.DatabaseError) as ei:
                conn.execute(f"INSERT INTO t SELECT {call} FROM t")
            missing = missing and "no such function" in str(ei.value)
            if auth.denied:
                break
        if missing:
            continue  # not in this SQLite build (timediff is 3.43+)
        assert f"function {name}()" in auth.denied, name
    auth.reset()
    conn.execute("INSERT INTO t VALUES (1)")
    assert auth.denied == ""
    conn.set_authorizer(None)
    assert conn.execute("SELECT a FROM t").fetchall() == [(1,)]
