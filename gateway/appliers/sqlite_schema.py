"""Schema events in the SQLite applier: the DDL of each change, and rows fitted to a
declared table.

``change(conn, event, path)`` runs inside the applier's ``BEGIN IMMEDIATE`` transaction and
makes one ``SchemaEvent`` (docs/schema.md) in the database, idempotently:

- ``create``: ``CREATE TABLE`` from the definition (types as the applier declares them, each
  column's default as its ``DEFAULT``, the primary key); a table that exists already (made by
  the rows before, or by a replay) gets the columns it lacks, as ``ADD COLUMN``;
- ``add_column``: ``ALTER TABLE ... ADD COLUMN c TYPE DEFAULT d`` -- existing rows read ``d``,
  and so does a row inserted later without it (a row written under the older version: the
  upcast of docs/schema.md); a column that exists is left as it is;
- ``drop_column``: ``ALTER TABLE ... DROP COLUMN`` (SQLite 3.35 and later; older ones report
  it as not supported); a column already gone is left so;
- ``rename_column``: ``ALTER TABLE ... RENAME COLUMN`` when the old name exists and the new
  does not; otherwise it happened already;
- ``drop_table``: ``DROP TABLE IF EXISTS`` and the table's bookkeeping.

The table's version is recorded in ``_gateway_schema`` in the same transaction, so the DDL
and the record commit together, and an event at or below the recorded version is skipped: a
replay after a crash (the position is saved after the change) changes nothing. A replay from
further back replays the events and rows after it in order, ending where it ended before.

A table with a recorded version is *declared*: the applier no longer widens it for the rows'
columns. ``Declared.fit`` gives a row's columns under the table's current names: a column
renamed since the row was written takes the new name, a column the table does not have (one
dropped since) is left out -- rows of older versions arrive after the change that outdated
them when they were written on another cluster (docs/schema.md). Tables without a schema event
keep the old behaviour: created and widened by the first rows that name their columns.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from gateway.core.rowops import Column, TableRef
from gateway.schema.codec import field_type
from gateway.schema.model import Column as SchemaColumn
from gateway.schema.model import SchemaEvent

from .contract import UnsupportedOperationError

__all__ = ["SCHEMA_DDL", "Declared", "change", "declared_tables"]

SCHEMA_DDL = ("CREATE TABLE IF NOT EXISTS _gateway_schema (name TEXT PRIMARY KEY, "
              "schema TEXT NOT NULL, version INTEGER NOT NULL, renames TEXT NOT NULL)")
#: SQLite gained ``ALTER TABLE ... DROP COLUMN`` in 3.35.0.
DROP_COLUMN_VERSION = (3, 35, 0)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass
class Declared:
    """A table with a schema version: its columns and renames, to fit rows to it."""

    version: int
    columns: frozenset[str]
    renames: dict[str, str] = field(default_factory=dict)  # old name -> current name
    _fits: dict[tuple[Column, ...], tuple[tuple[Column, ...], tuple[int, ...]] | None] = \
        field(default_factory=dict)

    def fit(self, cols: tuple[Column, ...]
            ) -> tuple[tuple[Column, ...], tuple[int, ...]] | None:
        """None when ``cols`` all exist in the table (the usual case: nothing to change);
        else the columns to write, under their current names, and the positions in ``cols``
        of their values (a column gone since is left out; a duplicate after a rename keeps
        the value the row gave under the current name)."""
        if cols in self._fits:
            return self._fits[cols]
        if all(c.name in self.columns for c in cols):
            out = None
        else:
            named = {c.name for c in cols}
            keep: list[tuple[Column, int]] = []
            seen: set[str] = set()
            for i, c in enumerate(cols):
                name = c.name if c.name in self.columns else self.renames.get(c.name, "")
                if not name or name in seen or (name != c.name and name in named):
                    continue
                seen.add(name)
                keep.append((Column(name, c.type) if name != c.name else c, i))
            out = (tuple(c for c, _ in keep), tuple(i for _, i in keep))
        self._fits[cols] = out
        return out


def declared_tables(conn: sqlite3.Connection) -> dict[str, Declared]:
    """Every table with a recorded schema version, by table name."""
    out: dict[str, Declared] = {}
    for name, _version, renames in conn.execute(
            "SELECT name, version, renames FROM _gateway_schema").fetchall():
        out[name] = Declared(_version, _present(conn, name), json.loads(renames))
    return out


def _present(conn: sqlite3.Connection, table: str) -> frozenset[str]:
    return frozenset(r[1] for r in conn.execute(f"PRAGMA table_info({_q(table)})"))


def _literal(value: object) -> str:
    """``value`` as an SQL constant for a ``DEFAULT`` clause."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        if value > 2**63 - 1:  # an UNSIGNED above SQLite's INTEGER: as the applier stores it
            return "X'" + value.to_bytes(8, "big").hex() + "'"
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bytes):
        return "X'" + value.hex() + "'"
    if isinstance(value, Decimal):
        value = str(value)
    return "'" + str(value).replace("'", "''") + "'"


def _column_ddl(col: SchemaColumn, affinity: Callable[[int], str]) -> str:
    ddl = f"{_q(col.name)} {affinity(field_type(col.type))}"
    if col.default is not None:
        ddl += f" DEFAULT {_literal(col.default)}"
    return ddl


