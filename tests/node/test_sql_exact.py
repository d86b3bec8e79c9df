"""`gateway sql` translates exactly or refuses in one line (issue 12 item 11), and answers
SELECT by primary key and key range."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from gateway.cli.sql import SqlError, parse_select, sql_to_statements
from gateway.cli.sql_ddl import parse_ddl

from .conftest import free_ports

GATEWAY = [sys.executable, "-m", "gateway.cli"]


@pytest.mark.parametrize(("text", "why"), [
    ("INSERT INTO shop.items (id, id) VALUES (13, 14)", "'id' is given twice"),
    ("INSERT INTO shop.items (id, name) VALUES (1, 'a') ON DUPLICATE KEY UPDATE name = 'b'",
     "ON DUPLICATE KEY UPDATE"),
    ("INSERT IGNORE INTO shop.items (id) VALUES (1)", "IGNORE"),
    ("INSERT INTO shop.items (id) VALUES (99999999999999999999999)", "64-bit range"),
    ("INSERT INTO shop.items (id) VALUES (9223372036854775808)", "64-bit range"),
    ("INSERT INTO shop.items (id) VALUES (-9223372036854775809)", "64-bit range"),
    ("INSERT INTO shop.items (id) VALUES (1e999)", "out of range"),
    ("INSERT INTO shop.items (id) VALUES (1) RETURNING id", "RETURNING"),
    ("INSERT INTO shop.items (id) SELECT 1", "INSERT ... VALUES"),
    ("INSERT INTO cat.shop.items (id) VALUES (1)", "catalog"),
    ("INSERT INTO shop.items (id) VALUES (ABS(1))", "only literals"),
    ("REPLACE INTO shop.items (id) VALUES (1)", "unsupported statement"),
    ("UPDATE shop.items SET a = 1, a = 2 WHERE id = 1", "'a' is set twice"),
    ("UPDATE shop.items SET a = 1 WHERE id = 1 LIMIT 1", "LIMIT"),
    ("UPDATE shop.items SET a = 1 WHERE id = 1 AND id = 2", "'id' is given twice"),
    ("DELETE FROM shop.items WHERE id = 1 ORDER BY id", "ORDER BY"),
    ("DELETE FROM shop.items WHERE items.id = 1", "plain column name"),
    ("SELECT * FROM shop.items; INSERT INTO shop.items (id) VALUES (1)", "only statement"),
])
def test_anything_not_translated_exactly_is_refused(text, why):
    with pytest.raises(SqlError) as err:
        if text.startswith("SELECT"):
            parse_select(text)
        else:
            sql_to_statements(text)
    assert why in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("text", "shown"), [
    ("SELEC broken", "SELEC broken"),
    ("  REPLACE INTO shop.items (id)\n  VALUES (1);", "REPLACE INTO shop.items (id) VALUES (1)"),
    ("SET @a = 1; REPLACE INTO s.t (id) VALUES (@a)", "REPLACE INTO s.t (id) VALUES (@a)"),
    ("REPLACE INTO shop.items (id, name) VALUES (1, 'a very long name that goes on and on')",
     "REPLACE INTO shop.items (id, name) VALUES (1, 'a very lon..."),
])
def test_an_unsupported_statement_is_quoted_as_written(text, shown):
    with pytest.raises(SqlError) as err:
        sql_to_statements(text)
    assert f"unsupported statement: {shown!r} " in str(err.value)


def test_an_unsupported_definition_is_quoted_as_written():
    with pytest.raises(SqlError) as err:
        parse_ddl("TRUNCATE  shop.items")
    assert "unsupported statement: 'TRUNCATE shop.items'" in str(err.value)


def test_the_smallest_64_bit_integer_is_accepted():
    (stmt,) = sql_to_statements("INSERT INTO s.t (id) VALUES (-9223372036854775808)")
    assert stmt.insert.records[0].key_values[0].int_value == -(1 << 63)


@pytest.mark.parametrize(("text", "why"), [
    ("SELECT * FROM shop.items ORDER BY id", "ORDER BY"),
    ("SELECT COUNT(*) FROM shop.items", "plain column name"),
    ("SELECT * FROM shop.items a JOIN shop.b b", "JOIN"),
    ("SELECT * FROM shop.items WHERE id > 1 AND qty < 3", "two columns"),
    ("SELECT * FROM shop.items WHERE id > 1 AND id > 2", "two lower bounds"),
    ("SELECT * FROM shop.items WHERE id = 1 OR id = 2", "joined by AND"),
    ("SELECT * FROM shop.items LIMIT -1", "LIMIT"),
    ("SELECT 1", "FROM"),
])
def test_unsupported_selects_are_refused(text, why):
    with pytest.raises(SqlError) as err:
        parse_select(text)
    assert why in str(err.value), str(err.value)


def test_select_parses_key_and_range_terms():
    q = parse_select("SELECT id, name FROM shop.items WHERE region = 'eu' AND id > 3 "
                     "AND id <= 9 LIMIT 2")
    assert (q.table, q.columns, q.equal) == ("shop.items", ["id", "name"], {"region": "eu"})
    assert (q.range_column, q.lower, q.upper, q.limit) == ("id", (3, False), (9, True), 2)
    b = parse_select("SELECT * FROM shop.items WHERE id BETWEEN 1 AND 5")
    assert (b.columns, b.lower, b.upper) == (None, (1, True), (5, True))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GATEWAY, *args], capture_output=True, text=True, timeout=60)


def test_sql_select_by_key_and_range_against_a_running_node(tmp_path):
    api, peer = free_ports(2)
    target = f"127.0.0.1:{api}"
    proc = subprocess.Popen(
        [*GATEWAY, "run", "--api", target, "--listen", f"127.0.0.1:{peer}", "--data-dir",
         str(tmp_path / "data"), "--appliers", ""], stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while True:
            st = _cli("status", "--target", target, "--format", "json")
            if st.returncode == 0 and json.loads(st.stdout).get("role") == "leader":
                break
            assert proc.poll() is None and time.monotonic() < deadline, st.stderr
            time.sleep(0.3)
        rows = ", ".join(f"({i}, 'n{i}')" for i in range(1, 13))
        assert _cli("sql", "-t", target, f"INSERT INTO shop.items (id, name) VALUES {rows}"
                    ).returncode == 0
        stock = ", ".join(f"('{r}', {i}, {i * 10})" for r in ("eu", "us") for i in range(1, 6))
        w = _cli("sql", "-t", target, "--key", "region,id",
                 f"INSERT INTO shop.stock (region, id, qty) VALUES {stock}")
        assert w.returncode == 0, w.stderr

        def select(text: str) -> list[list[str]]:
            r = _cli("sql", "-t", target, text)
            assert r.returncode == 0, r.stderr
            return [line.split() for line in r.stdout.splitlines()]

        assert select("SELECT * FROM shop.items WHERE id = 7") == [["id", "name"], ["7", "n7"]]
        assert select("SELECT name FROM shop.items WHERE id = 99") == []
        assert [r[0] for r in select("SELECT id FROM shop.items WHERE id BETWEEN 3 AND 6")
                ] == ["id", "3", "4", "5", "6"]
        assert [r[0] for r in select("SELECT id FROM shop.items WHERE id > 3 AND id < 6")
                ] == ["id", "4", "5"]
        assert [r[0] for r in select("SELECT id FROM shop.items WHERE id >= 10")
                ] == ["id", "10", "11", "12"]
        assert len(select("SELECT * FROM shop.items LIMIT 4")) == 5
        assert select("SELECT qty FROM shop.stock WHERE id = 2 AND region = 'us'") == [
            ["qty"], ["20"]]
        assert [r[1] for r in select("SELECT region, id FROM shop.stock WHERE region = 'eu' "
                                     "AND id >= 4")] == ["id", "4", "5"]
        bad = _cli("sql", "-t", target, "SELECT * FROM shop.stock WHERE id = 2")
        assert bad.returncode == 2 and "prefix of the key columns (region, id)" in bad.stderr
        assert "Traceback" not in bad.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
