"""Out of space under an applier (issue 52, item 3): a full disk is "store unavailable,
retrying" -- never a dead letter -- for the SQLite applier (SQLITE_FULL, driven here by
SQLite's ``max_page_count``) and for any plugin raising ``ENOSPC``/``EDQUOT``; status shows
``out of space: <path>`` while it waits."""

from __future__ import annotations

import errno
import sqlite3
import threading

import pytest

from gateway.appliers import sqlite as sqlite_applier
from gateway.appliers.contract import (
    ApplyError,
    OutOfSpaceError,
    is_transient,
    is_unavailable,
    out_of_space,
    unavailable_text,
)
from gateway.appliers.dispatcher import Dispatcher
from gateway.appliers.position import PositionStoreError
from gateway.appliers.source import MemorySource
from gateway.appliers.sqlite import ColumnOps, SqliteApplier
from gateway.core.rowops import Column, OpKind, TableRef, statement_ops
from gateway.v1 import value_pb2
from tests.appliers.fakes import ModelApplier
from tests.appliers.test_dispatcher import FAST, config, sequential, workload
from tests.reducer.model import insert, txn

FT = value_pb2.FieldType


class CappedSqlite(SqliteApplier):
    """The SQLite applier on a "disk" of ``cap`` pages (``PRAGMA max_page_count`` on every
    connection): a full disk without root. After ``full_for`` failed attempts the cap is
    lifted on every connection (space returns)."""

    def __init__(self, *args, cap: int = 0, full_for: int = 1 << 30, **kw) -> None:
        self.cap = cap
        self.full_for = full_for
        self.full_attempts = 0
        self.seen: list[str] = []
        self.metrics = None
        super().__init__(*args, **kw)

    def _connect(self) -> sqlite3.Connection:
        conn = super()._connect()
        if self.cap:
            conn.execute(f"PRAGMA max_page_count={self.cap}")
        return conn

    def _apply_counted(self, fn, *args):
        try:
            return fn(*args)
        except OutOfSpaceError:
            self.full_attempts += 1
            if self.metrics is not None:
                self.seen.append(self.metrics.unavailable_error())
            if self.full_attempts >= self.full_for:
                self.cap = 0
                for conn in list(self._connections):
                    conn.execute("PRAGMA max_page_count=1073741823")
            raise

    def apply(self, ops):
        return self._apply_counted(super().apply, ops)

    def apply_columns(self, batches, gtids, ops=()):
        return self._apply_counted(super().apply_columns, batches, gtids, ops)


def _page_count(path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("PRAGMA page_count").fetchone()[0])


def test_a_full_sqlite_database_raises_out_of_space_naming_the_file_not_a_rollback_error(
        tmp_path):
    path = tmp_path / "out.db"
    SqliteApplier(path).close()
    applier = CappedSqlite(path, cap=_page_count(path))
    ops = statement_ops(txn(1, insert("t", [{"id": i, "b": "x" * 500} for i in range(200)])))
    with pytest.raises(OutOfSpaceError) as caught:
        applier.apply(ops)
    assert str(caught.value) == f"out of space: {path}"
    assert "rollback" not in str(caught.value)
    applier.cap = 0
    for conn in applier._connections:
        conn.execute("PRAGMA max_page_count=1073741823")
    applier.apply(ops)  # nothing of the failed transaction stayed behind; it applies whole
    assert len(applier.rows("t")) == 200
    applier.close()


@pytest.mark.parametrize("binder", ["c", "sqlite3"])
def test_a_full_sqlite_database_under_a_bulk_batch_raises_out_of_space_either_way(
        tmp_path, monkeypatch, binder):
    """The columns path's statements of many rows (bound in C when the binder is built)
    fail on a full database as the sqlite3 module's do: out of space, nothing kept."""
    if binder == "sqlite3":
        monkeypatch.setattr(sqlite_applier, "_BIND", None)
    path = tmp_path / "out.db"

    def batch_of(n: int) -> ColumnOps:
        return ColumnOps(TableRef("s", "t"), OpKind.INSERT,
                         (Column("id", FT.FIELD_TYPE_INTEGER),),
                         (Column("b", FT.FIELD_TYPE_VARCHAR),), [list(range(n))],
                         [["x" * 500] * n])

    first = SqliteApplier(path)
    first.apply_columns([batch_of(1)], [(1, 1)])  # the table exists: the rows fill the disk
    first.close()
    applier = CappedSqlite(path, cap=_page_count(path) + 2)
    batch = batch_of(300)
    with pytest.raises(OutOfSpaceError) as caught:
        applier.apply_columns([batch], [(1, n) for n in range(1, 301)])
    assert str(caught.value) == f"out of space: {path}"
    applier.cap = 0
    for conn in applier._connections:
        conn.execute("PRAGMA max_page_count=1073741823")
    assert applier.apply_columns([batch], [(1, n) for n in range(1, 301)]) == 300
    assert len(applier.rows("t")) == 300
    applier.close()


