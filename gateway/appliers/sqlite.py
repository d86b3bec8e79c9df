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
  They run under ``gateway.core.sqlauth.SqlAuthorizer`` (no ATTACH, PRAGMA, bookkeeping
  tables or non-deterministic functions): a denied one is an ``UnsupportedOperationError``.
  Each SQL operation's ``(gtid, statement)`` is recorded in ``_gateway_applied_sql`` in the same
  transaction, and one already recorded is skipped: each runs exactly once in this store.
- Every batch is one SQLite transaction (``BEGIN IMMEDIATE``) that also records the batch's
  GTIDs in ``_gateway_applied_ranges`` -- data and GTIDs commit together or not at all. The
  table holds disjoint, never adjacent ranges ``(server_id, first, last)`` of trans ids: a
  batch's GTIDs are merged in (one range per run of consecutive trans ids), so the table stays
  a few rows long however long the log, where a row per GTID grew without bound and cost an
  insert per transaction. A database made before (a ``_gateway_applied`` table of one row per
  GTID) is converted to ranges when opened.
- Consecutive INSERT/UPSERT (or DELETE) operations of one table and columns -- a run of
  ``apply``, a batch of ``apply_columns`` -- go as statements of up to 128 rows each
  (``INSERT OR REPLACE ... VALUES (...), (...)``, ``DELETE ... WHERE key IN (...)``), within
  SQLite's limit of parameters per statement. SQLite inserts a statement's rows in order,
  so the database ends as one statement per row leaves it; UPDATE runs row by row.
- Schema events (``apply_schema``): the table is created, altered or dropped as the event
  says, with its version recorded in ``_gateway_schema`` in the same transaction
  (``gateway.appliers.sqlite_schema``: idempotent on replay); rows of a declared table are
  fitted to its current columns (renamed names followed, dropped columns left out). Tables
  without schema events are created and widened by their rows, as above.
- ``apply_columns`` is the bulk entry point (the Spark bulk apply): reduced operations given
  column by column (``ColumnOps``: one table, one kind, the same columns in every row) run
  through ``executemany`` with the same statements, value conversions, table creation and
  GTID bookkeeping as ``apply``, in one transaction per call. With the C accelerator
  ``gateway.appliers._sqlite_bind`` built, a batch's statements of many rows are bound and
  stepped in C with the GIL released (the ``sqlite3`` module holds it while it binds every
  parameter); the ``sqlite3`` module's path is its specification and its fallback, for any
  value that accelerator does not bind as the module does.

A new database file gets pages of ``page_size`` bytes (default 8192, SQLite's own 4096): with
rows of a KiB, SQLite spends less CPU per row on its statements and commits (fewer pages to
split, write to the WAL and checkpoint); with rows of a few bytes it is the same
(docs/benchmarks.md, "8 KiB SQLite pages"). A database that exists keeps its page
size (SQLite changes it only by a ``VACUUM``, which this applier never runs on its own).

Threads: each worker thread has its own connection (WAL journal, ``busy_timeout``); writing
transactions of one applier take turns on a lock (SQLite has one writer at a time anyway), and
a database busy or locked by another process is a ``TransientApplyError`` (retried); a full
disk (``SQLITE_FULL``, also from ``max_page_count``) is an ``OutOfSpaceError`` naming the
database file (retried until space returns, never dead-lettered); an I/O error
(``SQLITE_IOERR``: a failed write or fsync) closes the connection and is a
``StoreUnavailableError`` (retried on a new connection, never on the failed descriptors).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Protocol, cast

from google.protobuf.message import DecodeError

from gateway.core import accel
from gateway.core.rowops import Column, ColumnOps, Gtid, OpKind, RowOp, TableRef
from gateway.core.sql_value import SqlValue
from gateway.core.sqlauth import SqlAuthorizer
from gateway.hookspecs import hookimpl
from gateway.schema.model import SchemaEvent
from gateway.v1 import applier_pb2, value_pb2

from .contract import (
    SCOPE_NODE,
    Applier,
    ApplierConfigError,
    ApplierFactory,
    ApplyError,
    Capabilities,
    OutOfSpaceError,
    StoreUnavailableError,
    TransientApplyError,
    UnsupportedOperationError,
)
from .position import ApplierPosition, GtidSet, position_message, position_of
from .sqlite_schema import SCHEMA_DDL, Declared, change, declared_tables

__all__ = ["SQLITE_FACTORY", "ColumnOps", "SqliteApplier", "gateway_register_appliers",
           "unsigned_blob", "unsigned_value"]

FT = value_pb2.FieldType
# UNSIGNED is declared "UNSIGNED BIG INT": INTEGER affinity like "INTEGER", but never an alias
# of the rowid (only the exact name "INTEGER" is), which holds signed 64-bit integers only and
# would refuse a key above 2**63 - 1 (see ``_db_value``).
_AFFINITY: dict[int, str] = {
    FT.FIELD_TYPE_BOOLEAN: "INTEGER", FT.FIELD_TYPE_INTEGER: "INTEGER",
    FT.FIELD_TYPE_UNSIGNED: "UNSIGNED BIG INT", FT.FIELD_TYPE_TIMESTAMP: "INTEGER",
    FT.FIELD_TYPE_DOUBLE: "REAL", FT.FIELD_TYPE_BLOB: "BLOB", FT.FIELD_TYPE_UUID: "BLOB",
}
_MAX_I64 = 2**63 - 1
#: Page sizes SQLite accepts, and the one a new database gets (module docstring).
PAGE_SIZES = frozenset(1 << n for n in range(9, 17))
DEFAULT_PAGE_SIZE = 8192
# Column types whose Python values (``rowops.python_value``) SQLite binds as they are: for
# these ``_db_value`` is the identity, so a bulk column skips it.
_BOUND_AS_IS = frozenset({FT.FIELD_TYPE_BOOLEAN, FT.FIELD_TYPE_INTEGER, FT.FIELD_TYPE_DOUBLE,
                          FT.FIELD_TYPE_TIMESTAMP, FT.FIELD_TYPE_BLOB, FT.FIELD_TYPE_UUID,
                          FT.FIELD_TYPE_VARCHAR, FT.FIELD_TYPE_DATE, FT.FIELD_TYPE_TIME,
                          FT.FIELD_TYPE_DATETIME, FT.FIELD_TYPE_JSON})
_INT = {int}  # bool is not int here: ``type(True) is bool``
_SYSTEM_DDL = (
    "CREATE TABLE IF NOT EXISTS _gateway_applied_ranges (server_id INTEGER NOT NULL, "
    "first INTEGER NOT NULL, last INTEGER NOT NULL, PRIMARY KEY (server_id, first)) "
    "WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS _gateway_applied_sql (server_id INTEGER NOT NULL, "
    "trans_id INTEGER NOT NULL, statement INTEGER NOT NULL, "
    "PRIMARY KEY (server_id, trans_id, statement)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS _gateway_tables (name TEXT PRIMARY KEY, schema TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS _gateway_position (applier TEXT PRIMARY KEY, "
    "position BLOB NOT NULL)",
    SCHEMA_DDL,
)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _db_value(value: SqlValue) -> SqlValue:
    """A value SQLite can bind: Decimal as text, an integer above 2**63 - 1 (an UNSIGNED
    value) as `unsigned_blob`, anything else as it is."""
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, int) and not isinstance(value, bool) and value > _MAX_I64:
        return unsigned_blob(value)
    return value


