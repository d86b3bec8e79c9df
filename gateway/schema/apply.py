"""Changes to events, events to definitions. Pure: no I/O.

``plan_*`` check a requested change against the table's current definition and return the
event to commit (``InvalidChange`` for a malformed change, ``RefusedChange`` for one that
cannot be applied everywhere); ``apply_event`` gives the definition after an event and is
what every replica runs, so it accepts exactly what the ``plan_*`` functions produce.

What is refused, and why (docs/schema.md, "Refused"): a primary-key change and a column type
change (no kind exists for them: a replica holding rows of the old type could not convert
them all, and the other clusters' writes in flight were made under the old key);
dropping a primary-key column; adding a NOT NULL column without a default (the existing rows
have no value for it); a column that exists, or a table that exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import cast

from gateway.core.logrules import name_problem, table_name_problem
from gateway.core.rowops import value_message
from gateway.core.sql_value import SqlValue
from gateway.schema.codec import field_type
from gateway.schema.model import (
    Column,
    InvalidChange,
    RefusedChange,
    SchemaError,
    SchemaEvent,
    TableDef,
)

__all__ = ["apply_event", "check_column", "check_table_name", "plan_add_column",
           "plan_create", "plan_drop_column", "plan_drop_table", "plan_rename_column"]

#: The most columns a table may have (the node's ``validation.MAX_COLUMNS``: SQLite's limit).
MAX_COLUMNS = 2000


def check_table_name(table: str) -> None:
    """``table`` is ``schema.table`` with valid names; ``InvalidChange`` otherwise."""
    schema, dot, name = table.partition(".")
    if not dot or not schema:
        raise InvalidChange(f"{table!r} has no schema (expected schema.table)")
    for what, part, rule in (("schema", schema, name_problem),
                             ("table", name, table_name_problem)):
        reason = rule(part)
        if reason is not None:
            raise InvalidChange(f"{table!r}: {what} {reason}")


def check_column(table: str, column: Column, *, key: bool = False) -> Column:
    """Check one column's name, type and default; returns it with its type name in capitals.
    A key column must not be nullable."""
    reason = name_problem(column.name)
    if reason is not None:
        raise InvalidChange(f"{table}.{column.name}: {reason}")
    try:
        ftype = field_type(column.type)
    except SchemaError as exc:
        raise InvalidChange(f"{table}.{column.name}: {exc}") from None
    if column.default is not None:
        try:
            # a wrong Python type makes the proto setter raise TypeError, caught below
            value_message(ftype, cast(SqlValue, column.default))
        except (TypeError, ValueError) as exc:
            raise InvalidChange(f"{table}.{column.name}: default {column.default!r} does not "
                                f"fit {column.type.upper()} ({exc})") from None
    if key and column.nullable:
        column = replace(column, nullable=False)
    return replace(column, type=column.type.upper())


def plan_create(current: TableDef | None, table: str, columns: Sequence[Column],
                primary_key: Sequence[str], *, origin: str = "", parent: bytes = b"",
                last_version: int = 0, implicit: bool = False) -> SchemaEvent:
    """The event creating ``table``. ``last_version`` is the version the table had when it
    was dropped (0 if never defined): a re-created table continues its versions."""
    check_table_name(table)
    if current is not None:
        raise RefusedChange(f"{table} already exists (version {current.version})")
    if not columns:
        raise InvalidChange(f"{table}: a table needs at least one column")
    if not primary_key:
        raise InvalidChange(f"{table}: a table needs a primary key")
    if len(columns) > MAX_COLUMNS:
        raise InvalidChange(f"{table}: {len(columns)} columns, more than {MAX_COLUMNS}")
    by_name: dict[str, Column] = {}
    for c in columns:
        if c.name.casefold() in by_name:
            raise InvalidChange(f"{table}.{c.name}: duplicate column (names are compared "
                                f"without case)")
        by_name[c.name.casefold()] = c
    key: list[Column] = []
    for k in primary_key:
        col = by_name.get(k.casefold())
        if col is None:
            raise InvalidChange(f"{table}: primary key column {k!r} is not a column")
        if col in key:
            raise InvalidChange(f"{table}: primary key column {k!r} named twice")
        key.append(col)
    ordered = [check_column(table, c, key=True) for c in key]
    ordered += [check_column(table, c) for c in columns if c not in key]
    after = TableDef(table, last_version + 1, tuple(ordered), tuple(c.name for c in key))
    return SchemaEvent(table, after.version, "create", definition=after, origin=origin,
                       parent=parent, implicit=implicit)


def _need(current: TableDef | None, table: str) -> TableDef:
    if current is None:
        raise RefusedChange(f"{table} does not exist (no CREATE TABLE, no write)")
    return current


def plan_add_column(current: TableDef | None, table: str, column: Column, *,
                    origin: str = "", parent: bytes = b"") -> SchemaEvent:
    cur = _need(current, table)
    col = check_column(table, column)
    if cur.column(col.name) is not None:
        raise RefusedChange(f"{table}.{col.name}: column already exists")
    if not col.nullable and col.default is None:
        raise RefusedChange(f"{table}.{col.name}: a NOT NULL column needs a default (the "
                            f"rows already written have no value for it)")
    if len(cur.columns) >= MAX_COLUMNS:
        raise RefusedChange(f"{table}: already has {MAX_COLUMNS} columns, the most a table "
                            f"may have")
    after = TableDef(table, cur.version + 1, (*cur.columns, col), cur.primary_key)
    return SchemaEvent(table, after.version, "add_column", column=col, definition=after,
                       origin=origin, parent=parent)


def plan_drop_column(current: TableDef | None, table: str, name: str, *,
                     origin: str = "", parent: bytes = b"") -> SchemaEvent:
    cur = _need(current, table)
    col = cur.column(name)
    if col is None:
        raise RefusedChange(f"{table}.{name}: no such column")
    if col.name in cur.primary_key:
        raise RefusedChange(f"{table}.{col.name}: cannot drop a primary-key column (a "
                            f"primary-key change cannot be applied everywhere)")
    after = TableDef(table, cur.version + 1, tuple(c for c in cur.columns if c != col),
                     cur.primary_key)
    return SchemaEvent(table, after.version, "drop_column", column=col, definition=after,
                       origin=origin, parent=parent)


def plan_rename_column(current: TableDef | None, table: str, old: str, new: str, *,
                       origin: str = "", parent: bytes = b"") -> SchemaEvent:
    cur = _need(current, table)
    col = cur.column(old)
    if col is None:
        raise RefusedChange(f"{table}.{old}: no such column")
    reason = name_problem(new)
    if reason is not None:
        raise InvalidChange(f"{table}.{new}: {reason}")
    other = cur.column(new)
    if other is not None and other != col:
        raise RefusedChange(f"{table}.{new}: column already exists")
    if col.name == new:
        raise RefusedChange(f"{table}.{old}: already named {new!r}")
    renamed = replace(col, name=new)
    after = TableDef(table, cur.version + 1,
                     tuple(renamed if c == col else c for c in cur.columns),
                     tuple(new if k == col.name else k for k in cur.primary_key))
    return SchemaEvent(table, after.version, "rename_column", old_name=col.name, new_name=new,
                       definition=after, origin=origin, parent=parent)


def plan_drop_table(current: TableDef | None, table: str, *, origin: str = "",
                    parent: bytes = b"") -> SchemaEvent:
    cur = _need(current, table)
    return SchemaEvent(table, cur.version + 1, "drop_table", origin=origin, parent=parent)


def apply_event(current: TableDef | None, event: SchemaEvent,
                last_version: int = 0) -> TableDef | None:
    """The definition after ``event`` (None after ``drop_table``). ``current`` is the table's
    definition (None when undefined or dropped; ``last_version`` is then its last version).
    Raises ``SchemaError`` when the event does not follow ``current``: a replica meeting that
    has a damaged log or a gap, never a conflict (conflicts are resolved before, by
    ``gateway.schema.history``)."""
    t = event.table
    want = (current.version if current is not None else last_version) + 1
    if event.version != want:
        raise SchemaError(f"{t}: event version {event.version} does not follow version "
                          f"{want - 1}")
    if event.kind == "create":
        if event.definition is None:
            raise SchemaError(f"{t}: create without a definition")
        d = event.definition
        expect = plan_create(current, t, d.columns, d.primary_key, last_version=last_version,
                             implicit=event.implicit).definition
    elif event.kind == "add_column":
        if event.column is None:
            raise SchemaError(f"{t}: add_column without a column")
        expect = plan_add_column(current, t, event.column).definition
    elif event.kind == "drop_column":
        if event.column is None:
            raise SchemaError(f"{t}: drop_column without a column")
        expect = plan_drop_column(current, t, event.column.name).definition
    elif event.kind == "rename_column":
        expect = plan_rename_column(current, t, event.old_name, event.new_name).definition
    elif event.kind == "drop_table":
        _need(current, t)
        return None
    else:
        raise SchemaError(f"{t}: unknown schema event kind {event.kind!r}")
    if event.definition is not None and event.definition != expect:
        raise SchemaError(f"{t}: event version {event.version} carries a definition that "
                          f"differs from the one its change gives")
    return expect
