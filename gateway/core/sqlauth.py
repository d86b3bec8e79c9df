"""What a statement-based SQL event may do in a replica's SQLite: one authorizer, used by the
SQLite applier when it runs the event and by the leader's API before the write is
acknowledged (docs/node.md, "Security").

A SQL event runs verbatim in every replica's SQLite, inside the applier's own transaction.
:class:`SqlAuthorizer` (an ``sqlite3`` authorizer callback) denies what would let a client
escape the database, forge the applier's bookkeeping or make replicas differ:

- ``ATTACH``/``DETACH`` and ``VACUUM INTO`` (files anywhere; ``VACUUM`` has no authorizer
  action: the applier's transaction refuses it, and :func:`sql_problem` too), ``PRAGMA``
  (settings, ``writable_schema``), ``BEGIN``/``COMMIT``/``ROLLBACK``/``SAVEPOINT`` (would
  end the applier's transaction between its data and its GTIDs), ``ANALYZE``, virtual
  tables;
- temporary objects (each of the applier's threads has its own connection: a temp table
  exists in one of them only) and triggers (a trigger fires on the applier's own row writes,
  which run without this authorizer); creating, dropping or altering a table the log's row
  statements write (the applier caches their columns);
- any access to a ``_gateway_*`` or ``sqlite_*`` object, except SQLite's own accesses to
  ``sqlite_master`` that a ``CREATE``, ``DROP`` or ``ALTER`` makes; writes to the other
  reserved tables (``gateway.core.reserved``: ``$EX``, apply status);
- functions whose result is not a function of their arguments and the database:
  :data:`NONDETERMINISTIC` (time, randomness, connection state, the SQLite build). The date
  and time functions are refused whatever their arguments (``date('now')`` cannot be told from
  ``date(col)`` by an authorizer): bind the value as a session variable instead.

:func:`sql_problem` is the API's check: it compiles the statement (``EXPLAIN``, never run)
in an in-memory database with the same authorizer, creating the tables it names as they are
found missing, and returns the first thing refused -- or that it is not one statement, or
not valid SQL. A statement it cannot resolve (a name it cannot place) is left to the
replicas, which refuse what the authorizer denies, all of them alike.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Mapping

from .logrules import RESERVED_TABLE_PREFIXES
from .reserved import reserved_table_problem

__all__ = ["NONDETERMINISTIC", "SqlAuthorizer", "sql_problem"]

#: Functions refused in SQL events (lower case): their result depends on the clock, chance,
#: the connection's history or the SQLite build, so replicas would store different values.
NONDETERMINISTIC = frozenset({
    "random", "randomblob",
    "date", "time", "datetime", "julianday", "unixepoch", "strftime", "timediff",
    "current_date", "current_time", "current_timestamp",
    "changes", "total_changes", "last_insert_rowid",
    "sqlite_version", "sqlite_source_id", "sqlite_compileoption_get",
    "sqlite_compileoption_used", "sqlite_offset",
    "load_extension", "fts3_tokenizer",
})

_RESERVED_PREFIXES = tuple(RESERVED_TABLE_PREFIXES)
_SCHEMA_TABLES = frozenset({"sqlite_master", "sqlite_schema", "sqlite_temp_master",
                            "sqlite_temp_schema"})
_DENIED_ACTIONS = {
    sqlite3.SQLITE_ATTACH: "ATTACH", sqlite3.SQLITE_DETACH: "DETACH",
    sqlite3.SQLITE_PRAGMA: "PRAGMA", sqlite3.SQLITE_TRANSACTION: "transaction control",
    sqlite3.SQLITE_SAVEPOINT: "SAVEPOINT", sqlite3.SQLITE_ANALYZE: "ANALYZE",
    sqlite3.SQLITE_CREATE_VTABLE: "virtual tables", sqlite3.SQLITE_DROP_VTABLE: "virtual tables",
    sqlite3.SQLITE_CREATE_TRIGGER: "triggers", sqlite3.SQLITE_DROP_TRIGGER: "triggers",
    sqlite3.SQLITE_CREATE_TEMP_TABLE: "temporary objects",
    sqlite3.SQLITE_CREATE_TEMP_INDEX: "temporary objects",
    sqlite3.SQLITE_CREATE_TEMP_TRIGGER: "temporary objects",
    sqlite3.SQLITE_CREATE_TEMP_VIEW: "temporary objects",
    sqlite3.SQLITE_DROP_TEMP_TABLE: "temporary objects",
    sqlite3.SQLITE_DROP_TEMP_INDEX: "temporary objects",
    sqlite3.SQLITE_DROP_TEMP_TRIGGER: "temporary objects",
    sqlite3.SQLITE_DROP_TEMP_VIEW: "temporary objects",
}
#: Actions that write, create or drop a table (or a view of that name), or its indexes.
_WRITES = frozenset({sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE,
                     sqlite3.SQLITE_CREATE_TABLE, sqlite3.SQLITE_DROP_TABLE,
                     sqlite3.SQLITE_CREATE_VIEW, sqlite3.SQLITE_DROP_VIEW,
                     sqlite3.SQLITE_ALTER_TABLE, sqlite3.SQLITE_CREATE_INDEX,
                     sqlite3.SQLITE_DROP_INDEX})
_ROW_TABLE_DDL = frozenset({sqlite3.SQLITE_CREATE_TABLE, sqlite3.SQLITE_DROP_TABLE,
                            sqlite3.SQLITE_ALTER_TABLE, sqlite3.SQLITE_CREATE_VIEW,
                            sqlite3.SQLITE_DROP_VIEW})
_TABLE_IN_ARG2 = frozenset({sqlite3.SQLITE_ALTER_TABLE, sqlite3.SQLITE_CREATE_INDEX,
                            sqlite3.SQLITE_DROP_INDEX})
#: Actions that make SQLite read and write ``sqlite_master`` itself.
_DDL = frozenset({sqlite3.SQLITE_CREATE_TABLE, sqlite3.SQLITE_CREATE_INDEX,
                  sqlite3.SQLITE_CREATE_VIEW, sqlite3.SQLITE_DROP_TABLE,
                  sqlite3.SQLITE_DROP_INDEX, sqlite3.SQLITE_DROP_VIEW,
                  sqlite3.SQLITE_ALTER_TABLE})


class SqlAuthorizer:
    """An ``sqlite3`` authorizer callback (``conn.set_authorizer(SqlAuthorizer())``) for one
    statement at a time; ``denied`` is the reason of the first action it denied since
    :meth:`reset`, or ``""``."""

    __slots__ = ("ddl", "denied", "row_tables")

    def __init__(self, row_tables: Iterable[str] = ()) -> None:
        """``row_tables``: the tables the log's row statements write (names without schema),
        which a SQL statement may not drop, alter or create: the applier keeps their columns
        in memory, so a replica that restarted after such a change would differ from one
        that did not."""
        self.denied = ""
        self.ddl = False
        self.row_tables = frozenset(t.casefold() for t in row_tables)

    def reset(self) -> None:
        """Forget the previous statement (call before preparing the next one)."""
        self.denied = ""
        self.ddl = False

    def __call__(self, action: int, arg1: str | None, arg2: str | None, db: str | None,
                 trigger: str | None) -> int:
        reason = self._reason(action, arg1, arg2)
        if reason is None:
            return sqlite3.SQLITE_OK
        if not self.denied:
            self.denied = reason
        return sqlite3.SQLITE_DENY

    def _reason(self, action: int, arg1: str | None, arg2: str | None) -> str | None:
        what = _DENIED_ACTIONS.get(action)
        if what is not None:
            return f"{what}: not allowed in SQL statements"
        if action == sqlite3.SQLITE_FUNCTION:
            name = (arg2 or "").lower()
            if name in NONDETERMINISTIC:
                return (f"function {name}() is not deterministic (replicas would differ); "
                        f"bind its value as a session variable")
            return None
        if action in _DDL:
            self.ddl = True
        if action in (sqlite3.SQLITE_CREATE_INDEX, sqlite3.SQLITE_DROP_INDEX) and arg1 and \
                arg1.casefold().startswith(_RESERVED_PREFIXES):
            return f"index name {arg1!r} is reserved"
        # arg2 is the table of an ALTER (arg1: its database) and of an index
        table = arg2 if action in _TABLE_IN_ARG2 else arg1
        if not table:
            return None
        folded = table.casefold()
        if folded in _SCHEMA_TABLES:
            # SQLite's own bookkeeping of a CREATE/DROP/ALTER (its writes to sqlite_master are
            # refused by SQLite itself unless writable_schema, a PRAGMA, is on).
            if action in (sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE):
                return None
            if action == sqlite3.SQLITE_READ and (self.ddl or arg2 == "ROWID"):
                return None
            return f"access to {table!r} is not allowed"
        if folded.startswith(_RESERVED_PREFIXES):
            return _reserved_access(table)
        if action in _WRITES:
            reason = reserved_table_problem(table)
            if reason is not None:
                return f"writing {table!r} is not allowed: {reason}"
            if action in _ROW_TABLE_DDL and folded in self.row_tables:
                return (f"table {table!r} is written by row statements: SQL may not "
                        f"create, drop or alter it")
        return None


def _reserved_access(table: str) -> str:
    return f"access to {table!r} is not allowed (reserved by the gateway and SQLite)"


_NO_TABLE = re.compile(r"no such table: (?:main\.)?(\S+)")
_NO_COLUMN_NAMED = re.compile(r"table (\S+) has no column named (\S+)")
_NO_COLUMN = re.compile(r"no such column: (\S+)")
_TOO_FEW_COLUMNS = re.compile(r"table (\S+) has (\d+) columns but (\d+) values were supplied")
_LEADING_WORD = re.compile(r"(?:\s|--[^\n]*|/\*.*?\*/)*([A-Za-z]+)", re.DOTALL)
_BLANK = re.compile(r"(?:\s|;|--[^\n]*|/\*.*?(?:\*/|$))*", re.DOTALL)
_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`|\[[^\]]*\]|--[^\n]*"
                    r"|/\*.*?(?:\*/|$)|;", re.DOTALL)
_MAX_ROUNDS = 64


def sql_problem(query: str, variables: Iterable[str],
                tables: Mapping[str, Iterable[str]] | None = None) -> str | None:
    """Why every replica's SQLite would refuse SQL event ``query`` (session variables named
    ``variables``), or None: what :class:`SqlAuthorizer` denies, more than one statement, or
    invalid SQL. ``tables`` (table name -> column names, the tables the log's row statements
    made) seed the in-memory database; other tables the query names are created as they are
    found missing. A query whose names cannot be placed is not refused here (see the module
    docstring). The query is compiled, never run."""
    first = _LEADING_WORD.match(query)
    if first is not None and first.group(1).upper() == "VACUUM":
        # no authorizer action: the applier's transaction refuses it (VACUUM INTO writes a
        # file anywhere), so every replica would
        return "VACUUM: not allowed in SQL statements"
    known = {name.casefold(): list(cols) for name, cols in (tables or {}).items()}
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        auth = SqlAuthorizer(known)
        conn.set_authorizer(auth)
        made: list[str] = []  # tables created for this query, the newest last
        params = dict.fromkeys(variables)
        for _ in range(_MAX_ROUNDS):
            auth.reset()
            try:
                conn.execute("EXPLAIN " + query, params).fetchall()
                return _one_statement(query)
            except (sqlite3.Warning, sqlite3.ProgrammingError) as exc:
                if "one statement at a time" in str(exc):
                    return "more than one SQL statement (send each as a statement of its own)"
                return str(exc)
            except sqlite3.DatabaseError as exc:
                if auth.denied:
                    return auth.denied
                text = str(exc)
                if not _create_missing(conn, auth, text, known, made):
                    if auth.denied:
                        return auth.denied
                    if text.startswith(("no such function", "wrong number of arguments")):
                        return text
                    if "unknown database" in text:
                        return f"{text} (a statement uses its one database)"
                    if "syntax error" in text or "incomplete input" in text or \
                            "unrecognized token" in text:
                        return f"not valid SQL ({text})"
                    return _one_statement(query)
        return _one_statement(query)
    finally:
        conn.close()


def _one_statement(query: str) -> str | None:
    if _more_than_one(query):
        return "more than one SQL statement (send each as a statement of its own)"
    return None


def _more_than_one(query: str) -> bool:
    """Whether ``query`` holds something after its first ``;`` outside quotes and comments
    (Python's ``execute`` refuses that: whitespace, comments and ``;`` are all that may
    follow a statement). One linear scan. (A trigger's body holds ``;`` too: triggers are
    refused anyway, and the authorizer's reason is given first.)"""
    for m in _TOKEN.finditer(query):
        if m.group(0) == ";":
            return _BLANK.fullmatch(query, m.end()) is None
    return False


def _create_missing(conn: sqlite3.Connection, auth: SqlAuthorizer, error: str,
                    known: dict[str, list[str]], made: list[str]) -> bool:
    """Create the table or column ``error`` says is missing; False when it cannot be placed."""
    ddl = None
    if (m := _NO_TABLE.search(error)) is not None:
        name = m.group(1)
        if "." in name:  # another database's: there is none (ATTACH is refused)
            auth.denied = (f"no such table: {name} (a statement has one database: no "
                           f"schema-qualified names)")
            return False
        if name.casefold().startswith(_RESERVED_PREFIXES):
            auth.denied = _reserved_access(name)
            return False
        cols = known.get(name.casefold(), [])
        body = ", ".join(_quote(c) for c in cols) if cols else "_gateway_c0"
        ddl = f"CREATE TABLE {_quote(name)} ({body})"
        if not cols:
            made.append(name)  # its columns are guessed from the errors that follow
    elif (m := _NO_COLUMN_NAMED.search(error)) is not None:
        ddl = f"ALTER TABLE {_quote(m.group(1))} ADD COLUMN {_quote(m.group(2))}"
    elif (m := _TOO_FEW_COLUMNS.search(error)) is not None and m.group(1) in made:
        ddl = ";".join(f"ALTER TABLE {_quote(m.group(1))} ADD COLUMN _gateway_c{i}"
                       for i in range(int(m.group(2)), int(m.group(3))))
    elif (m := _NO_COLUMN.search(error)) is not None and made:
        column = m.group(1).rpartition(".")[2]
        ddl = f"ALTER TABLE {_quote(made[-1])} ADD COLUMN {_quote(column)}"
    if ddl is None:
        return False
    conn.set_authorizer(None)
    try:
        for one in ddl.split(";"):
            conn.execute(one)
    except sqlite3.Error:
        return False
    finally:
        conn.set_authorizer(auth)
    return True


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