def unsigned_blob(value: int) -> bytes:
    """The stored form of an UNSIGNED value above 2**63 - 1, which no SQLite INTEGER holds:
    its 8 bytes big-endian, as a BLOB -- kept exactly in a column of any affinity (text that
    looks like a number would become a rounded REAL in an INTEGER column), the same in a key
    as in a value, and ordered right (SQLite sorts every INTEGER before every BLOB, and BLOBs
    of one length by their bytes, so by value). Values up to 2**63 - 1 stay INTEGERs.
    Read back with `unsigned_value`."""
    return value.to_bytes(8, "big")


def unsigned_value(stored: int | bytes) -> int:
    """The UNSIGNED value of what a column holds (an INTEGER, or an `unsigned_blob`)."""
    return int.from_bytes(stored, "big") if isinstance(stored, bytes) else stored


def _db_column(values: Sequence[SqlValue], field_type: int) -> Sequence[SqlValue]:
    """``_db_value`` of every value of a column of ``field_type``: ``values`` itself when
    that is the identity for each (the types above, and an UNSIGNED column of integers up
    to 2**63 - 1, as the exception tables' keys are)."""
    if field_type in _BOUND_AS_IS:
        return values
    if field_type == FT.FIELD_TYPE_UNSIGNED and values and set(map(type, values)) == _INT \
            and max(cast("Sequence[int]", values)) <= _MAX_I64:
        return values
    return [_db_value(v) for v in values]


_RUN_KINDS = frozenset({OpKind.INSERT, OpKind.UPSERT, OpKind.UPDATE, OpKind.DELETE})


def _runs(ops: Sequence[RowOp]) -> Iterable[Sequence[RowOp]]:
    """``ops`` cut, in order, into maximal runs that one ``executemany`` can apply: the same
    kind (INSERT, UPSERT, UPDATE or DELETE), table and columns; SQL and MOVE alone."""
    run: list[RowOp] = []
    for op in ops:
        if run:
            head = run[0]
            if (op.kind is head.kind and op.kind in _RUN_KINDS and op.table == head.table
                    and op.columns == head.columns and op.key_columns == head.key_columns):
                run.append(op)
                continue
            yield run
        run = [op]
    if run:
        yield run


def _db_row(values: Sequence[SqlValue]) -> list[SqlValue]:
    return [_db_value(v) for v in values]


# A run of INSERT/UPSERT (or DELETE) operations goes to SQLite as statements of many rows each
# -- ``INSERT OR REPLACE ... VALUES (..), (..), ...``, ``DELETE ... WHERE key IN (..)`` -- of
# these sizes, the largest first, then the rest by ``executemany`` of the one-row statement.
# One statement of 128 rows costs less CPU per row than 128 steps of a one-row one (fewer
# VDBE restarts, one GIL release instead of 128); two sizes keep the statement cache
# small (docs/benchmarks.md, "Statements of many rows").
_MULTI_SIZES = (128, 16)