def test_a_full_sqlite_disk_is_retried_until_space_returns_and_nothing_is_dead_lettered(
        tmp_path):
    path = tmp_path / "out.db"
    SqliteApplier(path).close()
    applier = CappedSqlite(path, cap=_page_count(path), full_for=4 * FAST.max_attempts)
    txns = workload(5, n=60, with_sql=False)
    d = Dispatcher(applier, MemorySource(txns), tmp_path / "state",
                   config=config(threads=2))
    applier.metrics = d.metrics
    d.run()
    assert applier.full_attempts >= 4 * FAST.max_attempts  # past max_attempts: not a budget
    assert d.metrics.dead_letters == 0 and d.dead_letters.letters() == []
    assert f"out of space: {path}" in applier.seen
    expected = {k[1][0]: v.get("a") for k, v in sequential(txns)[0].items()}
    assert {r["id"]: r["a"] for r in applier.rows("t")} == expected
    assert d.metrics.unavailable == 0 and d.metrics.unavailable_error() == ""
    applier.close()


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_plugin_raising_no_space_is_retried_with_status_naming_the_path(tmp_path, code):
    """A plugin need not know the contract's class: an ``OSError`` with ENOSPC or EDQUOT
    (raised directly or as the cause of its own error) is out of space too."""
    full = threading.Event()
    full.set()
    seen: list[tuple[int, str]] = []

    def disk(op, attempt):
        if full.is_set():
            seen.append((d.metrics.unavailable, d.metrics.unavailable_error()))
            if attempt >= 3 * FAST.max_attempts:
                full.clear()
            cause = OSError(code, "No space left on device", "/mnt/sink/segment-7")
            if attempt % 2:
                raise cause
            raise RuntimeError("sink write failed") from cause

    applier = ModelApplier(fail=disk)
    txns = workload(9, n=12, with_sql=False)
    d = Dispatcher(applier, MemorySource(txns), tmp_path, config=config(threads=1))
    d.run()
    assert applier.store == sequential(txns)[0]
    assert d.metrics.dead_letters == 0
    assert (1, "out of space: /mnt/sink/segment-7") in seen


def test_out_of_space_is_recognised_through_the_exception_chain():
    assert out_of_space(OutOfSpaceError("a/b.db")) == "a/b.db"
    assert out_of_space(OSError(errno.ENOSPC, "No space left on device", "/x")) == "/x"
    assert out_of_space(OSError(errno.EDQUOT, "Disk quota exceeded")) == "Disk quota exceeded"
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device", "/y")
        except OSError as exc:
            raise ApplyError("wrapped") from exc
    except ApplyError as wrapped:
        assert out_of_space(wrapped) == "/y"
        assert is_unavailable(wrapped) and is_transient(wrapped)
        assert unavailable_text(wrapped) == "out of space: /y"
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = sqlite3.SQLITE_FULL
    assert out_of_space(full) is not None
    for other in (OSError(errno.EIO, "I/O error", "/z"), ApplyError("no such table: t"),
                  ValueError("bad")):
        assert out_of_space(other) is None
        assert not is_unavailable(other)


