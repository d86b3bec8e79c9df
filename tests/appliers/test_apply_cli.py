"""``gateway apply`` and ``gateway deadletter list|replay|discard`` end to end."""

from __future__ import annotations

import json
import sqlite3

from click.testing import CliRunner

from gateway.cli import logtool, main
from tests.reducer.model import insert, sql, txn, update


def _write(path, *txns):
    for t in txns:
        logtool.append_transaction(path, t)


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_apply_materialises_the_log_and_resumes_where_it_stopped(tmp_path):
    log, db = tmp_path / "log", tmp_path / "out.db"
    _write(log, txn(1, insert("t", [{"id": 1, "a": 1}]), update("t", ["a"], [(1, [2])])))
    result = _run("apply", log, "-o", f"path={db}")
    assert result.exit_code == 0, result.output
    assert "applied 1 operations (2 before reduction)" in result.output
    assert "position 1, applied GTIDs 1:1" in result.output
    _write(log, txn(2, insert("t", [{"id": 2, "a": 5}])))
    result = _run("apply", log, "-o", f"path={db}")
    assert "applied 1 operations" in result.output and "position 2" in result.output
    rows = sqlite3.connect(db).execute("SELECT id, a FROM t ORDER BY id").fetchall()
    assert rows == [(1, 2), (2, 5)]


def test_bad_input_is_one_line_with_exit_code_2(tmp_path):
    for args, message in [
        (["apply", tmp_path / "missing", "-o", "path=x.db"], "no such log file"),
        (["apply", tmp_path / "missing", "--applier", "cassandra"], "no such log file"),
        (["--plugins", "nope", "plugins"], "unknown plugin 'nope' (installed: "),
        (["deadletter", "list", "--state-dir", tmp_path / "none"], "no such state directory"),
    ]:
        result = _run(*args)
        assert result.exit_code == 2, (args, result.output)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.output
    _write(tmp_path / "log", txn(1, insert("t", [{"id": 1}])))
    result = _run("apply", tmp_path / "log", "--applier", "no-such-store")
    assert result.exit_code == 2 and "unknown applier 'no-such-store' (available: " in result.output
    result = _run("apply", tmp_path / "log", "-o", "nonsense")
    assert result.exit_code == 2 and "expected NAME=VALUE" in result.output


def test_dead_letters_are_listed_replayed_and_discarded(tmp_path):
    log, db, state = tmp_path / "log", tmp_path / "out.db", tmp_path / "state"
    _write(log, txn(1, sql("INSERT INTO later VALUES (@v)", v="x")),
           txn(2, sql("INSERT INTO never VALUES (1)")), txn(3, insert("t", [{"id": 1}])))
    result = _run("apply", log, "-o", f"path={db}", "--state-dir", state, "--max-attempts", "1")
    assert result.exit_code == 1 and "2 operations dead-lettered" in result.output
    assert "position 3" in result.output  # dead letters do not hold the position back

    listed = _run("deadletter", "list", "--state-dir", state, "--format", "jsonl")
    letters = [json.loads(line) for line in listed.output.splitlines()]
    assert [(x["id"], x["gtid"], x["kind"], x["state"]) for x in letters] == [
        (1, "1:1", "SQL", "open"), (2, "1:2", "SQL", "open")]
    assert "no such table: later" in letters[0]["error"]

    sqlite3.connect(db).execute("CREATE TABLE later (v TEXT)")
    replay = _run("deadletter", "replay", "1", "2", "--state-dir", state, "-o", f"path={db}")
    assert replay.exit_code == 1 and "#1: replayed" in replay.output
    assert "#2: still failing" in replay.output
    assert sqlite3.connect(db).execute("SELECT v FROM later").fetchall() == [("x",)]

    discard = _run("deadletter", "discard", "2", "--state-dir", state, "--note", "obsolete")
    assert discard.exit_code == 0 and "#2: discarded" in discard.output
    assert _run("deadletter", "list", "--state-dir", state).stdout == ""
    everything = _run("deadletter", "list", "--all", "--state-dir", state).output
    assert "[replayed]" in everything and "[discarded]" in everything
    again = _run("deadletter", "discard", "2", "--state-dir", state)
    assert again.exit_code == 2 and "dead letter 2 is not open" in again.output
