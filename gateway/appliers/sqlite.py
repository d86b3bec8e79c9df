"""The embedded default applier: materialises the log's tables in one SQLite file.

- Tables are created from the operations' metadata on first sight (``CREATE TABLE IF NOT
  EXISTS`` with the key columns as the primary key) and widened with ``ALTER TABLE ... ADD
  COLUMN`` when a later operation names a new column. A table is named by its table name alone
  (SQLite has one schema per file); the schema it came from is remembered in
  ``_gateway_tables`` and a second schema with the same table name is refused
  (``UnsupportedOperationError``: dead-lettered, never merged silently).
- INSERT and UPSERT are ``INSERT OR REPLACE`` of exactly the given columns (idempotent);
  UPDATE and DELETE address the row by primary key (a missing row is a no-op); MOVE is a key
  change of an existing row.
- SQL operations run as they are, with their session variables bound as parameters: SQLite
  reads ``@name`` in a query as a named parameter, so values are never spliced into the text.
  Each SQL operation's ``(gtid, statement)`` is recorded in ``_gateway_applied_sql`` in the same
  transaction, and one already recorded is skipped: each runs exactly once in this store.
- Every batch is one SQLite transaction (``BEGIN IMMEDIATE``) that also records the batch's
  GTIDs in ``_gateway_applied`` -- data and GTIDs commit together or not at all.

Threads: each worker thread has its own connection (WAL journal, ``busy_timeout``); writing
transactions of one applier take turns on a lock (SQLite has one writer at a time anyway), and
a database busy or locked by another process is a ``TransientApplyError`` (retried).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from gateway.core.rowops import Column, Gtid, OpKind, RowOp, TableRef
from gateway.hookspecs import hookimpl
from gateway.v1 import value_pb2

from .contract import (
    SCOPE_NODE,
    Applier,
    ApplierConfigError,
    ApplierFactory,
    ApplyError,
    Capabilities,
    TransientApplyError,
    UnsupportedOperationError,
)
from .position import GtidSet

__all__ = ["SQLITE_FACTORY", "SqliteApplier", "gateway_register_appliers"]

FT = value_pb2.FieldType
_AFFINITY = {
    FT.FIELD_TYPE_BOOLEAN: "INTEGER", FT.FIELD_TYPE_INTEGER: "INTEGER",
    FT.FIELD_TYPE_UNSIGNED: "INTEGER", FT.FIELD_TYPE_TIMESTAMP: "INTEGER",
    FT.FIELD_TYPE_DOUBLE: "REAL", FT.FIELD_TYPE_BLOB: "BLOB", FT.FIELD_TYPE_UUID: "BLOB",
}
_MAX_I64 = 2**63 - 1
_SYSTEM_DDL = (
    "CREATE TABLE IF NOT EXISTS _gateway_applied (server_id INTEGER NOT NULL, "
    "trans_id INTEGER NOT NULL, PRIMARY KEY (server_id, trans_id)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS _gateway_applied_sql (server_id INTEGER NOT NULL, "
    "trans_id INTEGER NOT NULL, statement INTEGER NOT NULL, "
    "PRIMARY KEY (server_id, trans_id, statement)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS _gateway_tables (name TEXT PRIMARY KEY, schema TEXT NOT NULL)",
)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _db_value(value: Any) -> Any:
    """A value SQLite can bind: Decimal as text, booleans as 0/1, huge unsigned as text."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, int) and not isinstance(value, bool) and value > _MAX_I64:
        return str(value)
    return value