def test_a_full_disk_under_the_position_file_waits_instead_of_stopping_the_applier(tmp_path):
    """The position file shares the data directory's disk: a save that finds it full is
    retried with backoff (Status: ``out of space: <file>``), never an applier stopped for
    good."""
    applier = ModelApplier()
    txns = workload(4, n=20, with_sql=False)
    d = Dispatcher(applier, MemorySource(txns), tmp_path, config=config(threads=1))
    real = d.positions.save
    failures = {"left": 5}
    seen: list[str] = []

    def save(position):
        if failures["left"]:
            failures["left"] -= 1
            seen.append(d.metrics.unavailable_error())
            try:
                raise OSError(errno.ENOSPC, "No space left on device", str(d.positions.path))
            except OSError as exc:
                raise PositionStoreError(f"{d.positions.path}: cannot write: "
                                         f"{exc.strerror}") from exc
        real(position)

    d.positions.save = save
    position = d.run()
    assert failures["left"] == 0 and position.log_index == len(txns)
    assert d.positions.load().log_index == len(txns)
    assert f"out of space: {d.positions.path}" in seen
    assert d.metrics.unavailable_error() == ""
    assert applier.store == sequential(txns)[0]


def test_a_dead_letter_on_a_full_disk_waits_for_space_instead_of_stopping(tmp_path):
    from gateway.appliers.deadletter import DeadLetterError

    def poison(op, attempt):
        if op.key == (2,):
            raise ApplyError("never applies")

    applier = ModelApplier(fail=poison)
    d = Dispatcher(applier, MemorySource([txn(1, insert("t", [{"id": 1}, {"id": 2}])),
                                          txn(2, insert("t", [{"id": 3}]))]),
                   tmp_path, config=config(threads=1))
    real = d.dead_letters.add
    left = {"n": 3}
    seen: list[str] = []

    def add(*args, **kw):
        if left["n"]:
            left["n"] -= 1
            seen.append(d.metrics.unavailable_error())
            try:
                raise OSError(errno.ENOSPC, "No space left on device", str(d.dead_letters.path))
            except OSError as exc:
                raise DeadLetterError(f"{d.dead_letters.path}: cannot write") from exc
        return real(*args, **kw)

    d.dead_letters.add = add
    d.run()
    (letter,) = d.dead_letters.letters()
    assert letter.operation().key == (2,)
    assert f"out of space: {d.dead_letters.path}" in seen
    assert d.metrics.dead_letters == 1 and d.metrics.unavailable_error() == ""
    assert set(applier.store) == {(("s", "t"), (1,)), (("s", "t"), (3,))}


class _FailingCommit:
    """A connection whose next COMMIT fails with SQLITE_IOERR_FSYNC (an fsync error)."""

    def __init__(self, conn: sqlite3.Connection, owner: FsyncFailing) -> None:
        self._conn = conn
        self._owner = owner
        self.closed = False

    def execute(self, sql, *args):
        if sql == "COMMIT" and self._owner.fail_commits:
            self._owner.fail_commits -= 1
            self._conn.execute("ROLLBACK")
            exc = sqlite3.OperationalError("disk I/O error")
            exc.sqlite_errorcode = sqlite3.SQLITE_IOERR_FSYNC
            raise exc
        return self._conn.execute(sql, *args)

    def close(self):
        self.closed = True
        self._conn.close()

    def __getattr__(self, name):
        return getattr(self._conn, name)


class FsyncFailing(SqliteApplier):
    def __init__(self, *args, fail_commits: int = 0, **kw) -> None:
        self.fail_commits = 0
        self.opened: list[_FailingCommit] = []
        super().__init__(*args, **kw)
        self.fail_commits = fail_commits

    def _connect(self):
        conn = _FailingCommit(super()._connect(), self)
        self.opened.append(conn)
        return conn


def test_an_sqlite_io_error_reopens_the_database_and_retries_never_dead_letters(tmp_path):
    """SQLITE_IOERR (a failed fsync): the connection whose fsync failed is closed (never
    fsynced again) and the batch is retried on a new one, as store unavailable."""
    applier = FsyncFailing(tmp_path / "out.db", fail_commits=2 * FAST.max_attempts)
    txns = workload(6, n=15, with_sql=False)
    d = Dispatcher(applier, MemorySource(txns), tmp_path / "state", config=config(threads=1))
    d.run()
    assert d.metrics.dead_letters == 0
    failed = [c for c in applier.opened if c.closed]
    assert len(failed) >= 2 * FAST.max_attempts  # one closed connection per failed fsync
    expected = {k[1][0]: v.get("a") for k, v in sequential(txns)[0].items()}
    assert {r["id"]: r["a"] for r in applier.rows("t")} == expected
    applier.close()