def _multi_plan(count: int, most: int) -> list[tuple[int, int]]:
    """``count`` rows cut, from the first, into ``(rows, statements)`` pairs: ``statements``
    statements of ``rows`` rows each, of the sizes in ``_MULTI_SIZES`` (none above ``most``),
    the rest as ``(1, n)``. The rows add up to ``count``, in order."""
    plan = []
    for size in _MULTI_SIZES:
        if size <= most and count >= size:
            plan.append((size, count // size))
            count %= size
    if count:
        plan.append((1, count))
    return plan


@functools.lru_cache(maxsize=1024)
def _multi_statement(kind: OpKind, table: str, key_columns: tuple[Column, ...],
                     columns: tuple[Column, ...], rows: int) -> str:
    """The statement doing what ``_statement(kind, ...)`` does for ``rows`` rows at once, its
    parameters the rows' parameters one row after the other: ``INSERT OR REPLACE`` of many
    ``VALUES`` rows (applied in order, so a later row of the same key replaces an earlier
    one, as one statement per row does) or ``DELETE ... WHERE key IN (...)``."""
    if kind is OpKind.DELETE:
        keys = ", ".join(_q(c.name) for c in key_columns)
        if len(key_columns) == 1:
            return f"DELETE FROM {_q(table)} WHERE {keys} IN ({', '.join('?' * rows)})"
        one = "(" + ", ".join("?" * len(key_columns)) + ")"
        return (f"DELETE FROM {_q(table)} WHERE ({keys}) IN (VALUES "
                + ", ".join([one] * rows) + ")")
    assert kind is OpKind.INSERT or kind is OpKind.UPSERT
    return _insert(table, key_columns + columns, rows)


def _insert(table: str, cols: tuple[Column, ...], rows: int) -> str:
    """``INSERT OR REPLACE`` of ``rows`` rows of ``cols`` into ``table``."""
    one = "(" + ", ".join("?" * len(cols)) + ")"
    return (f"INSERT OR REPLACE INTO {_q(table)} ({', '.join(_q(c.name) for c in cols)}) "
            f"VALUES " + ", ".join([one] * rows))


def _execute_rows(conn: sqlite3.Connection, kind: OpKind, table: str,
                  key_columns: tuple[Column, ...], columns: tuple[Column, ...], sql: str,
                  rows: Sequence[Sequence[SqlValue]]) -> None:
    """``conn.executemany(sql, rows)`` -- ``sql`` the one-row statement ``_statement(kind,
    ...)``, every row its parameters -- with the same effect on the database, in as few
    statements as ``_multi_plan`` makes of the rows. UPDATE runs row by row (one statement
    of many updates of the same key would not keep their order)."""
    _execute(conn, kind, table, key_columns, columns, sql, len(rows),
             len(rows[0]) if rows else 0,
             lambda first, size: list(itertools.chain.from_iterable(rows[first:first + size])),
             lambda start, end: rows[start:end])


class _BindC(Protocol):
    """The C accelerator ``_sqlite_bind.c`` (its header comment states the contract)."""

    def run(self, conn: sqlite3.Connection, path: str, plan: list[tuple[str, int, int]],
            columns: list[list[SqlValue]], count: int, /) -> bool: ...


#: None without a compiler at install, on a Python whose ``sqlite3.Connection`` layout it
#: does not know, or with ``GATEWAY_PURE_PYTHON``: every batch binds through ``sqlite3``
_BIND = cast("_BindC | None", accel.load("gateway.appliers._sqlite_bind"))


def _params(kind: OpKind, key: Sequence[Sequence[SqlValue]],
            values: Sequence[Sequence[SqlValue]]) -> list[Sequence[SqlValue]]:
    """The columns of ``_statement(kind, ...)``'s parameters, in order (its docstring)."""
    return ([*values, *key] if kind is OpKind.UPDATE
            else list(key) if kind is OpKind.DELETE else [*key, *values])


def _bind_columns(conn: sqlite3.Connection, kind: OpKind, table: str,
                  key_columns: tuple[Column, ...], columns: tuple[Column, ...], sql: str,
                  params: Sequence[Sequence[SqlValue]], path: str) -> bool:
    """``_execute_columns`` of ``params`` in C (``_sqlite_bind``): the statements of
    ``_execute``'s plan bound and stepped without the GIL; False, with nothing done, when the
    accelerator is not built, the batch is one ``_execute`` runs row by row (UPDATE, fewer
    rows than its smallest statement of many), or a value is not one SQLite binds as it is.
    ``params`` may be the batch's own values, unconverted: every value ``_db_value`` would
    change (a Decimal, an int above 2**63 - 1) is one the accelerator declines."""
    if _BIND is None:
        return False
    count = len(params[0]) if params else 0
    plan = _statements(conn, kind, table, key_columns, columns, sql, count, len(params))
    return plan is not None and _BIND.run(
        conn, path, plan, [c if type(c) is list else list(c) for c in params], count)


def _execute_columns(conn: sqlite3.Connection, kind: OpKind, table: str,
                     key_columns: tuple[Column, ...], columns: tuple[Column, ...], sql: str,
                     params: Sequence[Sequence[SqlValue]]) -> None:
    """``_execute_rows`` of the rows ``zip(*params)``: ``params`` holds each parameter of
    ``sql`` as a column, all of one length."""
    width = len(params)
    buffer: list[SqlValue] = []

    def flat(first: int, size: int) -> list[SqlValue]:
        if len(buffer) != size * width:
            buffer[:] = [None] * (size * width)
        for j, col in enumerate(params):
            buffer[j::width] = col[first:first + size]
        return buffer

    _execute(conn, kind, table, key_columns, columns, sql, len(params[0]) if params else 0,
             width, flat,
             lambda start, end: zip(*(col[start:end] for col in params), strict=True))


def _execute(conn: sqlite3.Connection, kind: OpKind, table: str,
             key_columns: tuple[Column, ...], columns: tuple[Column, ...], sql: str,
             count: int, width: int, flat: Callable[[int, int], Sequence[SqlValue]],
             rows: Callable[[int, int], Iterable[Sequence[SqlValue]]]) -> None:
    """Apply ``count`` rows of ``width`` parameters each: ``rows(start, end)`` gives rows
    ``start`` to ``end`` (excluded) as parameter sequences of ``sql``, ``flat(first, size)``
    the parameters of ``size`` rows from ``first`` one row after the other."""
    plan = _statements(conn, kind, table, key_columns, columns, sql, count, width)
    if plan is None:
        conn.executemany(sql, rows(0, count))
        return
    start = 0
    for statement, size, times in plan:
        end = start + size * times
        if size == 1:
            conn.executemany(statement, rows(start, end))
        else:
            for first in range(start, end, size):
                conn.execute(statement, flat(first, size))
        start = end


def _statements(conn: sqlite3.Connection, kind: OpKind, table: str,
                key_columns: tuple[Column, ...], columns: tuple[Column, ...], sql: str,
                count: int, width: int) -> list[tuple[str, int, int]] | None:
    """How ``_execute`` applies ``count`` rows of ``width`` parameters: ``(statement, rows,
    times)`` in order -- ``times`` executions of ``statement``, each taking ``rows`` rows'
    parameters one row after the other (``sql`` itself for one row) --, or None when it runs
    ``sql`` row by row (an UPDATE, no parameters, fewer rows than a statement of many)."""
    if kind is OpKind.UPDATE or not width or count < _MULTI_SIZES[-1]:
        return None
    return [(sql if size == 1 else _multi_statement(kind, table, key_columns, columns, size),
             size, times)
            for size, times in _multi_plan(count, _variable_limit(conn) // width)]


def _variable_limit(conn: sqlite3.Connection) -> int:
    """The most ``?`` parameters one statement of ``conn`` may have."""
    return conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)


@functools.lru_cache(maxsize=4096)
def _statement(kind: OpKind, table: str, key_columns: tuple[Column, ...],
               columns: tuple[Column, ...]) -> str | None:
    """The statement applying one ``kind`` operation (INSERT, UPSERT, UPDATE, DELETE) to
    ``table``: parameters are the key then the values for INSERT/UPSERT, the values then the
    key for UPDATE, the key for DELETE. None: nothing to do (an UPDATE of no columns)."""
    where = " AND ".join(f"{_q(c.name)} = ?" for c in key_columns)
    if kind is OpKind.INSERT or kind is OpKind.UPSERT:
        return _insert(table, key_columns + columns, 1)
    if kind is OpKind.UPDATE:
        if not columns:
            return None
        return (f"UPDATE {_q(table)} SET {', '.join(f'{_q(c.name)} = ?' for c in columns)} "
                f"WHERE {where}")
    if kind is OpKind.DELETE:
        return f"DELETE FROM {_q(table)} WHERE {where}"
    raise ValueError(f"no single statement for {kind.name}")


class SqliteApplier(Applier):
    """Applies operations to the SQLite database at ``path``; see the module docstring."""

    def __init__(self, path: str | Path, *, name: str = "sqlite", synchronous: str = "NORMAL",
                 busy_timeout_ms: int = 10_000, max_batch: int = 500,
                 page_size: int = DEFAULT_PAGE_SIZE) -> None:
        if page_size not in PAGE_SIZES:
            raise ValueError(f"page_size must be a power of two from 512 to 65536, not "
                             f"{page_size!r}")
        self.name = name
        self.path = Path(path)
        #: where the C binder finds this database (it checks the connection is open on it)
        self._bind_path = None if str(path) == ":memory:" else str(self.path)
        self.capabilities = Capabilities(accepts_sql=True, idempotent=True,
                                         max_batch=max_batch, thread_safe=True, columns=True)
        self._synchronous = synchronous
        self._busy_ms = busy_timeout_ms
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        # SQLite has one writer at a time; queueing writers on a lock here is much cheaper than
        # letting them collide in SQLite's busy handler, which sleeps in millisecond steps.
        self._write_lock = threading.Lock()
        self._columns: dict[TableRef, set[str]] = {}  # committed table -> column names
        self._holder: sqlite3.Connection | None = None  # hold_position's, synchronous=FULL
        #: True when the database file was missing or empty at open: a new target, which
        #: holds nothing a saved applier position could claim was applied.
        self.created = not self.path.exists() or self.path.stat().st_size == 0
        conn = self._connect()
        try:
            # A damaged page is found now, not when an operation first touches it (and a
            # damaged database never silently loses rows the position says were applied).
            problems = [r[0] for r in conn.execute("PRAGMA quick_check(3)")]
            if problems != ["ok"]:
                raise sqlite3.DatabaseError("integrity check failed: " + "; ".join(
                    " ".join(p.split()) for p in problems))
            if self.created:  # before anything is written: fixed from then on
                conn.execute(f"PRAGMA page_size={int(page_size)}")
            conn.execute("PRAGMA journal_mode=WAL")
            # A database from before held positions (applied rows, no _gateway_position)
            # cannot tell what it holds: its position file is trusted, as it was then.
            self._unheld = not _has_table(conn, "_gateway_position") and (
                _has_table(conn, "_gateway_applied") or (
                    _has_table(conn, "_gateway_applied_ranges") and conn.execute(
                        "SELECT 1 FROM _gateway_applied_ranges LIMIT 1").fetchone() is not None))
            with _immediate(conn):
                for ddl in _SYSTEM_DDL:
                    conn.execute(ddl)
                _convert_gtid_rows(conn)
            #: Tables with a schema version, by name (replaced whole, never changed in place:
            #: read without a lock by the workers).
            self._declared: dict[str, Declared] = declared_tables(conn)
        finally:
            conn.close()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                               timeout=self._busy_ms / 1000)
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        conn.execute(f"PRAGMA busy_timeout={int(self._busy_ms)}")
        return conn

    def _drop(self, conn: sqlite3.Connection) -> None:
        """Close this thread's ``conn`` after an I/O error; the next call opens a new one."""
        with self._lock:
            if conn in self._connections:
                self._connections.remove(conn)
        if getattr(self._local, "conn", None) is conn:
            self._local.conn = None
        with contextlib.suppress(sqlite3.Error):
            conn.close()

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
        if self._declared:
            ops = self._fit_ops(ops)

        def body(conn: sqlite3.Connection, created: dict[TableRef, set[str]]) -> None:
            for run in _runs(ops):
                if len(run) == 1:
                    self._apply_one(conn, run[0], created)
                else:
                    self._apply_run(conn, run, created)
            _record_gtids(conn, [op.gtid for op in ops])

        self._transaction(body)

    def apply_columns(self, batches: Iterable[ColumnOps],
                      gtids: Iterable[tuple[int, int]], ops: Sequence[RowOp] = ()) -> int:
        """Apply ``batches`` and then ``ops`` (one at a time, as ``apply`` does) in one
        transaction that also records in ``_gateway_applied_ranges`` the GTIDs of ``ops`` and
        ``gtids`` (those of the batches' rows, in any order, repeats allowed); return the
        number of operations.

        The operations must touch distinct rows (they are not applied in a defined order):
        the reduced operations of one bulk unit. Each row ends as ``apply`` of its ``RowOp``
        leaves it: same statements, conversions and table creation."""
        count = 0
        if self._declared:
            batches = [self._fit_batch(b) for b in batches]
            ops = self._fit_ops(ops)

        def body(conn: sqlite3.Connection, created: dict[TableRef, set[str]]) -> None:
            nonlocal count
            for batch in batches:
                self._apply_batch(conn, batch, created)
                count += len(batch)
            for op in ops:
                self._apply_one(conn, op, created)
            count += len(ops)
            _record_gtids(conn, [*gtids, *(op.gtid for op in ops)])

        self._transaction(body)
        return count

    # -- schema events (gateway.appliers.sqlite_schema) -----------------------------------------

    def apply_schema(self, event: SchemaEvent) -> None:
        """Make the schema change ``event`` in the database, with its version, in one
        transaction; a change at or below the table's recorded version does nothing (a
        replay). Raises ``UnsupportedOperationError`` for what this SQLite cannot do."""
        ref = TableRef.parse(event.table)
        def body(conn: sqlite3.Connection, _created: dict[TableRef, set[str]]) -> None:
            change(conn, event, _affinity)

        self._transaction(body)
        conn = self._conn()
        declared = declared_tables(conn)
        with self._lock:
            self._columns.pop(ref, None)  # re-read: columns may be gone or renamed
            self._declared = declared

    def _fit_ops(self, ops: Sequence[RowOp]) -> Sequence[RowOp]:
        """``ops`` with the rows of declared tables fitted to their current columns
        (``Declared.fit``); the same sequence when nothing needs it."""
        declared = self._declared
        out: list[RowOp] | None = None
        for n, op in enumerate(ops):
            d = declared.get(op.table.name)
            if d is None or op.kind is OpKind.SQL:
                continue
            cols = d.fit(op.columns)
            keys = d.fit(op.key_columns)
            if cols is None and keys is None:
                continue
            if out is None:
                out = list(ops[:n])
                out.extend(ops[n:])
            new = op
            if cols is not None:
                new = dataclasses.replace(new, columns=cols[0],
                                          values=tuple(op.values[i] for i in cols[1]))
            if keys is not None and len(keys[0]) == len(op.key_columns):
                new = dataclasses.replace(new, key_columns=keys[0])
            out[n] = new
        return ops if out is None else out

    def _fit_batch(self, batch: ColumnOps) -> ColumnOps:
        d = self._declared.get(batch.table.name)
        if d is None:
            return batch
        cols = d.fit(batch.columns)
        keys = d.fit(batch.key_columns)
        if cols is not None:
            batch = dataclasses.replace(batch, columns=cols[0],
                                        values=[batch.values[i] for i in cols[1]])
        if keys is not None and len(keys[0]) == len(batch.key_columns):
            batch = dataclasses.replace(batch, key_columns=keys[0])
        return batch

    def _transaction(self, body: Callable[[sqlite3.Connection, dict[TableRef, set[str]]],
                                          None]) -> None:
        """Run ``body(conn, created)`` in one ``BEGIN IMMEDIATE`` transaction (rolled back if
        it raises); ``created`` collects the columns of tables it created or widened."""
        conn = self._conn()
        created: dict[TableRef, set[str]] = {}
        with self._write_lock:
            self._run_locked(conn, body, created)
        with self._lock:
            for table, cols in created.items():
                self._columns.setdefault(table, set()).update(cols)

    def _run_locked(self, conn: sqlite3.Connection,
                    body: Callable[[sqlite3.Connection, dict[TableRef, set[str]]], object],
                    created: dict[TableRef, set[str]]) -> None:
        try:
            with _immediate(conn):
                body(conn, created)
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if _full(exc):  # the disk (or max_page_count) is full: not the batch's fault
                raise OutOfSpaceError(str(self.path)) from None
            if _io_error(exc):
                # A write or fsync failed: never retried on the same file descriptors (the
                # kernel may have dropped the pages it could not write). This connection is
                # closed -- what it committed before is what SQLite recovers from the files
                # -- and the batch is retried on a new one: the disk's fault, not the batch's.
                self._drop(conn)
                raise StoreUnavailableError(f"sqlite {self.path}: {text} (reopened; "
                                            f"retrying)") from None
            if "locked" in text or "busy" in text:
                raise TransientApplyError(f"sqlite {self.path}: {text}") from None
            raise ApplyError(f"sqlite {self.path}: {text}") from None
        except sqlite3.Error as exc:
            if _full(exc):
                raise OutOfSpaceError(str(self.path)) from None
            raise ApplyError(f"sqlite {self.path}: {type(exc).__name__}: {exc}") from None

    def _apply_batch(self, conn: sqlite3.Connection, batch: ColumnOps,
                     created: dict[TableRef, set[str]]) -> None:
        """The statements of ``_apply_one`` for every row of ``batch``: bound and stepped in C
        (``_bind_columns``) when it takes the values as they are, else by ``executemany``."""
        if batch.kind not in (OpKind.INSERT, OpKind.UPSERT, OpKind.UPDATE, OpKind.DELETE):
            raise UnsupportedOperationError(f"{batch.kind.name} operations cannot be applied "
                                            f"column by column")
        if not len(batch):
            return
        self._ensure_table(conn, batch.table, batch.key_columns, batch.columns, created)
        sql = _statement(batch.kind, batch.table.name, batch.key_columns, batch.columns)
        if sql is None:
            return
        kind, table = batch.kind, batch.table.name
        if self._bind_path is not None and _bind_columns(
                conn, kind, table, batch.key_columns, batch.columns, sql,
                _params(kind, batch.key, batch.values), self._bind_path):
            return  # bound as they are: no value needed _db_value's conversion
        key = [_db_column(v, c.type) for c, v in zip(batch.key_columns, batch.key, strict=True)]
        values = [_db_column(v, c.type)
                  for c, v in zip(batch.columns, batch.values, strict=True)]
        _execute_columns(conn, kind, table, batch.key_columns, batch.columns, sql,
                         _params(kind, key, values))

    def _apply_run(self, conn: sqlite3.Connection, run: Sequence[RowOp],
                   created: dict[TableRef, set[str]]) -> None:
        """The statements of ``_apply_one`` for a run of operations of one kind (INSERT,
        UPSERT, UPDATE or DELETE) on one table with the same columns (``_runs``), in order,
        by one ``executemany``."""
        first = run[0]
        self._ensure_table(conn, first.table, first.key_columns, first.columns, created)
        sql = _statement(first.kind, first.table.name, first.key_columns, first.columns)
        if sql is None:
            return
        as_is = all(c.type in _BOUND_AS_IS for c in first.key_columns + first.columns)
        kind = first.kind
        if kind is OpKind.DELETE:
            rows: Sequence[Sequence[SqlValue]] = (
                [op.key for op in run] if as_is else [_db_row(op.key) for op in run])
        elif kind is OpKind.UPDATE:
            rows = ([op.values + op.key for op in run] if as_is
                    else [_db_row(op.values + op.key) for op in run])
        else:
            rows = ([op.key + op.values for op in run] if as_is
                    else [_db_row(op.key + op.values) for op in run])
        _execute_rows(conn, kind, first.table.name, first.key_columns, first.columns, sql,
                      rows)

    def _apply_one(self, conn: sqlite3.Connection, op: RowOp,
                   created: dict[TableRef, set[str]]) -> None:
        if op.kind is OpKind.SQL:
            self._apply_sql(conn, op)
            return
        table = op.table.name
        self._ensure_table(conn, op.table, op.key_columns, op.columns, created)
        key = [_db_value(v) for v in op.key]
        if op.kind in (OpKind.INSERT, OpKind.UPSERT, OpKind.UPDATE, OpKind.DELETE):
            sql = _statement(op.kind, table, op.key_columns, op.columns)
            if sql is None:
                return
            if op.kind is OpKind.DELETE:
                conn.execute(sql, key)
            elif op.kind is OpKind.UPDATE:
                conn.execute(sql, [_db_value(v) for v in op.values] + key)
            else:
                conn.execute(sql, key + [_db_value(v) for v in op.values])
        elif op.kind is OpKind.MOVE:
            where = " AND ".join(f"{_q(c.name)} = ?" for c in op.key_columns)
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
        # The client's text runs under the authorizer (gateway.core.sqlauth); the applier's
        # own statements do not. A denied statement raises here: dead-lettered, with the
        # reason, on every replica alike.
        auth = SqlAuthorizer(r[0] for r in conn.execute("SELECT name FROM _gateway_tables"))
        conn.set_authorizer(auth)
        try:
            conn.execute(op.sql.query, params)
        except sqlite3.DatabaseError:
            if auth.denied:
                raise UnsupportedOperationError(f"SQL statement {op.statement} of "
                                                f"{op.gtid}: refused: {auth.denied}") from None
            raise
        finally:
            conn.set_authorizer(None)
        conn.execute("INSERT INTO _gateway_applied_sql (server_id, trans_id, statement) "
                     "VALUES (?, ?, ?)", ident)

    def _ensure_table(self, conn: sqlite3.Connection, ref: TableRef,
                      key_columns: tuple[Column, ...], columns: tuple[Column, ...],
                      created: dict[TableRef, set[str]]) -> None:
        table = ref.name
        with self._lock:  # keyed by (schema, name): another schema's table is checked below
            known = self._columns.get(ref, set()) | created.get(ref, set())
        wanted = key_columns + columns
        if known and all(c.name in known for c in wanted):
            return
        row = conn.execute("SELECT schema FROM _gateway_tables WHERE name = ?",
                           (table,)).fetchone()
        if row is not None and row[0] != ref.schema:
            raise UnsupportedOperationError(
                f"table {table!r} of schema {ref.schema!r} collides with the table of "
                f"schema {row[0]!r} already in {self.path}")
        if row is None:
            conn.execute("INSERT INTO _gateway_tables (name, schema) VALUES (?, ?)",
                         (table, ref.schema))
        conn.execute(f"CREATE TABLE IF NOT EXISTS {_q(table)} ("
                     + ", ".join(_column_ddl(c) for c in wanted)
                     + f", PRIMARY KEY ({', '.join(_q(c.name) for c in key_columns)}))")
        present = {r[1] for r in conn.execute(f"PRAGMA table_info({_q(table)})")}
        for col in wanted:
            if col.name not in present:
                conn.execute(f"ALTER TABLE {_q(table)} ADD COLUMN {_column_ddl(col)}")
                present.add(col.name)
        created.setdefault(ref, set()).update(present)

    def reset_target(self) -> None:
        """Empty the database: drop every table this applier created and forget what it
        applied, in one transaction. The node calls it before rebuilding the target from its
        store (``gateway.node.appliers.applier_rebuild``) when the log no longer holds the entries
        after the applier's position; the database is this applier's alone."""
        with self._write_lock:
            conn = self._conn()
            with _immediate(conn):
                for (name,) in conn.execute("SELECT name FROM _gateway_tables").fetchall():
                    conn.execute(f"DROP TABLE IF EXISTS {_q(name)}")
                for table in ("_gateway_tables", "_gateway_applied_ranges",
                              "_gateway_applied_sql", "_gateway_position", "_gateway_schema"):
                    conn.execute(f"DELETE FROM {table}")
            with self._lock:
                self._columns.clear()
                self._declared = {}

    # -- the position this database holds (gateway.appliers.durable) ---------------------------

    def hold_position(self, position: ApplierPosition) -> None:
        """Record ``position`` in ``_gateway_position`` and make it durable together with every
        transaction committed before: the row is committed on a connection with
        ``synchronous=FULL``, whose commit syncs the WAL -- the frames of earlier commits
        (made with the configured ``synchronous``, NORMAL by default: not synced) included.
        The dispatcher calls it before it saves ``position`` to the position file."""
        data = position_message(self.name, position).SerializeToString()
        with self._write_lock:
            if self._holder is None:
                self._holder = self._connect()
                self._holder.execute("PRAGMA synchronous=FULL")
            try:
                self._run_locked(self._holder, lambda conn, _created: conn.execute(
                    "INSERT OR REPLACE INTO _gateway_position (applier, position) "
                    "VALUES (?, ?)", (self.name, data)), {})
            except StoreUnavailableError:  # an I/O error closed it (``_run_locked``)
                self._holder = None
                raise
            self._unheld = False

    def held_position(self) -> ApplierPosition | None:
        """The position last recorded by :meth:`hold_position` and still in the database:
        position 0 when none is (a new, emptied or wiped database, or one that lost the
        transactions that recorded it), ``None`` for a database from before held positions
        that holds applied transactions (it cannot tell)."""
        try:
            row = self._conn().execute("SELECT position FROM _gateway_position WHERE "
                                       "applier = ?", (self.name,)).fetchone()
            if row is None:
                return None if self._unheld else ApplierPosition()
            return position_of(applier_pb2.ApplierPosition.FromString(row[0]))
        except (sqlite3.Error, DecodeError, ValueError, TypeError) as exc:
            raise ApplyError(f"sqlite {self.path}: _gateway_position: cannot read the held "
                             f"position: {exc}") from None

    # -- reading back --------------------------------------------------------------------------

    def last_applied_trans_id(self, server_id: int) -> int:
        """The largest trans id of origin ``server_id`` committed in this database (0 if
        none): the node checks it against its log at start (a target ahead of the log means
        the log lost entries)."""
        row = self._conn().execute("SELECT MAX(last) FROM _gateway_applied_ranges WHERE "
                                   "server_id = ?", (server_id,)).fetchone()
        return int(row[0] or 0)

    def applied_gtids(self) -> GtidSet:
        """GTIDs of every transaction with at least one operation committed in this store."""
        out = GtidSet()
        for server_id, first, last in self._conn().execute(
                "SELECT server_id, first, last FROM _gateway_applied_ranges"):
            out.add_range(server_id, first, last)
        return out

    def rows(self, table: str) -> list[dict[str, SqlValue]]:
        """Every row of ``table`` as a dict, in primary-key order (for tests and tools)."""
        cur = self._conn().execute(f"SELECT * FROM {_q(table)} ORDER BY 1")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur]

    def close(self) -> None:
        with self._lock:
            conns, self._connections = self._connections, []
        with self._write_lock:
            if self._holder is not None:
                conns.append(self._holder)
                self._holder = None
        for conn in conns:
            conn.close()
        self._local = threading.local()


@contextlib.contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """One ``BEGIN IMMEDIATE`` transaction on ``conn`` (autocommit mode) around the block:
    committed when it ends, rolled back when it (or the commit) raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        # SQLite may have rolled the transaction back itself (SQLITE_FULL, SQLITE_IOERR): a
        # ROLLBACK then fails with "no transaction is active", which would hide the cause.
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (name,)).fetchone() is not None


def _io_error(exc: sqlite3.Error) -> bool:
    """SQLite's ``SQLITE_IOERR`` (any extended code: a failed read, write or fsync)."""
    return (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF == sqlite3.SQLITE_IOERR


def _full(exc: sqlite3.Error) -> bool:
    """SQLite's ``SQLITE_FULL``: the disk, or the database's ``max_page_count``, is full."""
    return (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF == sqlite3.SQLITE_FULL


def _ranges(gtids: Sequence[tuple[int, int]]) -> Iterable[tuple[int, int, int]]:
    """``(server_id, first, last)`` of every run of consecutive trans ids in ``gtids`` (any
    order, repeats allowed). The usual list -- one origin's trans ids in log order without a
    gap, a window of a log applied in order -- is checked as such and is one range without
    hashing and sorting every GTID (docs/benchmarks.md, "Columns from the log's bytes")."""
    if gtids:
        server_id, first = gtids[0]
        last = gtids[-1][1]
        if last - first == len(gtids) - 1 and all(g[0] == server_id for g in gtids) \
                and [g[1] for g in gtids] == list(range(first, last + 1)):
            return ((server_id, first, last),)
    batch = GtidSet()
    batch.update(sorted(set(gtids)))
    return batch.ranges()


def _record_gtids(conn: sqlite3.Connection, gtids: Sequence[tuple[int, int]]) -> None:
    """Merge ``gtids`` (any order, repeats allowed) into ``_gateway_applied_ranges``, inside the
    caller's transaction: each run of consecutive trans ids of one origin becomes one range,
    joined with the stored ranges it overlaps or touches."""
    for server_id, first, last in _ranges(gtids):
        # The usual case, a log applied in order: one stored range holds first - 1 or first
        # and no other starts in (first, last + 1] -- it is the only one the batch's range
        # meets, and is extended (or already holds it). One statement.
        # (Every lookup is on the primary key: a few steps however many ranges are stored.)
        if conn.execute(
                "UPDATE _gateway_applied_ranges SET last = max(last, ?3) WHERE server_id = ?1 "
                "AND first = (SELECT max(first) FROM _gateway_applied_ranges WHERE server_id = ?1 "
                "AND first <= ?2) AND last >= ?2 - 1 AND NOT EXISTS (SELECT 1 FROM "
                "_gateway_applied_ranges WHERE server_id = ?1 AND first > ?2 AND "
                "first <= ?3 + 1)", (server_id, first, last)).rowcount:
            continue
        lo, hi = first, last
        # Stored ranges are disjoint, so those meeting [first - 1, last + 1] are the last ones
        # starting at or before last + 1, read backwards until one ends before first - 1.
        stored = conn.execute(
            "SELECT first, last FROM _gateway_applied_ranges WHERE server_id = ? AND "
            "first <= ? ORDER BY first DESC", (server_id, last + 1))
        for start, end in stored:
            if end < first - 1:
                break
            lo, hi = min(lo, start), max(hi, end)
        stored.close()
        conn.execute("DELETE FROM _gateway_applied_ranges WHERE server_id = ? AND "
                     "first BETWEEN ? AND ?", (server_id, lo, hi))
        conn.execute("INSERT INTO _gateway_applied_ranges (server_id, first, last) "
                     "VALUES (?, ?, ?)", (server_id, lo, hi))


def _convert_gtid_rows(conn: sqlite3.Connection) -> None:
    """Move the GTIDs of a database made before ranges (``_gateway_applied``: one row per
    GTID) into ``_gateway_applied_ranges`` and drop the old table, inside the caller's
    transaction (a crash leaves the old table, converted at the next open)."""
    old = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                       "name = '_gateway_applied'").fetchone()
    if old is None:
        return
    _record_gtids(conn, [Gtid(s, t) for s, t in conn.execute(
        "SELECT server_id, trans_id FROM _gateway_applied ORDER BY server_id, trans_id")])
    conn.execute("DROP TABLE _gateway_applied")


def _affinity(field_type: int) -> str:
    """The declared type of a column of ``field_type`` (module docstring)."""
    return _AFFINITY.get(field_type, "TEXT")


def _column_ddl(col: Column) -> str:
    return f"{_q(col.name)} {_affinity(col.type)}"


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
        page = int(options.get("page_size", str(DEFAULT_PAGE_SIZE)))
        if page not in PAGE_SIZES:
            raise ValueError
    except ValueError:
        raise ApplierConfigError("applier 'sqlite': page_size must be a power of two from 512 "
                                 f"to 65536, not {options.get('page_size')!r}") from None
    try:
        return SqliteApplier(path, synchronous=sync, max_batch=batch, page_size=page)
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
        "page_size": f"page size in bytes of a new database file (default "
                     f"{DEFAULT_PAGE_SIZE}; an existing file keeps its own)",
    },
    scope=SCOPE_NODE,  # every node materialises its own local file
)


@hookimpl
def gateway_register_appliers() -> list[ApplierFactory]:
    """The built-in plugin ``sqlite`` (entry point of the gateway distribution itself)."""
    return [SQLITE_FACTORY]