class SqliteApplier(Applier):
    """Applies operations to the SQLite database at ``path``; see the module docstring."""

    def __init__(self, path: str | Path, *, name: str = "sqlite", synchronous: str = "NORMAL",
                 busy_timeout_ms: int = 10_000, max_batch: int = 500) -> None:
        self.name = name
        self.path = Path(path)
        self.capabilities = Capabilities(accepts_sql=True, idempotent=True,
                                         max_batch=max_batch, thread_safe=True)
        self._synchronous = synchronous
        self._busy_ms = busy_timeout_ms
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        # SQLite has one writer at a time; queueing writers on a lock here is much cheaper than
        # letting them collide in SQLite's busy handler, which sleeps in millisecond steps.
        self._write_lock = threading.Lock()
        self._columns: dict[TableRef, set[str]] = {}  # committed table -> column names
        conn = self._connect()
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            for ddl in _SYSTEM_DDL:
                conn.execute(ddl)
        finally:
            conn.close()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                               timeout=self._busy_ms / 1000)
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        conn.execute(f"PRAGMA busy_timeout={int(self._busy_ms)}")
        return conn

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    # -- applying ------------------------------------------------------------------------------

    def apply(self, ops: Sequence[RowOp]) -> None:
        conn = self._conn()
        created: dict[TableRef, set[str]] = {}
        with self._write_lock:
            self._apply_locked(conn, ops, created)
        with self._lock:
            for table, cols in created.items():
                self._columns.setdefault(table, set()).update(cols)

    def _apply_locked(self, conn: sqlite3.Connection, ops: Sequence[RowOp],
                      created: dict[TableRef, set[str]]) -> None:
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for op in ops:
                    self._apply_one(conn, op, created)
                conn.executemany(
                    "INSERT OR IGNORE INTO _gateway_applied (server_id, trans_id) VALUES (?, ?)",
                    sorted({op.gtid for op in ops}))
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "locked" in text or "busy" in text:
                raise TransientApplyError(f"sqlite {self.path}: {text}") from None
            raise ApplyError(f"sqlite {self.path}: {text}") from None
        except sqlite3.Error as exc:
            raise ApplyError(f"sqlite {self.path}: {type(exc).__name__}: {exc}") from None

    def _apply_one(self, conn: sqlite3.Connection, op: RowOp,
                   created: dict[TableRef, set[str]]) -> None:
        if op.kind is OpKind.SQL:
            self._apply_sql(conn, op)
            return
        table = op.table.name
        self._ensure_table(conn, op, created)
        where = " AND ".join(f"{_q(c.name)} = ?" for c in op.key_columns)
        key = [_db_value(v) for v in op.key]
        if op.kind in (OpKind.INSERT, OpKind.UPSERT):
            cols = op.key_columns + op.columns
            conn.execute(
                f"INSERT OR REPLACE INTO {_q(table)} ({', '.join(_q(c.name) for c in cols)}) "
                f"VALUES ({', '.join('?' * len(cols))})",
                key + [_db_value(v) for v in op.values])
        elif op.kind is OpKind.UPDATE:
            if op.columns:
                conn.execute(
                    f"UPDATE {_q(table)} SET {', '.join(f'{_q(c.name)} = ?' for c in op.columns)}"
                    f" WHERE {where}", [_db_value(v) for v in op.values] + key)
        elif op.kind is OpKind.DELETE:
            conn.execute(f"DELETE FROM {_q(table)} WHERE {where}", key)
        elif op.kind is OpKind.MOVE:
            if conn.execute(f"SELECT 1 FROM {_q(table)} WHERE {where}", key).fetchone():
                new_key = [_db_value(v) for v in op.new_key or ()]
                conn.execute(f"DELETE FROM {_q(table)} WHERE {where}", new_key)
                cols = op.columns + op.key_columns
                conn.execute(
                    f"UPDATE {_q(table)} SET {', '.join(f'{_q(c.name)} = ?' for c in cols)} "
                    f"WHERE {where}", [_db_value(v) for v in op.values] + new_key + key)
        else:  # pragma: no cover - every kind is handled above
            raise UnsupportedOperationError(f"unknown operation kind {op.kind}")

    def _apply_sql(self, conn: sqlite3.Connection, op: RowOp) -> None:
        assert op.sql is not None
        ident = (op.gtid.server_id, op.gtid.trans_id, op.statement)
        if conn.execute("SELECT 1 FROM _gateway_applied_sql WHERE server_id = ? AND "
                        "trans_id = ? AND statement = ?", ident).fetchone():
            return
        params = {v.name: _db_value(v.value) for v in op.sql.variables}
        conn.execute(op.sql.query, params)
        conn.execute("INSERT INTO _gateway_applied_sql (server_id, trans_id, statement) "
                     "VALUES (?, ?, ?)", ident)

    def _ensure_table(self, conn: sqlite3.Connection, op: RowOp,
                      created: dict[TableRef, set[str]]) -> None:
        table = op.table.name
        with self._lock:  # keyed by (schema, name): another schema's table is checked below
            known = self._columns.get(op.table, set()) | created.get(op.table, set())
        wanted = op.key_columns + op.columns
        if known and all(c.name in known for c in wanted):
            return
        row = conn.execute("SELECT schema FROM _gateway_tables WHERE name = ?",
                           (table,)).fetchone()
        if row is not None and row[0] != op.table.schema:
            raise UnsupportedOperationError(
                f"table {table!r} of schema {op.table.schema!r} collides with the table of "
                f"schema {row[0]!r} already in {self.path}")
        if row is None:
            conn.execute("INSERT INTO _gateway_tables (name, schema) VALUES (?, ?)",
                         (table, op.table.schema))
        conn.execute(f"CREATE TABLE IF NOT EXISTS {_q(table)} ("
                     + ", ".join(_column_ddl(c) for c in op.key_columns + op.columns)
                     + f", PRIMARY KEY ({', '.join(_q(c.name) for c in op.key_columns)}))")
        present = {r[1] for r in conn.execute(f"PRAGMA table_info({_q(table)})")}
        for col in wanted:
            if col.name not in present:
                conn.execute(f"ALTER TABLE {_q(table)} ADD COLUMN {_column_ddl(col)}")
                present.add(col.name)
        created.setdefault(op.table, set()).update(present)

    # -- reading back --------------------------------------------------------------------------

    def applied_gtids(self) -> GtidSet:
        """GTIDs of every transaction with at least one operation committed in this store."""
        rows = self._conn().execute("SELECT server_id, trans_id FROM _gateway_applied")
        return GtidSet(Gtid(s, t) for s, t in rows)

    def rows(self, table: str) -> list[dict[str, Any]]:
        """Every row of ``table`` as a dict, in primary-key order (for tests and tools)."""
        cur = self._conn().execute(f"SELECT * FROM {_q(table)} ORDER BY 1")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur]

    def close(self) -> None:
        with self._lock:
            conns, self._connections = self._connections, []
        for conn in conns:
            conn.close()
        self._local = threading.local()