def change(conn: sqlite3.Connection, event: SchemaEvent, affinity: Callable[[int], str],
           owners: Mapping[str, str] | None = None) -> bool:
    """Make ``event`` in the database inside the caller's transaction (module docstring);
    False when it was made before (its version is recorded). ``affinity(field_type)`` is the
    applier's declared type of a column. Raises ``UnsupportedOperationError`` for what this
    SQLite cannot do or a table of another schema of the same name."""
    ref = TableRef.parse(event.table)
    name = ref.name
    row = conn.execute("SELECT version, renames FROM _gateway_schema WHERE name = ?",
                       (name,)).fetchone()
    if row is not None and row[0] >= event.version:
        if row[0] == event.version and event.definition is not None:
            return _replace_branch(conn, name, event, affinity)
        return False
    owner = conn.execute("SELECT schema FROM _gateway_tables WHERE name = ?",
                         (name,)).fetchone()
    if owner is not None and owner[0] != ref.schema:
        raise UnsupportedOperationError(
            f"table {name!r} of schema {ref.schema!r} collides with the table of schema "
            f"{owner[0]!r} already in this database")
    renames: dict[str, str] = json.loads(row[1]) if row is not None else {}
    present = _present(conn, name)
    kind = event.kind
    if kind == "drop_table":
        conn.execute(f"DROP TABLE IF EXISTS {_q(name)}")
        conn.execute("DELETE FROM _gateway_tables WHERE name = ?", (name,))
        conn.execute("DELETE FROM _gateway_schema WHERE name = ?", (name,))
        return True
    if not present or kind == "create":
        # A create, or a change of a table this database never saw (its create was before
        # this applier's start or the table was dropped): the definition after the event.
        if event.definition is None:
            raise UnsupportedOperationError(f"{kind} of table {event.table} without its "
                                            f"definition")
        _create(conn, name, event, affinity, present)
    elif kind == "add_column":
        col = event.column
        if col is not None and col.name not in present:
            conn.execute(f"ALTER TABLE {_q(name)} ADD COLUMN {_column_ddl(col, affinity)}")
    elif kind == "drop_column":
        col = event.column
        if col is not None and col.name in present:
            if sqlite3.sqlite_version_info < DROP_COLUMN_VERSION:
                raise UnsupportedOperationError(
                    f"SQLite {sqlite3.sqlite_version} cannot drop a column (3.35 and later "
                    f"can): column {col.name!r} of {event.table} is kept")
            conn.execute(f"ALTER TABLE {_q(name)} DROP COLUMN {_q(col.name)}")
    elif kind == "rename_column":
        old, new = event.old_name, event.new_name
        if old in present and new not in present:
            conn.execute(f"ALTER TABLE {_q(name)} RENAME COLUMN {_q(old)} TO {_q(new)}")
        renames = {k: (new if v == old else v) for k, v in renames.items()}
        renames[old] = new
        renames.pop(new, None)  # a name back in use is the column's own again
    else:
        raise UnsupportedOperationError(f"unknown schema change {kind!r} of {event.table}")
    if kind == "add_column" and event.column is not None:
        renames.pop(event.column.name, None)
    if owner is None:
        conn.execute("INSERT INTO _gateway_tables (name, schema) VALUES (?, ?)",
                     (name, ref.schema))
    conn.execute("INSERT OR REPLACE INTO _gateway_schema (name, schema, version, renames) "
                 "VALUES (?, ?, ?, ?)", (name, ref.schema, event.version,
                                         json.dumps(renames, sort_keys=True)))
    return True


def _replace_branch(conn: sqlite3.Connection, name: str, event: SchemaEvent,
                    affinity: Callable[[int], str]) -> bool:
    """An event at the recorded version: a replay (the table already as its definition:
    False), or the winner of concurrent changes made on that version replacing the losing
    one this database applied (docs/schema.md, "Across clusters"): every column the winner
    lacks or types otherwise is dropped, then its missing columns are added with their
    defaults -- as the node reverts its rows and reads the loser's values as the default."""
    d = event.definition
    assert d is not None
    have = {r[1]: str(r[2]).upper() for r in conn.execute(f"PRAGMA table_info({_q(name)})")}
    want = {c.name: affinity(field_type(c.type)).upper() for c in d.columns}
    if not have or have == want:
        return False
    for col, decl in have.items():
        if col not in d.primary_key and want.get(col) != decl:
            if sqlite3.sqlite_version_info < DROP_COLUMN_VERSION:
                raise UnsupportedOperationError(
                    f"SQLite {sqlite3.sqlite_version} cannot drop a column (3.35 and later "
                    f"can): column {col!r} of {event.table} of a losing change is kept")
            conn.execute(f"ALTER TABLE {_q(name)} DROP COLUMN {_q(col)}")
    for c in d.columns:
        if c.name not in have or (c.name not in d.primary_key and have[c.name] != want[c.name]):
            conn.execute(f"ALTER TABLE {_q(name)} ADD COLUMN {_column_ddl(c, affinity)}")
    return True


def _create(conn: sqlite3.Connection, name: str, event: SchemaEvent,
            affinity: Callable[[int], str], present: frozenset[str]) -> None:
    d = event.definition
    assert d is not None
    if not present:
        keys = ", ".join(_q(k) for k in d.primary_key)
        conn.execute(f"CREATE TABLE {_q(name)} ("
                     + ", ".join(_column_ddl(c, affinity) for c in d.columns)
                     + f", PRIMARY KEY ({keys}))")
        return
    for col in d.columns:
        if col.name not in present:
            conn.execute(f"ALTER TABLE {_q(name)} ADD COLUMN {_column_ddl(col, affinity)}")