def _column_ddl(col: Column) -> str:
    return f"{_q(col.name)} {_AFFINITY.get(col.type, 'TEXT')}"


def _create(options: Mapping[str, str]) -> SqliteApplier:
    path = options.get("path")
    if not path:
        raise ApplierConfigError("applier 'sqlite': option 'path' is required "
                                 "(-o path=FILE.db)")
    sync = options.get("synchronous", "NORMAL").upper()
    if sync not in ("OFF", "NORMAL", "FULL", "EXTRA"):
        raise ApplierConfigError(f"applier 'sqlite': synchronous must be OFF, NORMAL, FULL or "
                                 f"EXTRA, not {sync!r}")
    try:
        batch = int(options.get("max_batch", "500"))
        if batch < 1:
            raise ValueError
    except ValueError:
        raise ApplierConfigError("applier 'sqlite': max_batch must be a positive integer, "
                                 f"not {options.get('max_batch')!r}") from None
    try:
        return SqliteApplier(path, synchronous=sync, max_batch=batch)
    except sqlite3.Error as exc:
        raise ApplierConfigError(f"applier 'sqlite': cannot open {path}: {exc}") from None


SQLITE_FACTORY = ApplierFactory(
    name="sqlite",
    create=_create,
    description="embedded default: materialises tables in one SQLite file",
    options={
        "path": "the SQLite database file (created if missing); required",
        "synchronous": "PRAGMA synchronous: OFF, NORMAL (default), FULL or EXTRA",
        "max_batch": "operations per SQLite transaction (default 500)",
    },
    scope=SCOPE_NODE,  # every node materialises its own local file
)


@hookimpl
def gateway_register_appliers() -> list[ApplierFactory]:
    """The built-in plugin ``sqlite`` (entry point of the gateway distribution itself)."""
    return [SQLITE_FACTORY]
